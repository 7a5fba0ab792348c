// One connection to one upstream MCP server, through the SDK's own Client and transports: Streamable HTTP to a
// `url`, or a stdio child svc starts from `command`. Opened on first use and again after it fails or the child exits
// (a child is started again with backoff: 1 s doubling to 60 s). Only `token_env`'s value crosses to the upstream:
// never a caller's token, cookie or header.
//
// The protocol era is the upstream's `protocol`: `auto` asks `server/discover` at 2026-07-28 first and falls back to
// the 2025 `initialize` handshake (on stdio the question goes to a throwaway sibling process, which doubles the time
// to connect), `2025` only shakes hands, `2026-07-28` only speaks that revision. The era an upstream answered in is
// kept for the life of the process, so every later connection to it (a person's session, a child started again)
// starts in that era without asking; when the upstream then refuses a request for its era, what was kept is dropped
// and the next connection asks again.
import {
  Client,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  StreamableHTTPClientTransport,
  type CallToolResult,
  type jsonSchemaValidator,
  type McpSubscription,
  type PriorDiscovery,
  type Prompt,
  type Resource,
  type ResourceTemplateType as ResourceTemplate,
  type ServerCapabilities,
  type Tool,
  type Transport,
  type VersionNegotiationMode,
} from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { z } from 'zod';
import type { UpstreamConfig } from '../config/load.ts';
import type { Logger } from '../log.ts';
import { VERSION } from '../version.ts';
import { outgoingContext, untraced } from '../trace/spans.ts';
import { AnswerTooLarge, upstreamFetch } from './http-fetch.ts';
import { nestingDepth } from '../domain/canonical-json.ts';
import { launch } from './stdio-sandbox.ts';
import { InputAsked, MissingCapability, QUESTION_METHODS, type QuestionMethod } from '../domain/questions.ts';

const BACKOFF_FIRST_MS = 1000;
/** How long closing a connection waits for an HTTP upstream to end its session. */
const SESSION_END_MS = 2000;
/** An upstream's answer nested deeper than this is refused. */
export const NESTING_MAX = 64;

/** An answer the upstream sent that breaks what svc takes (the call's `protocol` fault); `code`: its JSON-RPC error's. */
export class ProtocolFault extends Error {
  constructor(
    message: string,
    readonly code?: number,
  ) {
    super(message);
  }
}
/** A failure of svc's own before the request left for the upstream: the upstream is not at fault. */
export class SvcFault extends Error {}
/** A call the upstream did not answer within its `timeout` (the call's `timeout` fault). */
export class UpstreamTimeout extends Error {}
/** A call its caller cancelled (or whose caller went away) before the upstream answered it. */
export class Cancelled extends Error {}

/** The requests a caller makes of an upstream through svc. */
export type RelayedMethod = 'tools/call' | 'prompts/get' | 'resources/read' | 'completion/complete';

/** What of the caller's request goes with it to the upstream, besides its params. */
export interface Relay {
  /** the caller asked for progress: the upstream's progress on this request, as it comes */
  readonly progress?: (progress: { progress: number; total?: number; message?: string }) => void;
  /** aborted when the caller cancels the request or goes */
  readonly signal?: AbortSignal;
  /**
   * asks the caller's client a question the upstream asks during this request, on the request's own stream, and
   * resolves with the client's answer; it refuses (MissingCapability) what the client did not declare. Absent: the
   * caller cannot be asked anything now.
   */
  readonly ask?: (method: QuestionMethod, params: Record<string, unknown>) => Promise<Record<string, unknown>>;
  /**
   * a 2026-07-28 upstream's `input_required` answer is handed back as it is (its questions go to a 2026-07-28 caller
   * in a result of svc's own, and come back in the caller's retry), not asked here
   */
  readonly passInput?: boolean;
  /** the caller's answers to an upstream's earlier `input_required`, with the upstream's own state: sent with the request */
  readonly resume?: { readonly inputResponses: Record<string, unknown>; readonly requestState?: string };
}

/**
 * What svc's client declares to an upstream: the questions it can take to the person whose request it is. Roots only
 * to an HTTP upstream: a stdio child runs on svc's host, where a caller's roots would name paths of svc's, not theirs.
 */
function relayedCapabilities(upstream: UpstreamConfig): Record<string, unknown> {
  const questions = { elicitation: { form: {}, url: {} }, sampling: {} };
  return upstream.transport.kind === 'http' ? { ...questions, roots: {} } : questions;
}
/** An upstream's 2026-07-28 request is answered and retried at most this many rounds. */
const INPUT_ROUNDS = 8;
const MISSING_CAPABILITY = -32021;
/** A tool listing reads at most this many pages. */
const LIST_PAGES = 20;
const BACKOFF_MAX_MS = 60_000;

/** The environment a stdio child gets: its configured env.* plus PATH and HOME, nothing else of svc's. */
export function childEnvironment(configured: Readonly<Record<string, string>>): Record<string, string> {
  // The SDK adds a few of svc's own variables (LOGNAME, SHELL, TERM, USER) to every child; undefined keeps them out.
  const cleared = { LOGNAME: undefined, SHELL: undefined, TERM: undefined, USER: undefined, USERNAME: undefined } as unknown as Record<
    string,
    string
  >;
  const inherited: Record<string, string> = {};
  for (const key of ['PATH', 'HOME']) if (process.env[key] !== undefined) inherited[key] = process.env[key]!;
  return { ...cleared, ...inherited, ...configured };
}

