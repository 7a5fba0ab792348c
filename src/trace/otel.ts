// The OpenTelemetry SDK behind spans.ts, loaded only when the environment names an exporter: a tracer provider with
// the sampler asked for, one batch processor (bounded: spans past its queue are dropped, and exports never wait in a
// request's path), the OTLP/HTTP exporter in protobuf or JSON, W3C trace context, and the current span carried in
// AsyncLocalStorage. Nothing is registered globally: svc's spans are the only ones, and another library's use of the
// API in this process neither sees nor changes them.
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  diag,
  DiagLogLevel,
  isSpanContextValid,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes as OtelAttributes,
  type Context,
  type Link,
  type Span as OtelSpan,
  type Tracer as OtelTracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { readFileSync } from 'node:fs';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { TraceSettings } from './settings.ts';
import { errorTypeOf, NO_SPAN, type Attributes, type Carrier, type Span, type SpanOptions, type TraceLog, type Tracer } from './types.ts';

const KINDS = { server: SpanKind.SERVER, client: SpanKind.CLIENT, internal: SpanKind.INTERNAL } as const;

/** How long a stop waits for the last spans to be exported: a collector that is down must not hold svc's exit. */
const SHUTDOWN_MS = 2000;
/** An attribute's value is cut to this many characters (a tool's name, a URI). */
const VALUE_MAX = 512;
/** A span's name is cut to this many: a caller names the tool (its span's name), and the SDK bounds attributes only. */
const NAME_MAX = 128;
/** The exporter's failures are logged at most once a minute. */
const FAILURE_LOG_MS = 60_000;

function samplerOf(settings: TraceSettings): Sampler {
  const s = settings.sampler;
  switch (s.kind) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(s.ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(s.ratio) });
  }
}

function defined(attributes: Attributes | undefined): OtelAttributes | undefined {
  if (attributes === undefined) return undefined;
  const kept: OtelAttributes = {};
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) kept[key] = value;
  return kept;
}

class Recording implements Span {
  /** marked failed already (by what the work knew of its failure, which a throw then does not overwrite) */
  failed = false;
  constructor(readonly span: OtelSpan) {}
  set(key: string, value: string | number | boolean | undefined): void {
    if (value !== undefined) this.span.setAttribute(key, value);
  }
  rename(name: string): void {
    this.span.updateName(name.slice(0, NAME_MAX));
  }
  fail(errorType: string): void {
    this.failed = true;
    this.span.setAttribute('error.type', errorType);
    this.span.setStatus({ code: SpanStatusCode.ERROR });
  }
}

/** Why an export ends at a stop: a code the exporter does not retry (a network error's would be retried, in seconds). */
const STOPPED = Object.assign(new Error('svc stopped exporting traces'), { code: 'SVC_TRACING_STOPPED' });

/**
 * Ends what the exporter still sends through `agent` (to a collector that holds it without answering) and anything
 * it would send again: an open socket or a retry's timer would keep svc from exiting.
 */
function cut(agent: HttpAgent): void {
  (agent as unknown as { addRequest(request: { destroy(e: Error): void }): void }).addRequest = (request) => request.destroy(STOPPED);
  for (const held of [agent.sockets, agent.freeSockets])
    for (const sockets of Object.values(held)) for (const socket of sockets ?? []) socket.destroy(STOPPED);
}

/** The exporter's failure as svc's log line says it: its message, without a stack. */
function failureText(message: string): string {
  try {
    const parsed = JSON.parse(message) as { message?: unknown; code?: unknown };
    if (typeof parsed.message === 'string') return parsed.message.slice(0, 200);
  } catch {
    // not the JSON of an error: the text as it is
  }
  return message.slice(0, 200);
}

/** The trace context a carrier holds as strings, or null when it holds none. */
function stringsOf(carrier: Carrier): Record<string, string> | null {
  if (typeof carrier.traceparent !== 'string') return null;
  return typeof carrier.tracestate === 'string'
    ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate }
    : { traceparent: carrier.traceparent };
}

/** The exporter's failures in svc's log, at most once a minute; the SDK's other diagnostics are dropped. */
function logFailures(log: TraceLog): void {
  let failedAt = 0;
  diag.setLogger(
    {
      error: (message) => {
        if (Date.now() - failedAt < FAILURE_LOG_MS) return;
        failedAt = Date.now();
        // The exporter's own words (a refused connection, a timeout, a status); its headers are never in them.
        log.warn('tracing_export_failed', { error: failureText(String(message)) });
      },
      warn: () => undefined,
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: DiagLogLevel.ERROR, suppressOverrideMessage: true },
  );
}

/**
 * The OTLP/HTTP exporter of the protocol asked for, and its connections, kept so that a stop can cut one a collector
 * holds without answering: a socket left open would keep svc from exiting.
 */
