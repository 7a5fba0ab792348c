// Part 1's svc with tracing on: the bench's svc server (server.ts, its `auth` mode: the shipped app, the auth core on
// every request) with tracing started first, as `svc serve` starts it (src/server.ts): from the standard OTEL_*
// environment, which the bench gives this process alone (OTEL_EXPORTER_OTLP_ENDPOINT: its OTLP receiver on
// loopback, otlp-sink.ts). server.ts itself never starts tracing, so its other modes are svc with tracing off.
//   tsx scripts/bench/traced.ts auth DB_URL PORT
import { createLogger } from '../../src/log.ts';
import { startTracing } from '../../src/trace/spans.ts';
import { VERSION } from '../../src/version.ts';

// Its line ('tracing', or 'tracing_export_failed' later) goes to the server's log file, as svc's would.
await startTracing(createLogger(undefined, 'info'), VERSION);
await import('./server.ts');
