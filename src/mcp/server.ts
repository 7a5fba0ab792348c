// The MCP server an authenticated caller talks to, in both protocol eras (CONTRACT §6), on the SDK's stable line.
// Every request gets a server of its own, made from one definition (methods.ts), so the eras cannot drift apart and
// no server ever holds another request's caller:
// - 2025 (initialize, then requests): svc's own stateless wiring, a fresh transport per request answering in JSON;
//   the route issues and checks session ids bound to their user, and takes batches only where the revision had them.
// - 2026-07-28 (each request carries its revision, client and capabilities): the SDK's modern handler, strict (it
//   never serves 2025 traffic: the route sends that here only when the SDK's own classification says modern).
// Who is calling travels with each request in the AuthInfo the SDK hands every handler of it.
import {
  createMcpHandler,
  isLegacyRequest,
  PROTOCOL_VERSION_META_KEY,
  ProtocolErrorCode,
  Server,
  WebStandardStreamableHTTPServerTransport,
  type AuthInfo,
  type JSONRPCMessage,
  type McpHttpHandler,
  type McpServerFactory,
  type ServerEvent,
  type ServerEventBus,
  type Transport,
} from '@modelcontextprotocol/server';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/server/validators/ajv';
import type { Logger } from '../log.ts';
import { CALL, HANDLED, installMethods, type Call, type Shared } from './methods.ts';
import { mcpSpan } from './spans.ts';
import { Cancellations } from './cancellations.ts';
import { isObject } from '../domain/canonical-json.ts';
import { PendingQuestions } from './questions.ts';
import {
  ChangeHub,
  LIST_KINDS,
  LISTEN_URIS_MAX,
  type Change,
  type ListKind,
  type Recheck,
  type StreamHandle,
  type View,
} from './changes.ts';
import { VERSION } from '../version.ts';

export type { Call, Shared } from './methods.ts';
export const SERVER_INFO = { name: 'svc', version: VERSION } as const;
const INSTRUCTIONS =
  'svc holds documents you may be allowed to read. Use `search` to find documents by words, then `fetch` to read one in full by its id. `whoami` tells whose access you are using.';

/** Built once: a validator is only used for answers a client sends back, and is shared by every server. */
const validator = new AjvJsonSchemaValidator();

export interface McpEndpoint {
  /** The era the SDK's own classification gives the request, from its parsed body: what answers it. */
  eraOf(request: Request, parsedBody: unknown): Promise<'legacy' | 'modern'>;
  /** Answers a 2025-era request's parsed body, on a fresh transport. */
  legacy(request: Request, parsedBody: unknown, call: Call): Promise<Response>;
  /**
   * Answers a request the SDK classifies as 2026-07-28 (or later), its body already parsed. A `subscriptions/listen`
   * stays open with the caller's change notifications (changes.ts) while `recheck` finds their credential good.
   */
  modern(request: Request, parsedBody: unknown, call: Call, recheck?: Recheck): Promise<Response>;
  /**
   * GET with a 2025 session id of the caller's: the session's stream of change notifications (changes.ts); 405 without
   * upstreams (nothing svc offers can change), 429 when the caller holds as many streams as they may.
   */
  stream(request: Request, call: Call, session: string, recheck: Recheck): Promise<Response>;
}

/** One request's server: svc's methods on it, and nothing of any caller. */
function buildServer(shared: Shared): Server {
  const server = new Server(SERVER_INFO, {
    jsonSchemaValidator: validator,
    // What can change is what upstreams offer: with upstreams, a caller hears of it on a stream (changes.ts) and may
    // subscribe to an upstream's resources; without, nothing is announced that svc would not send.
    capabilities: {
      tools: { listChanged: shared.changes != null },
      resources: { listChanged: shared.changes != null, ...(shared.changes == null ? {} : { subscribe: true }) },
      prompts: { listChanged: shared.changes != null },
      completions: {},
    },
    instructions: INSTRUCTIONS,
  });
  installMethods(server, shared);
  return server;
}

/**
 * A message the SDK's classification can only send to its modern path (answered there, or refused by its ladder):
 * one request or notification, not `initialize`, whose `_meta` names a protocol revision. Such a request is not
 * classified a second time here; every other body is, by `isLegacyRequest`.
 */
function claimsModern(body: unknown): boolean {
  if (!isObject(body) || 'result' in body || 'error' in body || body.method === 'initialize') return false;
  const params = body.params;
  return isObject(params) && isObject(params._meta) && PROTOCOL_VERSION_META_KEY in params._meta;
}