/** The `_meta` key an identity assertion travels in; to an HTTP upstream it goes as the X-Svc-Identity header. */
export const IDENTITY_META = 'svc/identity';

/**
 * A request body's identity assertion moved from its `_meta` to the header X-Svc-Identity. Only that key moves: in
 * the 2026-07-28 era every request's `_meta` also holds the SDK's protocol keys (version, client info and
 * capabilities), which stay where they are.
 */
function identityToHeader(init: RequestInit | undefined): RequestInit | undefined {
  if (typeof init?.body !== 'string' || !init.body.includes(IDENTITY_META)) return init;
  const message = JSON.parse(init.body) as { params?: { _meta?: Record<string, unknown> } };
  const meta = message.params?._meta;
  const assertion = meta?.[IDENTITY_META];
  if (typeof assertion !== 'string') return init;
  delete meta![IDENTITY_META];
  if (Object.keys(meta!).length === 0) delete message.params!._meta;
  const headers = new Headers(init.headers);
  headers.set('X-Svc-Identity', assertion);
  return { ...init, headers, body: JSON.stringify(message) };
}

/** The request with svc's W3C trace context as headers, when svc is tracing the work under way (CONTRACT §8). */
function withTraceContext(init: RequestInit | undefined): RequestInit | undefined {
  const traced = outgoingContext();
  if (traced === null) return init;
  const headers = new Headers(init?.headers);
  headers.set('traceparent', traced.traceparent);
  return { ...init, headers };
}

/**
 * The `_meta` svc adds to a request it sends an upstream: the identity assertion, and svc's own traceparent when it
 * traces the work (a stdio upstream has no other way to get it; an HTTP one gets it as a header too, transportFor).
 * Never the caller's `_meta` or tracestate, which end at svc.
 */
function metaOf(identity: string | null): { _meta?: Record<string, string> } {
  const traced = outgoingContext();
  if (identity === null && traced === null) return {};
  return { _meta: { ...traced, ...(identity === null ? {} : { [IDENTITY_META]: identity }) } };
}

/** Whether a request opens a `subscriptions/listen` stream (the SDK names a 2026-07-28 request's method in a header). */
function opensListen(init: RequestInit | undefined): boolean {
  return init?.headers instanceof Headers && init.headers.get('mcp-method') === 'subscriptions/listen';
}

/**
 * A person's own token for each request to an `auth = oauth` upstream (it may be refreshed between requests); given
 * the token the upstream just refused, a newer one (refreshed now) or the same when there is none.
 */
export type BearerSource = (refused?: string) => Promise<string>;

/** The transport to an upstream, and what to release with it (an HTTP upstream's sockets). */
function transportFor(
  upstream: UpstreamConfig,
  oversized: () => void,
  bearer: BearerSource | null,
): { transport: Transport; release(): void } {
  const t = upstream.transport;
  if (t.kind === 'http') {
    const headers: Record<string, string> = upstream.token === null ? {} : { Authorization: `Bearer ${upstream.token}` };
    const http = upstreamFetch(oversized);
    // A listen stream lasts as long as the connection: cut off past 10 MiB, it ends, and no call is blamed for it.
    const listening = upstreamFetch(() => undefined);
    const transport = new StreamableHTTPClientTransport(new URL(t.url), {
      // `manual`: the SDK follows no redirect, not even within the upstream's origin (and svc's fetch follows none).
      requestInit: { headers, redirect: 'manual' },
      fetch: async (input, init) => {
        const sent = withTraceContext(identityToHeader(init));
        const via = opensListen(sent) ? listening : http;
        if (bearer === null) return via.fetch(input, sent);
        const send = (token: string) => {
          const withToken = new Headers(sent?.headers);
          withToken.set('Authorization', `Bearer ${token}`);
          return via.fetch(input, { ...sent, headers: withToken });
        };
        // A token the upstream refuses before its time (revoked there, or its key rotated) is refreshed once, and
        // the request sent again: refused with 401, it was not acted on.
        const token = await bearer();
        const answer = await send(token);
        if (answer.status !== 401) return answer;
        const fresh = await bearer(token);
        if (fresh === token) return answer;
        await answer.body?.cancel();
        return send(fresh);
      },
    });
    return {
      transport,
      release: () => {
        http.close();
        listening.close();
      },
    };
  }
  // In a sandbox where the host has one (stdio-sandbox.ts): the child can read neither svc nor its database. The SDK's
  // own stdio transport, so that `auto` asks its question of a throwaway sibling started the same way.
  const transport = new StdioClientTransport({ ...launch(t), env: childEnvironment(t.env), stderr: 'pipe' });
  return { transport, release: () => undefined };
}

/** The era each upstream answered in, by upstream and server: for the life of the process. */
const eras = new Map<string, PriorDiscovery>();
/** Connections asking an upstream its era now: another connection to it waits for the answer instead of asking too. */
const asking = new Map<string, Promise<unknown>>();
const eraKey = (upstream: UpstreamConfig) => `${upstream.name}\n${upstream.server}`;

/** The era kept for the upstream that its `protocol` lets a connection start in without asking; undefined: ask. */
function keptEra(upstream: UpstreamConfig): PriorDiscovery | undefined {
  const kept = eras.get(eraKey(upstream));
  if (kept === undefined || upstream.protocol === '2025') return undefined;
  return upstream.protocol === '2026-07-28' && kept.kind !== 'modern' ? undefined : kept;
}

