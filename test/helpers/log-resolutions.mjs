// Loaded with `--import` before svc: every module URL the process resolves is appended to the file named by
// SVC_RESOLUTIONS_LOG (by the hook in resolutions-to-file.mjs). How test/traces.test.ts sees that a serving svc with no
// exporter named never loads OpenTelemetry.
import { register } from 'node:module';

register(new URL('./resolutions-to-file.mjs', import.meta.url), { data: { file: process.env.SVC_RESOLUTIONS_LOG } });