/** Whether the call's client declared any question an upstream may ask the person. */
const mayBeAsked = (call: Call) => {
  const q = call.questions;
  return q !== null && q !== undefined && (q.form || q.url || q.sampling || q.roots);
};

/** Whether a body holds a request that may go to an upstream (which may ask the person a question during it). */
function passesUpstream(body: unknown): boolean {
  return (Array.isArray(body) ? body : [body]).some(
    (m) => isObject(m) && 'id' in m && (m.method === 'tools/call' || m.method === 'prompts/get' || m.method === 'resources/read'),
  );
}

/** Whether a body holds a request with a progress token. */
function asksProgress(body: unknown): boolean {
  return (Array.isArray(body) ? body : [body]).some((m) => {
    const meta = isObject(m) && isObject(m.params) ? m.params._meta : undefined;
    return isObject(meta) && meta.progressToken !== undefined;
  });
}

/**
 * A body of one message the SDK answers itself (initialize, ping, a notification, a listen) is a span here; each
 * request svc's handlers answer is one there (methods.ts), which also serves a batch's requests.
 */
function answeredBySdk<T>(body: unknown, call: Call, answer: () => Promise<T>): Promise<T> {
  if (!isObject(body) || typeof body.method !== 'string' || HANDLED.has(body.method)) return answer();
  return mcpSpan(body.method, isObject(body.params) ? body.params : undefined, body.id, call, answer);
}

/** Not the caller's credential: only the request's Call, for svc's own handlers. */
const authInfoOf = (call: Call): AuthInfo => ({ token: '', clientId: '', scopes: [], extra: { [CALL]: call } });

export function mcpEndpoint(given: Shared, stopping?: AbortSignal): McpEndpoint {
  // Change notifications and resource subscriptions, where something can change: the upstreams'.
  const hub = given.gateway === null ? null : new ChangeHub(given.db, given.gateway, given.log, stopping);
  const shared: Shared = { ...given, changes: hub };
  const cancellations = new Cancellations();
  const questions = new PendingQuestions();
  const factory: McpServerFactory = (ctx) => {
    const server = buildServer(shared);
    const body = (ctx.authInfo?.extra as { [BODY]?: unknown } | undefined)?.[BODY];
    answeredEvenUnwritable(server, body, shared.log);
    return server;
  };
  const onerror = (e: Error) => shared.log.debug?.('mcp_modern_refused', { error: e.message.slice(0, 200) });
  const modernHandler = createMcpHandler(factory, { legacy: 'reject', onerror });
  return {
    eraOf: async (request, parsedBody) => (claimsModern(parsedBody) || !(await isLegacyRequest(request, parsedBody)) ? 'modern' : 'legacy'),
    legacy: (request, parsedBody, call) => answeredBySdk(parsedBody, call, () => legacy(request, parsedBody, call)),
    modern: (request, parsedBody, call, recheck) => answeredBySdk(parsedBody, call, () => modern(request, parsedBody, call, recheck)),
    stream: (request, call, session, recheck) => sessionStream(hub, request, call, session, recheck),
  };

  async function legacy(request: Request, parsedBody: unknown, call: Call): Promise<Response> {
    // The caller's cancels reach their own requests under way (within this session: none is no session).
    const session = request.headers.get('mcp-session-id') ?? '';
    const who = { userId: call.caller.userId, session };
    // A client's answers to questions asked on its requests' streams go to those requests; a body of answers only
    // is done then.
    if (questions.answer(who.userId, session, parsedBody)) return new Response(null, { status: 202 });
    cancellations.cancelFrom(call.caller.userId, session, parsedBody);
    const cancellable = (id: string | number, cancel: () => void) => cancellations.register(call.caller.userId, session, id, cancel);
    const server = buildServer(shared);
    // A request that asks for progress, or one an upstream may ask the person a question during, is answered on a
    // stream, so its progress and questions can reach it first; every other request in JSON.
    const json = !asksProgress(parsedBody) && !(mayBeAsked(call) && passesUpstream(parsedBody));
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
    const ask: Call['ask'] = (relatedId, method, params, signal) => questions.ask(transport, who, relatedId, method, params, signal);
    await server.connect(transport);
    answerEvenUnwritable(transport, parsedBody, shared.log);
    // In the next turn: the SDK drops each answered call's abort controller a few microtasks after the answer.
    const end = () => {
      setImmediate(() => void detach(server));
    };
    let response: Response;
    try {
      // Stateless JSON: the response exists once every request id of the body has its answer. A batch holds each id
      // once (batch.ts refuses a repeated one, or a cancel of its own call), so every handler has ended by then.
      response = await transport.handleRequest(request, { parsedBody, authInfo: authInfoOf({ ...call, cancellable, ask }) });
    } catch (e) {
      end();
      throw e;
    }
    if (json || response.body === null) {
      end();
      return response;
    }
    // A stream is answered at once, and ends with the last answer: the server goes then, or when the client goes.
    call.signal().addEventListener('abort', end, { once: true });
    const body = response.body.pipeThrough(new TransformStream({ flush: end }));
    return new Response(body, { status: response.status, headers: response.headers });
  }

  function modern(request: Request, parsedBody: unknown, call: Call, recheck?: Recheck): Promise<Response> {
    const authInfo = authInfoOf(call);
    (authInfo.extra as Record<string, unknown>)[BODY] = parsedBody;
    if (hub !== null && recheck !== undefined && isObject(parsedBody) && parsedBody.method === 'subscriptions/listen')
      return listenOn(hub, (bus) => createMcpHandler(factory, { legacy: 'reject', bus, maxSubscriptions: 1, onerror }), {
        request,
        parsedBody,
        authInfo,
        call,
        recheck,
      });
    return modernHandler.fetch(request, { parsedBody, authInfo });
  }
}

