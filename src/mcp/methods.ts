// What /mcp answers, method by method, in either protocol era: the one place a typed method is dispatched. svc's
// own tools and the upstreams' tools share tools/list and tools/call; svc's documents are resources. Every answer is
// decided for the caller of the request it belongs to (domain/caller.ts), handed to each handler with the request.
import {
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  UrlElicitationRequiredError,
  inputRequired,
  type CallToolResult,
  type Server,
} from '@modelcontextprotocol/server';
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/open.ts';
import { isBusy, isUnreachable, safeDatabaseMessage } from '../db/errors.ts';
import type { Caller } from '../domain/caller.ts';
import { ConnectionNeeded, UpstreamRefusal } from '../domain/errors.ts';
import { deriveKey } from '../domain/secrets.ts';
import type { Logger } from '../log.ts';
import { fetchVisible, listVisible } from '../store/items.ts';
import type { ResourcesFrom, UpstreamGateway } from '../upstream/gateway.ts';
import type { Relay } from '../upstream/connection.ts';
import { declaredQuestions, InputAsked, mayAsk, MissingCapability, type QuestionMethod, type Questions } from '../domain/questions.ts';
import type { ToolGate } from '../store/upstream-tools.ts';
import { HeldQuestions, InputRounds, type Question, type Round } from './input-rounds.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import { OWN_TOOLS, type ToolAnswer } from './own-tools.ts';
import type { ChangeHub } from './changes.ts';
import { failedWith, mcpSpan, type SpanCall } from './spans.ts';

const RESOURCE_PREFIX = 'svc://items/';
const RESOURCE_PAGE = 100;
/**
 * One answer of tools/list is at most 4 MiB; more are paged with nextCursor. The tools' own JSON may take this much
 * of it, a byte per tool for the commas: the rest holds the answer's envelope and its cursor.
 */
const TOOLS_LIST_MAX = 4 * 1024 * 1024 - 1024;
/** prompts/list is bounded the same way. */
const LIST_MAX = TOOLS_LIST_MAX;
const OWN_DEFINITIONS = [...OWN_TOOLS.values()].map((t) => t.definition);
const OWN_BYTES = Buffer.byteLength(JSON.stringify(OWN_DEFINITIONS));

/** What every request's handlers share: the store, the cursor keys, the upstreams, and where failures are told. */
export interface Shared {
  readonly db: Db;
  /** signs resources/list cursors (see cursor.ts); the tools/list key is derived from it */
  readonly cursorKey: Buffer;
  readonly log: Logger;
  /** the gateway to the upstreams, whose tools come after svc's own; null without [upstream] sections */
  readonly gateway: UpstreamGateway | null;
  /** change notifications and resource subscriptions (changes.ts); null without upstreams (set by the endpoint) */
  readonly changes?: ChangeHub | null;
}

/** Who is calling one request, and what their client declared that an answer depends on. */

export interface Call extends SpanCall {
  readonly caller: Caller;
  /** the protocol era the request came in: 2025 (`legacy`) or 2026-07-28 and later (`modern`) */
  readonly era: 'legacy' | 'modern';
  /** the client declared URL elicitation: a needed connection is asked for that way */
  readonly urlElicitation: boolean;
  /**
   * the questions an upstream may ask the person through this request's client (2025: as its session declared at
   * initialize); null: none can be asked on this request's stream
   */
  readonly questions?: Questions | null;
  /**
   * asks the client a question on the stream of the request `relatedId` and resolves with its answer (set by the
   * endpoint for the 2025 era: questions.ts)
   */
  readonly ask?: (
    relatedId: string | number,
    method: QuestionMethod,
    params: Record<string, unknown>,
    signal: AbortSignal,
  ) => Promise<Record<string, unknown>>;
  /** aborted when the request's client has gone; made only when asked */
  readonly signal: () => AbortSignal;
  /**
   * a request of this call's body that a 2025 `notifications/cancelled` of the same caller (and session) may cancel,
   * by its JSON-RPC id, until `done` (set by the endpoint for the 2025 era: cancellations.ts)
   */
  readonly cancellable?: (id: string | number, cancel: () => void) => { done(): void };
}

/** The key under which a request's Call travels in the AuthInfo the SDK hands each of its handlers. */
export const CALL = 'svc.call';