/** How a connection asks: `auto`, only the handshake (`2025`), or only 2026-07-28 (a pin, no fallback). */
function negotiation(upstream: UpstreamConfig): VersionNegotiationMode {
  if (upstream.protocol === 'auto') return 'auto';
  return upstream.protocol === '2025' ? 'legacy' : { pin: upstream.protocol };
}

const UNSUPPORTED_VERSION = -32022;

/** The JSON-RPC error in the body of an HTTP answer the SDK refused, if it holds one. */
function errorIn(e: SdkHttpError): { code?: unknown; data?: unknown } | undefined {
  const text = (e.data as { text?: unknown } | undefined)?.text;
  if (typeof text !== 'string') return undefined;
  try {
    const error = (JSON.parse(text) as { error?: unknown }).error;
    return typeof error === 'object' && error !== null ? error : undefined;
  } catch {
    return undefined;
  }
}

const codeIn = (e: SdkHttpError): unknown => errorIn(e)?.code;

/**
 * Whether the upstream refused a request for the revision it was sent in, without acting on it: the specification's
 * unsupported-version error whose list of revisions leaves that one out (a tool that relays another server's
 * -32022 names no such list, or one that holds it), or, while connecting, an HTTP 400 answer to a 2026-07-28
 * request, as a 2025 server answers a request outside any session of its own.
 */
function refusedRevision(e: unknown, revision: string | undefined): boolean {
  const error = e instanceof ProtocolError ? e : e instanceof SdkHttpError ? errorIn(e) : undefined;
  if (error?.code !== UNSUPPORTED_VERSION) return false;
  const supported = (error.data as { supported?: unknown } | undefined)?.supported;
  return Array.isArray(supported) && revision !== undefined && !supported.includes(revision);
}

/** Whether a connection could not be made in the era it was started in (a kept one, which the upstream left). */
function refusedForEra(e: unknown, modern: boolean): boolean {
  if (e instanceof ProtocolError) return e.code === UNSUPPORTED_VERSION;
  if (!(e instanceof SdkHttpError) || e.status !== 400) return false;
  return modern || codeIn(e) === UNSUPPORTED_VERSION;
}

/**
 * Whether an answer on an open connection says the upstream no longer speaks its era: its revision refused, a bare
 * HTTP 400 to a 2026-07-28 request, or an answer in 2025's form to one. Only the first says the request was not acted on.
 */
function eraChanged(e: unknown, modern: boolean, revision: string | undefined): boolean {
  if (refusedRevision(e, revision)) return true;
  if (modern && e instanceof SdkHttpError && e.status === 400) return true;
  const violation = e instanceof SdkError ? (e.data as { violation?: unknown } | undefined)?.violation : undefined;
  return modern && violation === 'missing-resultType';
}

/** An upstream's kept era is dropped at most this often: whatever it answers, svc asks it again no more often. */
const ERA_FORGET_MS = 10_000;
/** When each upstream's kept era was last dropped, by upstream and server. */
const forgotten = new Map<string, number>();

/** An error of the SDK's client as the call's fault: timeout, protocol, or (anything else) unavailable. */
function asFault(e: unknown): unknown {
  if (e instanceof ProtocolError) return new ProtocolFault(`the upstream answered error ${e.code}: ${e.message.slice(0, 200)}`, e.code);
  if (!(e instanceof SdkError)) return e;
  if (e.code === SdkErrorCode.RequestTimeout) return new UpstreamTimeout(e.message);
  const unreadable = e.code === SdkErrorCode.InvalidResult || e.code === SdkErrorCode.UnsupportedResultType;
  return unreadable ? new ProtocolFault(e.message.slice(0, 300)) : e;
}

/**
 * svc's client compiles and checks no JSON Schema of an upstream's: the SDK would compile an Ajv validator for every
 * outputSchema listed (a hostile listing held svc's event loop for seconds). Calls are plain requests, so nothing asks
 * for one; this makes sure nothing compiles one either.
 */
const NO_SCHEMA_CHECK: jsonSchemaValidator = {
  getValidator: () => (input) => ({ valid: true, data: input as never, errorMessage: undefined }),
};

/**
 * What svc reads of a listing, checked to one level inside each definition: schemas, annotations and `_meta` are
 * objects, looked into by svc's own rule (definition-text.ts) and not here. The SDK's 2025 schema descends into every
 * property of an input schema, and a definition nested some thousands deep overflowed its stack, failing the whole
 * listing instead of holding that one tool.
 */
const LISTING = z.looseObject({
  tools: z.array(
    z.looseObject({
      name: z.string(),
      title: z.string().optional(),
      description: z.string().optional(),
      inputSchema: z.looseObject({
        type: z.literal('object'),
        properties: z.record(z.string(), z.unknown()).optional(),
        required: z.array(z.string()).optional(),
      }),
      outputSchema: z.looseObject({}).optional(),
      annotations: z
        .looseObject({
          title: z.string().optional(),
          readOnlyHint: z.boolean().optional(),
          destructiveHint: z.boolean().optional(),
          idempotentHint: z.boolean().optional(),
          openWorldHint: z.boolean().optional(),
        })
        .optional(),
      _meta: z.record(z.string(), z.unknown()).optional(),
    }),
  ),
  nextCursor: z.string().optional(),
});

/** Any result: what svc passes through is the caller's client's to check (bounded in size and nesting here). */
const ANY_RESULT = z.looseObject({});

