// The shapes of svc's spans, shared by the facade every layer calls (spans.ts) and the SDK's side (otel.ts).

export type SpanKind = 'server' | 'client' | 'internal';
export type Value = string | number | boolean;
export type Attributes = Readonly<Record<string, Value | undefined>>;

/** Where a caller's trace context may come from: HTTP headers' values, or an MCP request's `params._meta`. */
export interface Carrier {
  readonly traceparent?: unknown;
  readonly tracestate?: unknown;
}

export interface Span {
  /** an attribute: never a token, cookie, password, argument, result or document text (CONTRACT §8) */
  set(key: string, value: Value | undefined): void;
  /** names the span anew, once what names it is known (an HTTP request's route) */
  rename(name: string): void;
  /** marks the span failed: status ERROR, and the fault's class as `error.type` (never its message) */
  fail(errorType: string): void;
}

/** The span of work that is not traced: it records nothing. */
export const NO_SPAN: Span = { set() {}, rename() {}, fail() {} };

export interface SpanOptions {
  readonly kind?: SpanKind;
  readonly attributes?: Attributes;
  /**
   * the caller's context to continue instead of the one under way; when it holds a valid traceparent, the span is
   * its child and links to the span under way (an MCP request's `_meta` inside its HTTP request)
   */
  readonly parent?: Carrier | null;
  /** made only as a child of the span under way: outside any trace (a background job's query) the work runs unrecorded */
  readonly childOnly?: boolean;
}

/** Where tracing says what it does: svc's log (log.ts), seen through what this folder needs of it. */
export interface TraceLog {
  info(event: string, fields?: Record<string, string | number | boolean | null | undefined>): void;
  warn(event: string, fields?: Record<string, string | number | boolean | null | undefined>): void;
}

/** What the SDK's side (otel.ts) gives this file once tracing starts. */
export interface Tracer {
  run<T>(name: string, options: SpanOptions, fn: (span: Span) => T): T;
  current(): Span;
  /** runs fn with no span under way */
  outside<T>(fn: () => T): T;
  traceId(): string | null;
  /** the context under way as svc's `traceparent`, or null outside any span */
  context(): { traceparent: string } | null;
  /** exports what is queued, within a bounded time, and stops */
  shutdown(): Promise<void>;
}

/** The class of a failure for `error.type`: an error's code when it has a short one, else its name. */
export function errorTypeOf(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code)) return code;
  return e instanceof Error ? e.constructor.name : 'unknown';
}