/** The handlers' view of the SDK's context: the AuthInfo that carries the request's Call, and the request itself. */
interface Context {
  readonly http?: { readonly authInfo?: { readonly extra?: Record<string, unknown> } };
  readonly mcpReq?: {
    readonly id?: string | number;
    readonly _meta?: { readonly progressToken?: unknown };
    readonly signal?: AbortSignal;
    readonly notify?: (notification: { method: string; params?: Record<string, unknown> }) => Promise<void>;
    /** 2026-07-28: what the request's `_meta` declared of the client (its capabilities) */
    readonly envelope?: { readonly clientCapabilities?: unknown; readonly [key: string]: unknown };
    /** 2026-07-28: a retry's answers, by the keys of the questions asked, and the state it carries back */
    readonly inputResponses?: Record<string, unknown>;
    readonly requestState?: () => unknown;
  };
}

/** The input rounds of every request an endpoint serves: one registry of held calls per endpoint. */
const ROUNDS = new WeakMap<Shared, InputRounds>();
function roundsOf(shared: Shared): InputRounds {
  let rounds = ROUNDS.get(shared);
  if (rounds === undefined) {
    rounds = new InputRounds(shared.cursorKey);
    ROUNDS.set(shared, rounds);
  }
  return rounds;
}

/** How long a call waits on this instance for its caller's answers (its upstream's `timeout` ends it sooner). */
const HOLD_MS = 5 * 60 * 1000;

/** What a 2026-07-28 request declared its client can answer of an upstream's questions. */
function modernQuestions(ctx: Context): Questions {
  const envelope = ctx.mcpReq?.envelope ?? {};
  return declaredQuestions(envelope.clientCapabilities ?? envelope['io.modelcontextprotocol/clientCapabilities']);
}

/**
 * A 2026-07-28 caller's call of an upstream tool, in rounds (input-rounds.ts): the call, or its retry carrying the
 * person's answers. A question the caller's client did not declare is never put to it: a 2025 upstream is refused
 * with the missing-capability error, a 2026-07-28 upstream's call fails. Each round's request carries the call's
 * progress and cancels it when the client cancels or closes it before the round's answer; a call held for the
 * person's answer outlives that request, and ends by its upstream's `timeout` or when no retry comes.
 */
async function callInRounds(
  ctx: Context,
  call: Call,
  rounds: InputRounds,
  gateway: UpstreamGateway,
  tool: ToolGate,
  name: string,
  args: Record<string, unknown> | undefined,
): Promise<unknown> {
  const { caller } = call;
  const questions = modernQuestions(ctx);
  const can = (q: Question) => mayAsk(questions, q.method, q.params);
  const sealHeld = (held: string) => rounds.seal(caller, name, args, { held });
  // This request is the call's for this round: its progress and its cancel, until the round's answer.
  const { relay: request, done } = relayOf(ctx, call);
  const attached = {
    signal: request.signal ?? new AbortController().signal,
    ...(request.progress === undefined ? {} : { progress: request.progress }),
  };
  const start = (resume?: Relay['resume']) => {
    const held = new HeldQuestions(can);
    const relay: Relay = {
      passInput: true,
      signal: held.controller.signal,
      progress: held.progress,
      ask: (method, params) => held.ask(method, params),
      ...(resume === undefined ? {} : { resume }),
    };
    return rounds.round(gateway.call(tool, args, caller, false, relay), held, sealHeld, HOLD_MS, attached);
  };
  const raw = ctx.mcpReq?.requestState?.();
  const responses = ctx.mcpReq?.inputResponses ?? {};
  let round: Round<CallToolResult | InputAsked>;
  try {
    if (raw === undefined) round = await start();
    else {
      const state = rounds.open(raw, caller, name, args);
      round =
        state.kind === 'held'
          ? await rounds.resume(state.held ?? '', responses, sealHeld, HOLD_MS, attached)
          : await start({ inputResponses: responses, ...(state.state === undefined ? {} : { requestState: state.state }) });
    }
  } finally {
    done();
  }
  if ('inputRequests' in round) return inputRequired({ inputRequests: round.inputRequests as never, requestState: round.requestState });
  const result = round.result;
  if (!(result instanceof InputAsked)) return result;
  // A 2026-07-28 upstream's own questions: put to the caller only when its client can take every one.
  const asked = Object.values(result.inputRequests);
  if (asked.length === 0 || !asked.every(can))
    return {
      content: [
        {
          type: 'text',
          text: `upstream "${tool.upstream}" needs_input: it asked the person a question your client did not declare it can take`,
        },
      ],
      isError: true,
    };
  const state = result.requestState;
  return inputRequired({
    inputRequests: result.inputRequests as never,
    requestState: rounds.seal(caller, name, args, state === undefined ? {} : { state }),
  });
}