/** What svc reads of a prompt listing: names and strings checked, the rest looked into by svc's own rule. */
const PROMPTS = z.looseObject({
  prompts: z.array(
    z.looseObject({
      name: z.string(),
      title: z.string().optional(),
      description: z.string().optional(),
      arguments: z.array(z.looseObject({ name: z.string() })).optional(),
      _meta: z.record(z.string(), z.unknown()).optional(),
    }),
  ),
  nextCursor: z.string().optional(),
});

/** What svc reads of a listing of resources or templates: their URI and name, the rest passed on as listed. */
const RESOURCE_ENTRY = {
  name: z.string(),
  title: z.string().optional(),
  description: z.string().optional(),
  mimeType: z.string().optional(),
};
const RESOURCES = z.looseObject({
  resources: z.array(z.looseObject({ uri: z.string(), ...RESOURCE_ENTRY })),
  nextCursor: z.string().optional(),
});
const TEMPLATES = z.looseObject({
  resourceTemplates: z.array(z.looseObject({ uriTemplate: z.string(), ...RESOURCE_ENTRY })),
  nextCursor: z.string().optional(),
});

/** The client capability a question needs, for the missing-capability error's data. */
function requiredFor(method: QuestionMethod): Record<string, unknown> {
  return method === 'elicitation/create' ? { elicitation: {} } : method === 'sampling/createMessage' ? { sampling: {} } : { roots: {} };
}

/** Waits before listening again after a listen stream ended: 1 s doubling to 60 s, back to 1 s after a steady one. */
const LISTEN_AGAIN_FIRST_MS = 1000;
/** A listen stream open this long was steady: the waits start afresh after it ends. */
const LISTEN_STEADY_MS = 60_000;
/** More change notifications than this in LISTEN_NOTICES_MS end a listen stream. */
const LISTEN_NOTICES = 10;
const LISTEN_NOTICES_MS = 10_000;

/** What an upstream says of its resources on a connection: a subscribed URI of its own updated, or its list changed. */
export type ResourceNotice = { readonly updated: string } | { readonly listChanged: true };

export class UpstreamConnection {
  private client: Promise<Client> | null = null;
  private failures = 0;
  private retryAt = 0;
  private stopped = false;
  /** when the current connection was opened */
  private openedAt = 0;
  /** counts connections opened: a close event of an older one changes nothing */
  private generation = 0;
  /** when an answer was last cut off for its size (the calls failing with it are too_large, not unavailable) */
  private oversizedAt = 0;
  /** calls under way */
  private inFlight = 0;
  /** the relays of the requests under way, each with whom to ask the upstream's questions */
  private readonly relays = new Set<Relay>();
  /** listen streams that ended in a row (the wait before the next grows) */
  private listenEnded = 0;
  /** the listen stream open now, the change notifications heard on it lately, and how to listen again */
  private listening: { subscription: McpSubscription; heard: number[]; again: () => void } | null = null;
  /** 2026-07-28: the listen streams that hold resource subscriptions, by the upstream's URI */
  private readonly watching = new Map<string, McpSubscription>();
  /** a connection whose era changed while other calls were under way on it: replaced once they have ended */
  private replaceWhenIdle: Promise<Client> | null = null;
  /** when the last call ended (or the connection was made) */
  usedAt = Date.now();

  constructor(
    readonly upstream: UpstreamConfig,
    private readonly log: Logger,
    /** told when the upstream says its tool list changed */
    private readonly onToolsChanged: () => void,
    /** auth = oauth: the person's token, asked for each request; null: the upstream's own token_env, if any */
    private readonly bearer: BearerSource | null = null,
    /**
     * listen: in the 2026-07-28 era, hold a `subscriptions/listen` stream for the upstream's tool list changes (the
     * upstream's one shared connection; a person's own does not). resources: told of the upstream's
     * notifications/resources/updated (a subscribed URI, its own) and resources/list_changed on this connection
     */
    private readonly options: {
      readonly listen?: boolean;
      readonly resources?: (notice: ResourceNotice) => void;
      /** the person this connection is (a session or a process of their own): only then are a 2025 upstream's questions relayed */
      readonly person?: number;
    } = {},
  ) {}

  /** The connected client: the open one, or a new connection (refused while a restart's backoff runs). */
  connected(): Promise<Client> {
    if (this.stopped) return Promise.reject(new Error('the upstream connection is closed'));
    if (this.client) return this.client;
    if (Date.now() < this.retryAt) return Promise.reject(new Error('the upstream is restarting'));
    // Opened for whichever caller came first, and kept for every caller: in no caller's trace.
    const opening = untraced(() => this.open(++this.generation));
    this.client = opening;
    opening.catch(() => {
      if (this.client === opening) this.lost();
    });
    return opening;
  }

  /**
   * A connection in the era kept for the upstream, or else one that asks (and keeps the answer). Started in a kept
   * 2025 era, a handshake the upstream refuses for its version drops what was kept and asks again.
   */
  private async open(generation: number): Promise<Client> {
    this.openedAt = Date.now();
    const key = eraKey(this.upstream);
    if (this.upstream.protocol !== '2025' && keptEra(this.upstream) === undefined) await asking.get(key)?.catch(() => undefined);
    const kept = keptEra(this.upstream);
    if (kept !== undefined) {
      try {
        return await this.attempt(generation, kept);
      } catch (e) {
        if (!refusedForEra(e, false)) throw e;
        this.forgetEra(kept.kind);
      }
    }
    if (this.upstream.protocol === '2025') return this.attempt(generation, undefined);
    const asked = this.attempt(generation, undefined);
    asking.set(key, asked);
    try {
      return await asked;
    } finally {
      if (asking.get(key) === asked) asking.delete(key);
    }
  }

