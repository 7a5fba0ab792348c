// svc's spans (CONTRACT §8), as every layer makes them: a span around a piece of work, the span under way, its trace
// id for the audit trail, and the W3C context to send on. This file loads nothing of OpenTelemetry: the SDK
// (otel.ts) is imported only when the environment names an exporter, and until then every call here is a plain
// function call that runs the work and records nothing.
import { traceSettings } from './settings.ts';

import { NO_SPAN, type Span, type SpanOptions, type TraceLog, type Tracer } from './types.ts';

export type { Attributes, Carrier, Span, SpanKind, SpanOptions } from './types.ts';
export { errorTypeOf, NO_SPAN } from './types.ts';

let tracer: Tracer | null = null;

/** Whether spans are being made: code that would compute attributes only for a span can skip the work. */
export const tracing = (): boolean => tracer !== null;

/**
 * Runs `fn` in a new span, which is the span under way for everything `fn` does (synchronous or not) and ends when
 * `fn` returns or its promise settles; a throw marks it failed by the error's class or code, and is thrown on.
 */
export function inSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => T): T {
  return tracer === null ? fn(NO_SPAN) : tracer.run(name, options, fn);
}

/**
 * Runs `fn` outside any trace: work a request sets going that outlives it and is not its own (a connection shared by
 * every caller, a timer that serves every stream) must not carry that request's trace, nor send its context on.
 */
export const untraced = <T>(fn: () => T): T => (tracer === null ? fn() : tracer.outside(fn));

/** The span under way (a span that records nothing when there is none). */
export const currentSpan = (): Span => (tracer === null ? NO_SPAN : tracer.current());

/** The trace id of the work under way, for its audit rows; null when tracing is off or outside any trace. */
export const currentTraceId = (): string | null => (tracer === null ? null : tracer.traceId());

/** The context to send with a request svc makes (HTTP headers, an MCP request's `_meta`); null when there is none. */
export const outgoingContext = (): { traceparent: string } | null => (tracer === null ? null : tracer.context());

/**
 * Starts tracing when the environment names an exporter (settings.ts; a malformed setting throws
 * TraceSettingsError), loading the SDK only then. What it gives back exports what is queued at stop, bounded in time.
 */
export async function startTracing(
  log: TraceLog,
  version: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<{ stop(): Promise<void> }> {
  const settings = traceSettings(env);
  if (settings === null) return { stop: async () => undefined };
  const { openTracer } = await import('./otel.ts');
  const started = openTracer(settings, log, version);
  tracer = started;
  const shown = new URL(settings.url);
  shown.username = '';
  shown.password = '';
  log.info('tracing', { url: `${shown.origin}${shown.pathname}`, protocol: settings.protocol, sampler: settings.sampler.kind });
  return {
    async stop() {
      if (tracer === started) tracer = null;
      await started.shutdown();
    },
  };
}