/**
 * What of a caller's request goes with it to an upstream: its progress token (the upstream's progress reaches this
 * caller alone, on this request's stream) and its cancellation (a 2025 notifications/cancelled, the request's own
 * stream closed, or the SDK's signal).
 */
function relayOf(ctx: Context, call: Call): { relay: Relay; done: () => void } {
  const token = ctx.mcpReq?._meta?.progressToken;
  const notify = ctx.mcpReq?.notify;
  const progress =
    (typeof token === 'string' || typeof token === 'number') && notify !== undefined
      ? (p: { progress: number; total?: number; message?: string }) =>
          void notify({ method: 'notifications/progress', params: { ...p, progressToken: token } }).catch(() => undefined)
      : undefined;
  // One signal for the call, which each way of cancelling it aborts (listeners, not AbortSignal.any: on Node 20 that
  // costs a weak reference per source, and their collection showed in an upstream call's time).
  const controller = new AbortController();
  const abort = () => controller.abort();
  const sources = [call.signal(), ...(ctx.mcpReq?.signal === undefined ? [] : [ctx.mcpReq.signal])];
  for (const source of sources)
    if (source.aborted) abort();
    else source.addEventListener('abort', abort, { once: true });
  const cancel = ctx.mcpReq?.id === undefined || call.cancellable === undefined ? null : call.cancellable(ctx.mcpReq.id, abort);
  const signal = controller.signal;
  const id = ctx.mcpReq?.id;
  const ask =
    call.ask === undefined || id === undefined
      ? undefined
      : (method: QuestionMethod, params: Record<string, unknown>) => {
          if (!mayAsk(call.questions ?? null, method, params)) throw new MissingCapability(method);
          return call.ask!(id, method, params, signal);
        };
  return {
    relay: { signal, ...(progress === undefined ? {} : { progress }), ...(ask === undefined ? {} : { ask }) },
    done: () => {
      cancel?.done();
      for (const source of sources) source.removeEventListener('abort', abort);
    },
  };
}

/** Runs `send` with the request's relay, and lets go of its cancellation when it ends. */
async function relayed<R>(ctx: Context, call: Call, send: (relay: Relay) => Promise<R>): Promise<R> {
  const { relay, done } = relayOf(ctx, call);
  try {
    return await send(relay);
  } finally {
    done();
  }
}

/**
 * The Call of the request this message came in, set by the endpoint for this request alone. Without one (which the
 * endpoint never allows) the handler fails rather than guess.
 */
function callOf(ctx: Context): Call {
  const call = ctx.http?.authInfo?.extra?.[CALL];
  if (call === undefined) throw new Error('an MCP message came without its caller');
  return call as Call;
}

/** The words a caller gets for a failure of svc's own: nothing of svc's insides (the log has the cause). */
function failure(log: Logger, what: string, e: unknown): ProtocolError {
  if (e instanceof ProtocolError) return e;
  log.warn('mcp_handler_failed', { handler: what, error: safeDatabaseMessage(e) });
  return new ProtocolError(
    ProtocolErrorCode.InternalError,
    isBusy(e) || isUnreachable(e)
      ? 'svc cannot read its database just now; try again shortly'
      : 'svc failed to answer this call; its log has details',
  );
}

/**
 * A handler whose failure is told to the caller in words that name nothing of svc's insides: a database driver's own
 * message names the statement or the database server. A tool call's failure is its `isError` result, as MCP has
 * tools report theirs, but for a connection the person must make first, which is the URL elicitation error.
 */
