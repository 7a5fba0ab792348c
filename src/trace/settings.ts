import { accessSync, constants } from 'node:fs';
import { resolve } from 'node:path';

// What the standard OpenTelemetry environment asks of svc's traces (CONTRACT §8), read once and checked: `svc check`
// and `svc serve` name a malformed setting. Nothing here loads the SDK; with no exporter named, tracing is off.
// Messages name the variable and what it must be, never its value (a header may hold a collector's key).

export type Sampler =
  | { readonly kind: 'always_on' | 'always_off' | 'parentbased_always_on' | 'parentbased_always_off' }
  | { readonly kind: 'traceidratio' | 'parentbased_traceidratio'; readonly ratio: number };

export interface TraceSettings {
  /** where spans go: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, or OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces */
  readonly url: string;
  readonly protocol: 'http/protobuf' | 'http/json';
  readonly serviceName: string;
  readonly sampler: Sampler;
  /** the batch processor's bounds (OTEL_BSP_*): spans beyond the queue are dropped, never held */
  readonly maxQueueSize: number;
  readonly maxExportBatchSize: number;
  readonly scheduledDelayMillis: number;
  readonly exportTimeoutMillis: number;
  /** files of the collector's TLS (OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE, CLIENT_CERTIFICATE, CLIENT_KEY), checked readable */
  readonly tls: { readonly ca?: string; readonly cert?: string; readonly key?: string };
}

export class TraceSettingsError extends Error {}

type Env = Readonly<Record<string, string | undefined>>;