  /** One connection: started in the `kept` era, or asking as the upstream's `protocol` says (the answer is kept). */
  private async attempt(generation: number, kept: PriorDiscovery | undefined): Promise<Client> {
    const client = new Client(
      { name: 'svc', version: VERSION },
      {
        versionNegotiation: { mode: kept === undefined ? negotiation(this.upstream) : 'legacy' },
        // A 2026-07-28 question to the person (an `input_required` result) is never answered by the SDK: svc asks the
        // person whose request it is (send), or the call fails.
        inputRequired: { autoFulfill: false },
        capabilities: relayedCapabilities(this.upstream),
        jsonSchemaValidator: NO_SCHEMA_CHECK,
      },
    );
    client.setNotificationHandler('notifications/tools/list_changed', () => this.toolsChanged());
    // What the upstream says of its resources, on this connection: passed on as it is (mcp/changes.ts decides who hears it).
    client.setNotificationHandler('notifications/resources/updated', (n) => this.options.resources?.({ updated: n.params.uri }));
    client.setNotificationHandler('notifications/resources/list_changed', () => this.options.resources?.({ listChanged: true }));
    // A 2025 upstream's question during a request goes to the person whose request it is: the one relayed request
    // under way on this connection. With none, or more than one (a shared process's), it cannot be told whose it is,
    // and is refused, never guessed.
    const declared = relayedCapabilities(this.upstream);
    for (const method of QUESTION_METHODS.filter((m) => m !== 'roots/list' || 'roots' in declared))
      (client.setRequestHandler as unknown as (m: string, h: (r: { params?: Record<string, unknown> }) => Promise<unknown>) => void)(
        method,
        (request) => this.question(method, request.params ?? {}),
      );
    const { transport, release } = transportFor(
      this.upstream,
      () => {
        this.oversizedAt = Date.now();
      },
      this.bearer,
    );
    // The SDK's stdio reader refuses a line over 10 MiB and ends the connection; it says so here.
    client.onerror = (e) => {
      if (/exceeded maximum size/.test(e.message)) this.oversizedAt = Date.now();
    };
    if (transport instanceof StdioClientTransport) {
      transport.stderr?.on('data', (chunk: Buffer) => {
        this.log.debug?.('upstream_stderr', { upstream: this.upstream.name, text: chunk.toString('utf8').slice(0, 500) });
      });
    }
    let open = false;
    client.onclose = () => {
      release();
      if (open && !this.stopped && generation === this.generation) this.lost();
    };
    try {
      await client.connect(transport, { timeout: this.upstream.timeoutMs, ...(kept === undefined ? {} : { prior: kept }) });
    } catch (e) {
      release();
      // Whatever the SDK left open of a connection that failed (a child, a stream): not waited for.
      void client.close().catch(() => undefined);
      throw e;
    }
    open = true;
    this.failures = 0;
    if (kept === undefined && this.upstream.protocol !== '2025') this.keepEra(client);
    if (this.options.listen === true) this.listen(client, generation);
    return client;
  }

  /** Keeps the era the upstream answered in (with what it said of itself in 2026-07-28): later connections start in it. */
  private keepEra(client: Client): void {
    const discover = client.getDiscoverResult();
    const era: PriorDiscovery =
      client.getProtocolEra() === 'modern' && discover !== undefined ? { kind: 'modern', discover } : { kind: 'legacy' };
    eras.set(eraKey(this.upstream), era);
    this.log.info('upstream_era', { upstream: this.upstream.name, era: era.kind });
  }

  /**
   * The upstream refused the era `was`: it is no longer kept (unless another connection kept the era it answered in
   * since), and the next connection asks.
   */
  private forgetEra(was: PriorDiscovery['kind']): void {
    const key = eraKey(this.upstream);
    if (eras.get(key)?.kind !== was) return;
    eras.delete(key);
    this.log.info('upstream_era_changed', { upstream: this.upstream.name, was });
  }

  /**
   * In the 2026-07-28 era, a `subscriptions/listen` stream for the tool list's changes, when the upstream says its list
   * changes; its notifications reach the handler set above. A stream that ends, or could not be opened, is opened again
   * after a wait, and the tools are listed again then (a change in between was not heard).
   */
  private listen(client: Client, generation: number): void {
    if (client.getProtocolEra() !== 'modern' || client.getServerCapabilities()?.tools?.listChanged !== true) return;
    const current = () => !this.stopped && generation === this.generation && this.client !== null;
    const again = () => {
      if (!current()) return;
      const wait = Math.min(LISTEN_AGAIN_FIRST_MS * 2 ** this.listenEnded++, BACKOFF_MAX_MS);
      setTimeout(() => {
        if (!current()) return;
        this.onToolsChanged();
        this.listen(client, generation);
      }, wait).unref();
    };
    client.listen({ toolsListChanged: true }, { timeout: this.upstream.timeoutMs }).then(
      (subscription: McpSubscription) => {
        const since = Date.now();
        this.listening = { subscription, heard: [], again };
        void subscription.closed.then((cause) => {
          if (this.listening?.subscription === subscription) this.listening = null;
          // Only a stream that stayed open a while starts the waits afresh: one that ends at once waits longer each time.
          if (Date.now() - since >= LISTEN_STEADY_MS) this.listenEnded = 0;
          if (cause !== 'local') again();
        });
      },
      (e: unknown) => {
        this.log.warn('upstream_listen_failed', {
          upstream: this.upstream.name,
          error: e instanceof Error ? e.message.slice(0, 200) : 'failed',
        });
        // An upstream that answers the listen with an error is not asked again on this connection: `refresh` lists it.
        if (!(e instanceof ProtocolError)) again();
      },
    );
  }

