/** The version svc reports; a packaged build replaces BUILD_COMMIT. */
export const VERSION = '0.1.0';