/**
 * GET with a 2025 session id of the caller's: the session's stream of change notifications (changes.ts); 405 without
 * upstreams, 429 when the caller holds as many streams as they may.
 */
async function sessionStream(hub: ChangeHub | null, request: Request, call: Call, session: string, recheck: Recheck): Promise<Response> {
  if (hub === null) return new Response(null, { status: 405, headers: { Allow: 'POST' } });
  if (!/\btext\/event-stream\b/.test(request.headers.get('accept') ?? ''))
    return rpcRefusal(406, null, -32000, 'Not Acceptable: the client must accept text/event-stream');
  const opened = await hub.openSession(call.caller, recheck, session, request.signal);
  return opened ?? rpcRefusal(429, null, -32000, 'you hold as many MCP streams as svc keeps for one person; close one first');
}

/** Where the modern leg's factory finds the request's body (to answer its id should the answer not encode). */
const BODY = 'svc.body';

/** The modern leg connects each server to a transport of its own: guarded the same way as the 2025 one. */
function answeredEvenUnwritable(server: Server, body: unknown, log: Logger): void {
  const connect = server.connect.bind(server);
  server.connect = async (transport) => {
    answerEvenUnwritable(transport, body, log);
    return connect(transport);
  };
}

/** Where the modern era's per-request transport (SDK 2.4.0) remembers that its answer went; test/mcp-unwritable.test.ts. */
const TERMINAL = '_terminalDelivered';

/** A message's id when it is a request (a notification has none). */
function requestIds(body: unknown): { id: string | number; method: unknown }[] {
  const ids: { id: string | number; method: unknown }[] = [];
  for (const m of Array.isArray(body) ? body : [body]) {
    const { id, method } = (m ?? {}) as { id?: unknown; method?: unknown };
    if ((typeof id === 'string' || typeof id === 'number') && typeof method === 'string') ids.push({ id, method });
  }
  return ids;
}

/**
 * A transport writes a request's answer with JSON.stringify; should that throw (an answer nested too deep, which svc's
 * handlers bound, or anything else no JSON can hold), the request would never be answered. Then each id of the
 * request is answered again in words that always encode: a tool call's as its `isError` result, any other's as an
 * internal error.
 */