  /**
   * The upstream says its tools changed. On a listen stream, more than LISTEN_NOTICES in LISTEN_NOTICES_MS end the
   * stream (svc lists the tools again when it listens again, after the wait): a flood costs svc nothing more.
   */
  private toolsChanged(): void {
    const listening = this.listening;
    if (listening !== null) {
      const now = Date.now();
      listening.heard = listening.heard.filter((t) => now - t < LISTEN_NOTICES_MS);
      listening.heard.push(now);
      if (listening.heard.length > LISTEN_NOTICES) {
        this.listening = null;
        this.log.warn('upstream_listen_flood', { upstream: this.upstream.name });
        void listening.subscription.close().catch(() => undefined);
        listening.again();
        return;
      }
    }
    this.onToolsChanged();
  }

  /**
   * The connection ended or failed: the next use opens a new one, after the backoff for a stdio child (`failed`
   * false: at once, as for a child cut off for an oversized answer, or one whose era changed).
   */
  private lost(failed = true): void {
    if (this.client === null) return;
    const old = this.client;
    this.client = null;
    void old?.then((c) => c.close()).catch(() => undefined);
    if (failed && this.upstream.transport.kind === 'stdio' && this.oversizedAt < this.openedAt) {
      const wait = Math.min(BACKOFF_FIRST_MS * 2 ** this.failures, BACKOFF_MAX_MS);
      this.failures++;
      this.retryAt = Date.now() + wait;
      this.log.warn('upstream_lost', { upstream: this.upstream.name, restart_in_ms: wait });
    }
  }

  /**
   * `send` on the connection; when the upstream no longer speaks the connection's era (it changed since the era was
   * kept), the kept era is dropped (at most once every ERA_FORGET_MS per upstream) and the connection replaced: now,
   * or once the calls under way on it have ended, so one person's call never cuts off another's. `send` is made again
   * on a connection that asks when `repeatable` says the upstream may act on it twice, or the upstream refused its
   * revision (and so did not act on it) and nobody else's call holds the connection.
   */
  private async inEra<T>(current: Promise<Client>, send: (client: Client) => Promise<T>, repeatable: boolean): Promise<T> {
    const client = await current;
    try {
      return await send(client);
    } catch (e) {
      const modern = client.getProtocolEra() === 'modern';
      const revision = client.getNegotiatedProtocolVersion();
      if (!eraChanged(e, modern, revision)) throw e;
      // While svc still keeps the era this connection is in, dropping it costs the next connection a question: at most
      // once every ERA_FORGET_MS. Once another connection has learnt the upstream's new era, this one is only replaced.
      const key = eraKey(this.upstream);
      const mine = modern ? 'modern' : 'legacy';
      if (eras.get(key)?.kind === mine) {
        if (Date.now() - (forgotten.get(key) ?? 0) < ERA_FORGET_MS) throw e;
        forgotten.set(key, Date.now());
        this.forgetEra(mine);
      }
      const othersUnderWay = this.inFlight > (repeatable ? 0 : 1);
      if (othersUnderWay) this.replaceWhenIdle = current;
      else if (this.client === current) this.lost(false);
      if (othersUnderWay || (!repeatable && !refusedRevision(e, revision))) throw e;
      return send(await this.connected());
    }
  }

  /** The calls under way on a connection whose era changed have ended: it is replaced now. */
  private settle(): void {
    if (this.inFlight > 0 || this.replaceWhenIdle === null) return;
    if (this.client === this.replaceWhenIdle) this.lost(false);
    this.replaceWhenIdle = null;
  }

  /**
   * The tools the upstream offers, page by page, up to `max` (one more, so the caller can tell there were more) and
   * at most LIST_PAGES pages: a hostile upstream cannot make svc hold more than that.
   */
  async listTools(max: number): Promise<Tool[]> {
    try {
      return await this.inEra(this.connected(), (client) => this.listOn(client, max), true);
    } catch (e) {
      throw asFault(e);
    }
  }