const PROTOCOLS = ['http/protobuf', 'http/json'] as const;
/** The most spans the queue may hold: what spans may take of svc's memory while a collector is away stays bounded. */
const QUEUE_MAX = 65_536;
const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/** A variable's value with blanks trimmed; undefined when unset or empty (the specification treats both alike). */
function read(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

function url(env: Env, name: string, path: string): string | undefined {
  const value = read(env, name);
  if (value === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new TraceSettingsError(`${name} must be an http or https URL (a collector's OTLP/HTTP endpoint)`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new TraceSettingsError(`${name} must be an http or https URL: svc exports over OTLP/HTTP`);
  if (path === '') return parsed.href;
  return `${value.replace(/\/+$/, '')}/${path}`;
}

/** A timer's longest wait: Node runs a longer one at once. */
const TIMER_MAX = 2 ** 31 - 1;

function positive(env: Env, name: string, fallback: number, max = TIMER_MAX): number {
  const value = read(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) <= 0 || Number(value) > max)
    throw new TraceSettingsError(`${name} must be a whole number from 1 to ${max}`);
  return Number(value);
}

/** OTEL_EXPORTER_OTLP_HEADERS and its TRACES_ form: `key=value` pairs separated by commas (values URL-encoded). */
function checkHeaders(env: Env, name: string): void {
  const value = read(env, name);
  if (value === undefined) return;
  value.split(',').forEach((pair, i) => {
    const at = pair.indexOf('=');
    const key = at < 0 ? '' : pair.slice(0, at).trim();
    if (at < 0 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key))
      throw new TraceSettingsError(`${name}: entry ${i + 1} must be name=value with a header name before the '='`);
    const raw = pair.slice(at + 1).trim();
    let value: string;
    try {
      value = decodeURIComponent(raw);
    } catch {
      throw new TraceSettingsError(`${name}: the value of entry ${i + 1} (${key}) is not valid URL encoding`);
    }
    // The exporter reads a `;` as the start of properties (baggage's format) and drops an empty value; a header
    // cannot hold a control character, and every export would fail on one.
    if (raw === '' || raw.includes(';') || /[\x00-\x1f\x7f]/.test(value))
      throw new TraceSettingsError(
        `${name}: the value of entry ${i + 1} (${key}) must be non-empty, without control characters, with ; written %3B`,
      );
  });
}

/** A TLS file the exporter is to read: its TRACES_ variable, else the general one; refused when it cannot be read. */
function tlsFile(env: Env, suffix: string): string | undefined {
  const name = read(env, `OTEL_EXPORTER_OTLP_TRACES_${suffix}`) ? `OTEL_EXPORTER_OTLP_TRACES_${suffix}` : `OTEL_EXPORTER_OTLP_${suffix}`;
  const path = read(env, name);
  if (path === undefined) return undefined;
  try {
    accessSync(resolve(path), constants.R_OK);
  } catch {
    throw new TraceSettingsError(`${name}: svc cannot read ${path}`);
  }
  return resolve(path);
}

function sampler(env: Env): Sampler {
  const name = (read(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on').toLowerCase();
  if (!(SAMPLERS as readonly string[]).includes(name))
    throw new TraceSettingsError(`OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')}`);
  const kind = name as (typeof SAMPLERS)[number];
  if (kind !== 'traceidratio' && kind !== 'parentbased_traceidratio') return { kind };
  const arg = read(env, 'OTEL_TRACES_SAMPLER_ARG');
  const ratio = arg === undefined ? 1 : Number(arg);
  if (arg !== undefined && (!/^[0-9.eE+-]+$/.test(arg) || !Number.isFinite(ratio) || ratio < 0 || ratio > 1))
    throw new TraceSettingsError('OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (the share of traces sampled)');
  return { kind, ratio };
}

const definedAs = <K extends string>(key: K, value: string | undefined) => (value === undefined ? {} : { [key]: value });

/**
 * The tracing the environment asks for, or null when it names no exporter (or turns tracing off with
 * OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none). Throws TraceSettingsError naming a malformed variable.
 */
export function traceSettings(env: Env = process.env): TraceSettings | null {
  if (read(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return null;
  const exporter = read(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporter === 'none') return null;
  if (exporter !== undefined && exporter !== 'otlp')
    throw new TraceSettingsError('OTEL_TRACES_EXPORTER must be otlp or none: svc exports traces over OTLP/HTTP only');
  const target = url(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', '') ?? url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT', 'v1/traces') ?? null;
  const protocolName = read(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL')
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = read(env, protocolName) ?? 'http/protobuf';
  if (!(PROTOCOLS as readonly string[]).includes(protocol))
    throw new TraceSettingsError(`${protocolName} must be http/protobuf or http/json: svc exports over OTLP/HTTP (grpc is not offered)`);
  for (const name of ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS']) checkHeaders(env, name);
  for (const name of ['OTEL_EXPORTER_OTLP_TIMEOUT', 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT']) positive(env, name, 1);
  for (const name of ['OTEL_EXPORTER_OTLP_COMPRESSION', 'OTEL_EXPORTER_OTLP_TRACES_COMPRESSION']) {
    const value = read(env, name);
    if (value !== undefined && value !== 'none' && value !== 'gzip') throw new TraceSettingsError(`${name} must be none or gzip`);
  }
  const propagators = read(env, 'OTEL_PROPAGATORS');
  if (propagators !== undefined && !propagators.split(',').some((p) => p.trim() === 'tracecontext'))
    throw new TraceSettingsError('OTEL_PROPAGATORS must name tracecontext: svc continues and sends W3C trace context only');
  const chosen = sampler(env);
  const maxQueueSize = positive(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, QUEUE_MAX);
  const maxExportBatchSize = positive(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, QUEUE_MAX);
  if (maxExportBatchSize > maxQueueSize)
    throw new TraceSettingsError('OTEL_BSP_MAX_EXPORT_BATCH_SIZE must not be above OTEL_BSP_MAX_QUEUE_SIZE');
  const scheduledDelayMillis = positive(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000);
  const exportTimeoutMillis = positive(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000);
  const tls = Object.freeze({
    ...definedAs('ca', tlsFile(env, 'CERTIFICATE')),
    ...definedAs('cert', tlsFile(env, 'CLIENT_CERTIFICATE')),
    ...definedAs('key', tlsFile(env, 'CLIENT_KEY')),
  });
  // Every variable is checked above, whether an exporter is named or not: a mistake shows before it matters.
  if (target === null) return null;
  return Object.freeze({
    url: target,
    protocol: protocol as TraceSettings['protocol'],
    serviceName: read(env, 'OTEL_SERVICE_NAME') ?? 'svc',
    sampler: chosen,
    maxQueueSize,
    maxExportBatchSize,
    scheduledDelayMillis,
    exportTimeoutMillis,
    tls,
  });
}