function exporterOf(settings: TraceSettings): { exporter: SpanExporter; agents: HttpAgent[] } {
  const agents: HttpAgent[] = [];
  const { ca, cert, key } = settings.tls;
  const httpAgentOptions = (protocol: string) => {
    const agent =
      protocol === 'http:'
        ? new HttpAgent({ keepAlive: true })
        : new HttpsAgent({
            keepAlive: true,
            ...(ca === undefined ? {} : { ca: readFileSync(ca) }),
            ...(cert === undefined ? {} : { cert: readFileSync(cert) }),
            ...(key === undefined ? {} : { key: readFileSync(key) }),
          });
    agents.push(agent);
    return agent;
  };
  const options = { url: settings.url, httpAgentOptions };
  return { exporter: settings.protocol === 'http/json' ? new JsonExporter(options) : new ProtobufExporter(options), agents };
}

export function openTracer(settings: TraceSettings, log: TraceLog, version: string): Tracer {
  logFailures(log);
  const { exporter, agents } = exporterOf(settings);
  const provider = new TracerProvider({
    sampler: samplerOf(settings),
    resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': version }),
    spanLimits: { attributeValueLengthLimit: VALUE_MAX, attributeCountLimit: 64, eventCountLimit: 16, linkCountLimit: 4 },
    spanProcessors: [
      new BatchSpanProcessor({
        exporter,
        maxQueueSize: settings.maxQueueSize,
        maxExportBatchSize: settings.maxExportBatchSize,
        scheduledDelayMillis: settings.scheduledDelayMillis,
        exportTimeoutMillis: settings.exportTimeoutMillis,
      }),
    ],
  });
  const contexts = new AsyncLocalStorageContextManager();
  contexts.enable();
  return new SdkTracer(provider, provider.getTracer('svc', version), contexts, async () => {
    for (const agent of agents) cut(agent);
  });
}

/** svc's Tracer (types.ts) on the SDK: spans carried in AsyncLocalStorage, W3C trace context in and out. */
class SdkTracer implements Tracer {
  private readonly propagator = new W3CTraceContextPropagator();

  constructor(
    private readonly provider: TracerProvider,
    private readonly tracer: OtelTracer,
    private readonly contexts: AsyncLocalStorageContextManager,
    private readonly cutExports: () => Promise<void>,
  ) {}

  /** The parent of a new span: the carrier's valid context (with a link to the span under way), else the one under way. */
  private parentOf(carrier: Carrier | null | undefined): { parent: Context; links?: Link[] } {
    const active = this.contexts.active();
    const carried = carrier ? stringsOf(carrier) : null;
    if (carried === null) return { parent: active };
    const extracted = this.propagator.extract(ROOT_CONTEXT, carried, defaultTextMapGetter);
    const remote = trace.getSpanContext(extracted);
    if (remote === undefined || !isSpanContextValid(remote)) return { parent: active };
    const here = trace.getSpanContext(active);
    return here !== undefined && isSpanContextValid(here) ? { parent: extracted, links: [{ context: here }] } : { parent: extracted };
  }

  run<T>(name: string, options: SpanOptions, fn: (span: Span) => T): T {
    if (options.childOnly && trace.getSpan(this.contexts.active()) === undefined) return fn(NO_SPAN);
    const { parent, links } = this.parentOf(options.parent);
    const span = this.tracer.startSpan(
      name.slice(0, NAME_MAX),
      { kind: KINDS[options.kind ?? 'internal'], attributes: defined(options.attributes), ...(links ? { links } : {}) },
      parent,
    );
    const handle = new Recording(span);
    const end = (e?: unknown) => {
      if (e !== undefined && !handle.failed) handle.fail(errorTypeOf(e));
      span.end();
    };
    let result: T;
    try {
      result = this.contexts.with(trace.setSpan(parent, span), fn, undefined, handle);
    } catch (e) {
      end(e);
      throw e;
    }
    if (!(result instanceof Promise)) {
      end();
      return result;
    }
    return result.then(
      (value: unknown) => {
        end();
        return value;
      },
      (e: unknown) => {
        end(e);
        throw e;
      },
    ) as T;
  }

  outside<T>(fn: () => T): T {
    return this.contexts.with(ROOT_CONTEXT, fn);
  }

  current(): Span {
    const span = trace.getSpan(this.contexts.active());
    return span === undefined || !span.isRecording() ? NO_SPAN : new Recording(span);
  }

  traceId(): string | null {
    const context = trace.getSpanContext(this.contexts.active());
    return context !== undefined && isSpanContextValid(context) ? context.traceId : null;
  }

  context(): { traceparent: string } | null {
    const carrier: Record<string, string> = {};
    this.propagator.inject(this.contexts.active(), carrier, defaultTextMapSetter);
    // A caller's tracestate is theirs: it would reach the upstream as data no audit row records. svc has none of its own.
    return carrier.traceparent === undefined ? null : { traceparent: carrier.traceparent };
  }

  async shutdown(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, SHUTDOWN_MS);
      timer.unref();
    });
    await Promise.race([this.provider.shutdown().catch(() => undefined), late]);
    clearTimeout(timer);
    await this.cutExports();
    this.contexts.disable();
  }
}
