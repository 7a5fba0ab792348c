// The tracing the standard OpenTelemetry environment asks for (src/trace/settings.ts, CONTRACT §8): pure logic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { traceSettings, TraceSettingsError } from '../src/trace/settings.ts';

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

test('no exporter named, or tracing turned off: null', () => {
  assert.equal(traceSettings({}), null);
  assert.equal(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), null);
  assert.equal(traceSettings({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }), null);
  assert.equal(traceSettings({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }), null);
});

test('the endpoint: the general one gets /v1/traces, the traces one is used as it is and wins', () => {
  assert.equal(traceSettings(ENDPOINT)!.url, 'http://collector:4318/v1/traces');
  assert.equal(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c.example/otlp/' })!.url, 'https://c.example/otlp/v1/traces');
  const both = { ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://other:4318/custom' };
  assert.equal(traceSettings(both)!.url, 'http://other:4318/custom');
});

test('defaults: http/protobuf, service svc, parent-based always on, the batch bounds of the specification', () => {
  const s = traceSettings(ENDPOINT)!;
  assert.deepEqual(
    [s.protocol, s.serviceName, s.sampler, s.maxQueueSize, s.maxExportBatchSize, s.scheduledDelayMillis, s.exportTimeoutMillis],
    ['http/protobuf', 'svc', { kind: 'parentbased_always_on' }, 2048, 512, 5000, 30000],
  );
  assert.ok(Object.isFrozen(s));
});

test('what may be chosen: JSON, a service name, each sampler, a ratio (1 when not given), the batch bounds', () => {
  const s = traceSettings({
    ...ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_SERVICE_NAME: 'svc-eu',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.25',
    OTEL_BSP_MAX_QUEUE_SIZE: '100',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '10',
  })!;
  assert.deepEqual(
    [s.protocol, s.serviceName, s.sampler, s.maxQueueSize, s.maxExportBatchSize],
    ['http/json', 'svc-eu', { kind: 'parentbased_traceidratio', ratio: 0.25 }, 100, 10],
  );
  for (const kind of ['always_on', 'always_off', 'parentbased_always_off'])
    assert.deepEqual(traceSettings({ ...ENDPOINT, OTEL_TRACES_SAMPLER: kind })!.sampler, { kind });
  assert.deepEqual(traceSettings({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio' })!.sampler, { kind: 'traceidratio', ratio: 1 });
});

test('a malformed variable is refused by name, even with no exporter named; a header value is never repeated', () => {
  const refused = (env: Record<string, string>, name: string) =>
    assert.throws(
      () => traceSettings(env),
      (e) => e instanceof TraceSettingsError && e.message.startsWith(name) && !e.message.includes('s3cr3t'),
    );
  refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://collector' }, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  refused({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'collector:4318' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  refused({ ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'OTEL_EXPORTER_OTLP_PROTOCOL');
  refused({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/xml' }, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL');
  refused({ OTEL_EXPORTER_OTLP_HEADERS: 'x-key=s3cr3t,=s3cr3t' }, 'OTEL_EXPORTER_OTLP_HEADERS');
  refused({ OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-key=%E0%A4%As3cr3t' }, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS');
  refused({ OTEL_EXPORTER_OTLP_TIMEOUT: '0' }, 'OTEL_EXPORTER_OTLP_TIMEOUT');
  refused({ OTEL_EXPORTER_OTLP_COMPRESSION: 'brotli' }, 'OTEL_EXPORTER_OTLP_COMPRESSION');
  refused({ OTEL_TRACES_SAMPLER: 'half' }, 'OTEL_TRACES_SAMPLER');
  refused({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '-0.1' }, 'OTEL_TRACES_SAMPLER_ARG');
  refused({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: 'half' }, 'OTEL_TRACES_SAMPLER_ARG');
  refused({ OTEL_BSP_SCHEDULE_DELAY: '1.5' }, 'OTEL_BSP_SCHEDULE_DELAY');
  refused({ OTEL_BSP_MAX_QUEUE_SIZE: '10', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '20' }, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
  refused({ OTEL_TRACES_EXPORTER: 'jaeger' }, 'OTEL_TRACES_EXPORTER');
  refused({ OTEL_EXPORTER_OTLP_HEADERS: 'x-key=s3cr3t%0Ainjected' }, 'OTEL_EXPORTER_OTLP_HEADERS');
  refused({ OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Basic s3cr3t;more' }, 'OTEL_EXPORTER_OTLP_HEADERS');
  refused({ OTEL_EXPORTER_OTLP_HEADERS: 'x-key=' }, 'OTEL_EXPORTER_OTLP_HEADERS');
  refused({ OTEL_BSP_SCHEDULE_DELAY: String(2 ** 31) }, 'OTEL_BSP_SCHEDULE_DELAY');
  refused({ OTEL_BSP_MAX_QUEUE_SIZE: '100000000' }, 'OTEL_BSP_MAX_QUEUE_SIZE');
  refused({ OTEL_PROPAGATORS: 'b3' }, 'OTEL_PROPAGATORS');
  refused({ OTEL_EXPORTER_OTLP_CERTIFICATE: '/nonexistent/ca.pem' }, 'OTEL_EXPORTER_OTLP_CERTIFICATE');
});

test('well-formed headers pass: values URL-encoded, several pairs', () => {
  assert.ok(traceSettings({ ...ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant=eu%3Bwest' }));
  assert.ok(traceSettings({ ...ENDPOINT, OTEL_PROPAGATORS: 'tracecontext,baggage' }));
});
