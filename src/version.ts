import { BUILD } from './runtime/assets.ts';

/** The version svc reports: the package version, and the commit a packaged build was made from. */
export const VERSION = BUILD ? `${BUILD.version} (build ${BUILD.commit})` : '0.1.0 (from source)';