function guarded<R>(log: Logger, what: string, handler: (params: Record<string, unknown>, call: Call, ctx: Context) => Promise<R>) {
  return (request: { params?: Record<string, unknown> }, ctx: Context): Promise<R | ToolAnswer> => {
    const call = callOf(ctx);
    return mcpSpan(what, request.params, ctx.mcpReq?.id, call, async (span) => {
      try {
        const answer = await handler(request.params ?? {}, call, ctx);
        if ((answer as { isError?: unknown } | null)?.isError === true) span.fail('tool_error');
        return answer;
      } catch (e) {
        const thrown = refusalOf(log, what, request, e);
        if (thrown instanceof ProtocolError) {
          failedWith(span, thrown.code);
          throw thrown;
        }
        span.fail('tool_error');
        return thrown;
      }
    });
  };
}

/**
 * What a handler's failure becomes: the error thrown to the caller, or a tool call's `isError` result. Words that name
 * nothing of svc's insides; a connection the person must make first is the URL elicitation error.
 */
function refusalOf(log: Logger, what: string, request: { params?: Record<string, unknown> }, e: unknown): ProtocolError | ToolAnswer {
  if (e instanceof ProtocolError && what === 'tools/call') return e;
  // An upstream's failure, in words the caller may read (its `isError` result for a tool call, handled there).
  if (e instanceof UpstreamRefusal) return new ProtocolError(ProtocolErrorCode.InternalError, e.message);
  if (e instanceof ConnectionNeeded)
    return new UrlElicitationRequiredError([{ mode: 'url', message: e.message, elicitationId: randomUUID(), url: e.url }], e.message);
  if (what !== 'tools/call') return failure(log, what, e);
  // The log names the tool: svc's own, or an upstream's merged name.
  const refused = failure(log, String(request.params?.name).slice(0, 140), e);
  return { content: [{ type: 'text', text: refused.message }], isError: true };
}

/**
 * A tool the caller may not use, and one that does not exist: in the 2025 era the `isError` result svc has always
 * given; from 2026-07-28 the invalid-params error the specification names for an unknown tool.
 */
function unknownTool(name: string, era: Call['era']): ToolAnswer {
  const message = `Unknown tool: ${name.slice(0, 140)}`;
  if (era === 'modern') throw new ProtocolError(ProtocolErrorCode.InvalidParams, message);
  return { content: [{ type: 'text', text: message }], isError: true };
}

/** A cursor of this server's, for this caller; an answer of invalid params for any other. */
function after(key: Buffer, userId: number, cursor: unknown): string | null {
  if (cursor === undefined) return null;
  const last = typeof cursor === 'string' ? decodeCursor(key, userId, cursor) : null;
  if (last === null) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'invalid cursor: not one this server gave you');
  return last;
}

/** The methods svc's handlers answer, each in a span of its own (the SDK answers the rest: initialize, ping, a listen). */
export const HANDLED = new Set([
  'tools/list',
  'tools/call',
  'resources/templates/list',
  'resources/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'resources/subscribe',
  'resources/unsubscribe',
]);

/** Puts svc's answer to each method it serves on the server. */
export function installMethods(server: Server, shared: Shared): void {
  const set = server.setRequestHandler.bind(server) as unknown as On;
  const on: On = (method, handler) => {
    if (!HANDLED.has(method)) throw new Error(`${method} is answered without being named in HANDLED`);
    set(method, handler);
  };
  installTools(on, shared);
  installResources(on, shared);
  installPrompts(on, shared);
  installSubscriptions(on, shared);
}

/** How a method's handler is put on the request's server. */
type On = (method: string, handler: (request: never, ctx: never) => unknown) => void;