  private async listOn(client: Client, max: number): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < LIST_PAGES; page++) {
      // Asked as a plain request, read by LISTING: the SDK's listTools also compiles a JSON Schema validator for every
      // outputSchema listed, and keeps them (a hostile listing held svc's event loop for seconds, and its memory grew).
      const answer = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, LISTING, {
        timeout: this.upstream.timeoutMs,
      });
      for (const tool of answer.tools) {
        if (tools.length > max) return tools;
        tools.push(tool as Tool);
      }
      cursor = answer.nextCursor;
      if (cursor === undefined) break;
    }
    return tools;
  }

  /**
   * Calls one tool. Its faults: UpstreamTimeout, ProtocolFault (an error answer, or one svc cannot read),
   * AnswerTooLarge, SvcFault (svc could not send it), Cancelled (the caller cancelled), or the SDK's own error (the
   * upstream cannot be reached).
   */
  async callTool(
    name: string,
    args: Record<string, unknown> | undefined,
    identity: string | null = null,
    relay: Relay = {},
  ): Promise<CallToolResult> {
    return (await this.send('tools/call', { name, ...(args === undefined ? {} : { arguments: args }) }, identity, relay)) as CallToolResult;
  }

  /**
   * One request a caller makes of the upstream through svc (a tool call, a prompt, a read, a completion), passed
   * through as it is, with the identity assertion in its `_meta` when there is one. The caller's progress for it
   * reaches `relay.progress`; `relay.signal` cancels it at the upstream (the SDK sends notifications/cancelled, or
   * closes the request's stream). The faults are callTool's.
   */
  async send(
    method: RelayedMethod,
    params: Record<string, unknown>,
    identity: string | null,
    relay: Relay = {},
  ): Promise<Record<string, unknown>> {
    this.inFlight++;
    const current = this.connected();
    const started = Date.now();
    try {
      const meta = metaOf(identity);
      // A plain request, passed through as it is: no validation against the upstream's own outputSchema (an
      // upstream's pattern could hold svc's event loop; the caller's client validates against the approved schema).
      const request = { method, params: { ...params, ...meta } };
      const options = {
        timeout: this.upstream.timeoutMs,
        ...(relay.signal === undefined ? {} : { signal: relay.signal }),
        ...(relay.progress === undefined ? {} : { onprogress: relay.progress }),
      };
      const send = (client: Client) => this.rounds(client, request, options, relay);
      const answer = await this.inEra(current, send, false);
      // Bounded as it is read: an answer nested deeper could not be written back to the caller.
      if (nestingDepth(answer, NESTING_MAX) > NESTING_MAX) throw new ProtocolFault(`the answer nests deeper than ${NESTING_MAX} levels`);
      return answer;
    } catch (e) {
      if (relay.signal?.aborted) throw new Cancelled('the caller cancelled the request');
      // Arguments no JSON text can hold (nested too deep for JSON.stringify) fail as the request is written, before
      // anything is sent: svc's failure, not the upstream's.
      if (e instanceof RangeError) throw new SvcFault(`the request could not be encoded: ${e.message}`);
      // A closed connection is replaced now, not when its close event comes: the next call must not find it.
      const closed = this.oversizedAt >= started || (e instanceof SdkError && e.code === SdkErrorCode.ConnectionClosed);
      if (closed && this.client === current) this.lost();
      if (this.oversizedAt >= started) throw new AnswerTooLarge('the upstream answered more than 10 MiB');
      throw asFault(e);
    } finally {
      this.inFlight--;
      this.relays.delete(relay);
      this.usedAt = Date.now();
      this.settle();
    }
  }

  /**
   * A request and, for a 2026-07-28 upstream that answers `input_required`, its rounds: each question asked of the
   * caller (relay.ask) and the request sent again with the answers and the upstream's own state, at most INPUT_ROUNDS.
   * A question the caller's client cannot take is answered to the upstream with the missing-capability error.
   */
  private async rounds(
    client: Client,
    request: { method: RelayedMethod; params: Record<string, unknown> },
    options: Record<string, unknown>,
    relay: Relay,
  ): Promise<Record<string, unknown>> {
    const resume = relay.resume;
    let params =
      resume === undefined
        ? request.params
        : {
            ...request.params,
            inputResponses: resume.inputResponses,
            ...(resume.requestState === undefined ? {} : { requestState: resume.requestState }),
          };
    // Only now, on the open connection, is the request the caller's: a question the upstream asks while connecting
    // (roots at start) belongs to no request.
    this.relays.add(relay);
    for (let round = 0; ; round++) {
      const answer = (await client.request({ method: request.method, params }, ANY_RESULT, {
        ...options,
        allowInputRequired: true,
      } as never)) as Record<string, unknown>;
      if (answer.resultType !== 'input_required' || relay.passInput === true) return answer;
      if (round >= INPUT_ROUNDS) throw new ProtocolFault(`the upstream asked for input more than ${INPUT_ROUNDS} times`);
      const asked = InputAsked.from(answer);
      if (asked.unrelayed > 0) throw new ProtocolFault('the upstream asked for input svc does not relay');
      const responses: Record<string, unknown> = {};
      for (const [key, question] of Object.entries(asked.inputRequests))
        responses[key] = await this.ask(relay, question.method, question.params);
      const state = asked.requestState;
      params = { ...request.params, inputResponses: responses, ...(state === undefined ? {} : { requestState: state }) };
    }
  }

  /** The caller's answer to one question, or what the upstream is told when there is none. */
  private async ask(relay: Relay, method: QuestionMethod, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (relay.ask === undefined) throw new MissingCapability(method);
    return relay.ask(method, params);
  }

  /**
   * A 2025 upstream's question, which names no request: relayed only on a connection that is one person's (their
   * session, or their process under isolation = user), to the caller of the one relayed request under way there,
   * else refused. On a shared process a question may belong to any caller's request, even one that has ended (its
   * caller cancelled, or it timed out, while the upstream went on): it is never guessed. The refusal of a client that
   * did not declare the capability is the specification's error for it.
   */
  private async question(method: QuestionMethod, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.options.person === undefined || this.relays.size !== 1)
      throw new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        `svc relays ${method} only during a request of one person's, on its connection`,
      );
    const [relay] = this.relays;
    try {
      return await this.ask(relay!, method, params);
    } catch (e) {
      if (e instanceof MissingCapability)
        throw new ProtocolError(MISSING_CAPABILITY as ProtocolErrorCode, e.message, { requiredCapabilities: requiredFor(method) });
      // The client's own error answer, as it gave it (its code, a short message); anything else: the person was not reached.
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'number') throw new ProtocolError(code as ProtocolErrorCode, (e as Error).message.slice(0, 200));
      throw new ProtocolError(ProtocolErrorCode.InternalError, 'svc could not reach the person to ask');
    }
  }

  /** What the upstream said it offers when svc connected (connecting first, if need be). */
  async capabilities(): Promise<ServerCapabilities> {
    try {
      return (await this.connected()).getServerCapabilities() ?? {};
    } catch (e) {
      throw asFault(e);
    }
  }

  /** The upstream's prompts, as listTools reads its tools: up to `max` (one more), at most LIST_PAGES pages. */
  async listPrompts(max: number): Promise<Prompt[]> {
    if ((await this.capabilities()).prompts === undefined) return [];
    try {
      return (await this.inEra(this.connected(), (client) => this.pagesOf(client, 'prompts/list', PROMPTS, max), true)) as Prompt[];
    } catch (e) {
      throw asFault(e);
    }
  }

  /** The upstream's resource templates, up to `max` (one more), at most LIST_PAGES pages; none without resources. */
  async listResourceTemplates(max: number): Promise<ResourceTemplate[]> {
    if ((await this.capabilities()).resources === undefined) return [];
    try {
      return (await this.inEra(
        this.connected(),
        (client) => this.pagesOf(client, 'resources/templates/list', TEMPLATES, max),
        true,
      )) as ResourceTemplate[];
    } catch (e) {
      throw asFault(e);
    }
  }

  /** One page of the upstream's resources (a caller pages through them with svc's cursor); none without resources. */
  async listResources(cursor: string | undefined): Promise<{ resources: Resource[]; nextCursor?: string }> {
    if ((await this.capabilities()).resources === undefined) return { resources: [] };
    try {
      return await this.inEra(
        this.connected(),
        async (client) => {
          const answer = await client.request({ method: 'resources/list', params: cursor === undefined ? {} : { cursor } }, RESOURCES, {
            timeout: this.upstream.timeoutMs,
          });
          return {
            resources: answer.resources as Resource[],
            ...(answer.nextCursor === undefined ? {} : { nextCursor: answer.nextCursor }),
          };
        },
        true,
      );
    } catch (e) {
      throw asFault(e);
    }
  }

  /** The pages of a listing (`key` names its array), up to `max` (one more) entries and LIST_PAGES pages. */
  private async pagesOf(
    client: Client,
    method: 'prompts/list' | 'resources/templates/list',
    schema: typeof PROMPTS | typeof TEMPLATES,
    max: number,
  ): Promise<unknown[]> {
    const found: unknown[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < LIST_PAGES; page++) {
      const answer = (await client.request({ method, params: cursor === undefined ? {} : { cursor } }, schema, {
        timeout: this.upstream.timeoutMs,
      })) as { prompts?: unknown[]; resourceTemplates?: unknown[]; nextCursor?: string };
      for (const entry of answer.prompts ?? answer.resourceTemplates ?? []) {
        if (found.length > max) return found;
        found.push(entry);
      }
      cursor = answer.nextCursor;
      if (cursor === undefined) break;
    }
    return found;
  }

  /**
   * Subscribes to (or unsubscribes from) the upstream's resource `uri` on this connection: `resources/subscribe` to a
   * 2025 upstream, a `subscriptions/listen` stream for that URI to a 2026-07-28 one. Its updates reach
   * `options.resources`. Not a caller's relayed request (no question is asked during it); it counts as a use of the
   * connection. Faults as send's.
   */
  async resourceSubscription(uri: string, subscribe: boolean, identity: string | null): Promise<void> {
    const current = this.connected();
    try {
      const client = await current;
      if (client.getProtocolEra() === 'modern') return await this.watchResource(client, uri, subscribe);
      const meta = metaOf(identity);
      const request = { method: subscribe ? 'resources/subscribe' : 'resources/unsubscribe', params: { uri, ...meta } };
      await this.inEra(current, (c) => c.request(request, ANY_RESULT, { timeout: this.upstream.timeoutMs }), true);
    } catch (e) {
      throw asFault(e);
    } finally {
      this.usedAt = Date.now();
    }
  }

  /** 2026-07-28: one listen stream per subscribed URI on this connection, held until unsubscribed or ended. */
  private async watchResource(client: Client, uri: string, subscribe: boolean): Promise<void> {
    const held = this.watching.get(uri);
    if (!subscribe) {
      this.watching.delete(uri);
      await held?.close();
      return;
    }
    if (held !== undefined) return;
    const subscription = await client.listen({ resourceSubscriptions: [uri] }, { timeout: this.upstream.timeoutMs });
    this.watching.set(uri, subscription);
    void subscription.closed.then(() => {
      if (this.watching.get(uri) === subscription) this.watching.delete(uri);
    });
  }

  /** Whether a call is under way on this connection: it must not be closed now. */
  get busy(): boolean {
    return this.inFlight > 0;
  }

  /**
   * Closes the connection; an HTTP upstream's session (2025) is ended there too (a DELETE with its id, waited for at
   * most SESSION_END_MS), so what it kept for the person does not outlive their session at svc.
   */
  async close(): Promise<void> {
    this.stopped = true;
    const client = this.client;
    this.client = null;
    await client
      ?.then(async (c) => {
        const transport = c.transport;
        if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
          let timer: NodeJS.Timeout | undefined;
          const late = new Promise<void>((ok) => {
            timer = setTimeout(ok, SESSION_END_MS).unref();
          });
          await Promise.race([transport.terminateSession().catch(() => undefined), late]);
          clearTimeout(timer);
        }
        await c.close();
      })
      .catch(() => undefined);
  }
}