function answerEvenUnwritable(transport: Transport, body: unknown, log: Logger): void {
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    try {
      return await send(message, options);
    } catch (e) {
      if (!('id' in message) || 'method' in message) throw e;
      log.warn('mcp_answer_unwritable', { error: e instanceof Error ? e.message.slice(0, 200) : 'failed' });
      // The modern era's transport marks its one answer as given before it encodes it; it was not given.
      if (TERMINAL in transport) (transport as unknown as Record<string, unknown>)[TERMINAL] = false;
      const text = 'svc could not encode this answer';
      // The answer being written when it failed goes first (the one that completed the request, often the one that
      // cannot be written); then the others in turn, until what is held can be written. Each replacement is written
      // with the answers still held, so the first that leaves only encodable ones answers the request.
      const ids = requestIds(body);
      const failed = ids.filter((r) => r.id === message.id);
      for (const { id, method } of [...failed, ...ids.filter((r) => r.id !== message.id)]) {
        const replacement: JSONRPCMessage =
          method === 'tools/call'
            ? { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }], isError: true } }
            : { jsonrpc: '2.0', id, error: { code: ProtocolErrorCode.InternalError, message: text } };
        try {
          await send(replacement, options);
          return;
        } catch {
          // still not encodable: the next one
        }
      }
    }
  };
}

/**
 * Ends the server's transport. close() builds a "connection closed" error that reaches no one (and would abort any
 * call still running): built without a stack trace, which costs most of its time. close() does that synchronously.
 */
function detach(server: Server): Promise<void> {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return server.close().catch(() => undefined);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** A JSON-RPC error answer with an HTTP status. */
function rpcRefusal(status: number, id: string | number | null, code: number, message: string): Response {
  return Response.json({ jsonrpc: '2.0', id, error: { code, message } }, { status });
}

/** Each change as the SDK's listen router takes it. */
const LIST_EVENT: Record<ListKind, ServerEvent> = {
  tools: { kind: 'tools_list_changed' },
  prompts: { kind: 'prompts_list_changed' },
  resources: { kind: 'resources_list_changed' },
};
const eventOf = (change: Change): ServerEvent =>
  'list' in change ? LIST_EVENT[change.list] : { kind: 'resource_updated', uri: change.updated };

/** What a listen request's filter asks to hear: the kinds of list, and (at most LISTEN_URIS_MAX) resources by URI. */
function listenFilter(body: Record<string, unknown>): { kinds: Set<ListKind>; uris: string[] } {
  const asked = isObject(body.params) && isObject(body.params.notifications) ? body.params.notifications : {};
  const kinds = new Set(LIST_KINDS.filter((kind) => asked[`${kind}ListChanged`] === true));
  const named = Array.isArray(asked.resourceSubscriptions) ? asked.resourceSubscriptions : [];
  return { kinds, uris: named.filter((u): u is string => typeof u === 'string').slice(0, LISTEN_URIS_MAX) };
}

/**
 * A caller's 2026-07-28 `subscriptions/listen`: the SDK's own listen stream (its acknowledgement, the client's filter,
 * the subscription id, keepalives, teardown), on a handler of its own whose bus only the hub's changes for this caller
 * reach. The resources its filter names are subscribed to for it, while it lasts. Past the bounds it is refused as the
 * SDK refuses one past its own: the in-band error "Subscription limit reached".
 */
async function listenOn(
  hub: ChangeHub,
  handlerWith: (bus: ServerEventBus) => McpHttpHandler,
  on: { request: Request; parsedBody: Record<string, unknown>; authInfo: AuthInfo; call: Call; recheck: Recheck },
): Promise<Response> {
  const { call, recheck, parsedBody } = on;
  const id = typeof parsedBody.id === 'string' || typeof parsedBody.id === 'number' ? parsedBody.id : null;
  const release = hub.reserve(call.caller.userId);
  if (release === null) return rpcRefusal(200, id, ProtocolErrorCode.InternalError, 'Subscription limit reached');
  const { kinds, uris } = listenFilter(parsedBody);
  let seen: View;
  try {
    seen = await hub.viewOf(call.caller, kinds);
  } catch (e) {
    release();
    throw e;
  }
  const held: { handle: StreamHandle | null } = { handle: null };
  const bus: ServerEventBus = {
    // Nothing is published to every stream: each stream's changes reach its own listener alone.
    publish: () => undefined,
    subscribe(listener) {
      const sink = { send: (change: Change) => listener(eventOf(change)), end: () => void handler.close() };
      const handle = hub.attach(release, { caller: call.caller, recheck, kinds, session: null, sink }, seen);
      held.handle = handle;
      for (const uri of uris) hub.subscribe(call.caller, { stream: handle.id }, uri).catch(() => undefined);
      return () => handle.close();
    },
  };
  const handler = handlerWith(bus);
  const response = await handler.fetch(on.request, { parsedBody, authInfo: on.authInfo });
  // Refused, or nothing of its filter honoured: no stream was held.
  if (held.handle === null) release();
  return response;
}