/** tools/list and tools/call: svc's own tools, then the upstreams'. */
function installTools(on: On, shared: Shared): void {
  const { db, log, cursorKey, gateway } = shared;
  const toolsKey = deriveKey(cursorKey, 'mcp-tools-cursor');

  // svc's own tools open the first page, then each upstream tool the caller may use as NAME__TOOL.
  on(
    'tools/list',
    guarded(log, 'tools/list', async (params, { caller }) => {
      const last = after(toolsKey, caller.userId, params.cursor);
      if (gateway === null) return { tools: last === null ? OWN_DEFINITIONS : [] };
      const theirs = await gateway.tools(caller.access, caller.userId, last, TOOLS_LIST_MAX - (last === null ? OWN_BYTES : 0));
      return {
        tools: last === null ? [...OWN_DEFINITIONS, ...theirs.tools] : theirs.tools,
        ...(theirs.last === null ? {} : { nextCursor: encodeCursor(toolsKey, caller.userId, theirs.last) }),
      };
    }),
  );

  // An upstream tool the caller may use goes to its upstream; what they may not use reads like a tool that does not
  // exist.
  on(
    'tools/call',
    guarded(log, 'tools/call', async (params, call, ctx) => {
      const name = typeof params.name === 'string' ? params.name : '';
      const own = OWN_TOOLS.get(name);
      if (own) {
        const parsed = own.parse(params.arguments);
        if (!parsed.ok) return { content: [{ type: 'text', text: parsed.message }], isError: true };
        return own.run(parsed.input, { db, caller: call.caller, signal: call.signal });
      }
      // A merged name, else a bare upstream name (as an app's page calls its tool) that exactly one usable tool has.
      const { access, userId } = call.caller;
      const resolved =
        gateway === null ? null : ((await gateway.resolve(name, access, userId)) ?? (await gateway.resolveBare(name, access, userId)));
      if (resolved === null || gateway === null) return unknownTool(name, call.era);
      const args = params.arguments as Record<string, unknown> | undefined;
      if ('connect' in resolved) return gateway.callConnect(resolved.connect, call.caller, call.urlElicitation);
      // A 2026-07-28 caller answers an upstream's questions by retrying: its call goes in rounds.
      if (call.era === 'modern') return callInRounds(ctx, call, roundsOf(shared), gateway, resolved.tool, name, args);
      return relayed(ctx, call, (relay) => gateway.call(resolved.tool, args, call.caller, call.urlElicitation, relay));
    }),
  );
}

/** svc's documents and the upstreams' resources: templates, lists and reads. */
function installResources(on: On, { db, log, cursorKey, gateway }: Shared): void {
  on(
    'resources/templates/list',
    guarded(log, 'resources/templates/list', async (_params, { caller }) => ({
      resourceTemplates: [ITEM_TEMPLATE, ...(gateway === null ? [] : await gateway.templates(caller.access, caller.userId))],
    })),
  );

  // svc's documents first, then each upstream's resources the caller may read, an upstream's page at a time.
  on(
    'resources/list',
    guarded(log, 'resources/list', async (params, { caller }) => {
      const last = after(cursorKey, caller.userId, params.cursor);
      const from = last === null ? null : upstreamPlace(last);
      const resources: Record<string, unknown>[] = [];
      let next: string | null = null;
      if (from === null) {
        const page = await listVisible(db, caller.access, last, RESOURCE_PAGE);
        resources.push(...page.items.map((i) => ({ uri: RESOURCE_PREFIX + i.id, name: i.id, title: i.title, mimeType: 'text/markdown' })));
        next = page.last;
      }
      // Once svc's documents are done, the first upstream's first page comes with their last.
      if (next === null && gateway !== null) {
        const theirs = await gateway.resources(caller.access, caller.userId, from === null ? null : from);
        resources.push(...theirs.resources);
        next = theirs.next === null ? null : placeOf(theirs.next);
      }
      return { resources, ...(next === null ? {} : { nextCursor: encodeCursor(cursorKey, caller.userId, next) }) };
    }),
  );

  // An invisible document and a missing one are the same answer; so are an upstream's URI the caller may not read,
  // one not mapped, and one the upstream does not have.
  on(
    'resources/read',
    guarded(log, 'resources/read', async (params, call, ctx) => {
      const uri = typeof params.uri === 'string' ? params.uri : '';
      if (uri.startsWith(RESOURCE_PREFIX)) {
        const id = decodeId(uri.slice(RESOURCE_PREFIX.length));
        const item = id === null ? null : await fetchVisible(db, id, call.caller.access);
        if (item) return { contents: [{ uri, mimeType: 'text/markdown', text: item.text }] };
      } else if (gateway !== null) {
        const read = await relayed(ctx, call, (relay) => gateway.read(uri, call.caller, relay));
        if (read !== null) return read;
      }
      throw new ResourceNotFoundError(uri, `Resource not found: ${uri.slice(0, 200)}`);
    }),
  );
}

/** prompts/list, prompts/get and completion/complete: the upstreams' prompts, and completions of theirs. */
function installPrompts(on: On, { log, cursorKey, gateway }: Shared): void {
  const promptsKey = deriveKey(cursorKey, 'mcp-prompts-cursor');
  // svc has no prompts of its own: each upstream prompt the caller may use, as NAME__PROMPT.
  on(
    'prompts/list',
    guarded(log, 'prompts/list', async (params, { caller }) => {
      const last = after(promptsKey, caller.userId, params.cursor);
      if (gateway === null) return { prompts: [] };
      const theirs = await gateway.prompts(caller.access, last, LIST_MAX);
      return {
        prompts: theirs.prompts,
        ...(theirs.last === null ? {} : { nextCursor: encodeCursor(promptsKey, caller.userId, theirs.last) }),
      };
    }),
  );

  // A prompt the caller may not use, one not approved and one that does not exist are the same answer.
  on(
    'prompts/get',
    guarded(log, 'prompts/get', async (params, call, ctx) => {
      const name = typeof params.name === 'string' ? params.name : '';
      const prompt = gateway === null ? null : await gateway.resolvePrompt(name, call.caller.access);
      const args = params.arguments as Record<string, unknown> | undefined;
      const answer =
        prompt === null || gateway === null
          ? null
          : await relayed(ctx, call, (relay) => gateway.getPrompt(prompt, args, call.caller, relay));
      if (answer === null) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${name.slice(0, 140)}`);
      return answer;
    }),
  );

  // A prompt or template the caller may not use gets an empty completion, as one with nothing to offer does.
  on(
    'completion/complete',
    guarded(log, 'completion/complete', async (params, { caller }) =>
      gateway === null ? { completion: { values: [], hasMore: false } } : gateway.complete(params, caller),
    ),
  );
}

/** svc's documents as a template. */
const ITEM_TEMPLATE = {
  uriTemplate: `${RESOURCE_PREFIX}{id}`,
  name: 'item',
  title: 'Document',
  description: 'A document by id',
  mimeType: 'text/markdown',
};

/**
 * Where a resources/list cursor goes on among the upstreams: a document id never holds U+0001, so a cursor's last
 * "id" that starts with it names an upstream, and after a second one, that upstream's own cursor.
 */
const PLACE = '\u0001';
function upstreamPlace(last: string): ResourcesFrom | null {
  if (!last.startsWith(PLACE)) return null;
  const [upstream, ...rest] = last.slice(1).split(PLACE);
  return rest.length === 0 ? { upstream: upstream! } : { upstream: upstream!, cursor: rest.join(PLACE) };
}
function placeOf(from: ResourcesFrom): string {
  return `${PLACE}${from.upstream}${from.cursor === undefined ? '' : PLACE + from.cursor}`;
}

function decodeId(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/**
 * resources/subscribe and unsubscribe (2025: a 2026-07-28 client names its resources in its listen filter): an
 * upstream's resource the caller may read, subscribed to for the request's session at the owning upstream (changes.ts),
 * its updates on that session's GET stream. A URI the caller may not read, an unmapped one and one the upstream does
 * not have get the same answer as a missing resource; svc's own documents cannot be subscribed to. Only with upstreams.
 */
function installSubscriptions(on: On, { log, changes }: Shared): void {
  if (changes === undefined || changes === null) return;
  const sessionOf = (ctx: Context, userId: number) => {
    const session = (ctx.http as { req?: Request } | undefined)?.req?.headers.get('mcp-session-id');
    if (session === undefined || session === null)
      throw new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        'a resource subscription needs an MCP session: its updates come on its GET stream',
      );
    return { session, userId };
  };
  on(
    'resources/subscribe',
    guarded(log, 'resources/subscribe', async (params, { caller }, ctx) => {
      const uri = typeof params.uri === 'string' ? params.uri : '';
      if (uri.startsWith(RESOURCE_PREFIX))
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, "svc's own documents cannot be subscribed to");
      const done = await changes.subscribe(caller, sessionOf(ctx, caller.userId), uri);
      if (done === 'too_many')
        throw new ProtocolError(ProtocolErrorCode.InvalidRequest, 'you hold as many resource subscriptions as svc keeps for one person');
      if (done === 'missing') throw new ResourceNotFoundError(uri, `Resource not found: ${uri.slice(0, 200)}`);
      return {};
    }),
  );
  on(
    'resources/unsubscribe',
    guarded(log, 'resources/unsubscribe', async (params, { caller }, ctx) => {
      changes.unsubscribe(sessionOf(ctx, caller.userId), typeof params.uri === 'string' ? params.uri : '');
      return {};
    }),
  );
}
