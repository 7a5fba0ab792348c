// The MCP server an authenticated caller talks to: tools whoami/search/fetch and items as resources, every read
// filtered by the caller's labels inside the query. Stateless: each request gets a fresh transport, on a server
// taken from a small pool. A server holds nothing of any caller: who is calling travels with each message (the
// transport hands it to every handler), so a handler can only ever read its own request's caller. The JSON schema
// validator is built once and shared, since building one costs more than the rest of a request.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ReadResourceRequestSchema,
  ErrorCode,
  McpError,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Db } from '../db/open.ts';
import { isBusy, isUnreachable, safeDatabaseMessage } from '../db/errors.ts';
import type { Logger } from '../log.ts';
import { accessOf, credentialOf, type Principal } from '../auth/core.ts';
import { effectiveLabels, type Access } from '../domain/visibility.ts';
import { fetchVisible, listVisible } from '../store/items.ts';
import { searchVisible } from '../store/search.ts';
import { AppError } from '../domain/errors.ts';
import { ITEM_ID_MAX } from '../domain/item-id.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import { deriveKey } from '../domain/secrets.ts';
import { opensSession } from './batch.ts';
import type { UpstreamGateway } from '../upstream/gateway.ts';

const validator = new AjvJsonSchemaValidator();
export const SERVER_INFO = { name: 'svc', version: '0.1.0' } as const;
const RESOURCE_PREFIX = 'svc://items/';
const RESOURCE_PAGE = 100;
const RESOURCE_NOT_FOUND = -32002;
/**
 * One answer of tools/list is at most 4 MiB; more are paged with nextCursor. The tools' own JSON may take this much
 * of it, a byte per tool for the commas: the rest holds the answer's envelope and its cursor.
 */
const TOOLS_LIST_MAX = 4 * 1024 * 1024 - 1024;
export const QUERY_MAX = 1000;

// Built once as objects: given raw shapes, the SDK would build these objects again for every request.
const whoamiOutput = z.object({
  uid: z.string(),
  name: z.string(),
  email: z.string(),
  labels: z.array(z.string()).describe("the labels that decide what this connection can read: the user's, narrowed by a token restriction"),
  admin: z.boolean(),
  via: z.enum(['token', 'session', 'header']),
  restriction: z.array(z.string()).nullable().describe("the token's label restriction, or null for the user's whole access"),
  scopes: z
    .array(z.string())
    .nullable()
    .describe('what the token may do (mcp, api, admin), or null for a browser session or the proxy, which are not scoped'),
});
const hit = z.object({ id: z.string(), title: z.string(), snippet: z.string() });
const itemOutput = z.object({ id: z.string(), title: z.string(), text: z.string(), labels: z.array(z.string()) });
const searchInput = z.object({
  query: z.string().min(1).max(QUERY_MAX).describe('words to look for'),
  limit: z.number().int().min(1).max(50).default(10).describe('how many results, 1 to 50 (default 10)'),
});
const searchOutput = z.object({ results: z.array(hit) });
const fetchInput = z.object({ id: z.string().min(1).max(ITEM_ID_MAX).describe('the document id') });

function json(value: unknown) {
  return [{ type: 'text' as const, text: JSON.stringify(value) }];
}

/**
 * A handler whose failure is told to the caller in words that name nothing of svc's insides: the SDK would send an
 * error's own message, and a database driver's names the statement or the database server. The log has the cause.
 */
function guarded<A extends unknown[], R>(log: Logger, what: string, handler: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return async (...args) => {
    try {
      return await handler(...args);
    } catch (e) {
      if (e instanceof McpError) throw unprefixed(e);
      log.warn('mcp_handler_failed', { handler: what, error: safeDatabaseMessage(e) });
      throw new McpError(
        ErrorCode.InternalError,
        isBusy(e) || isUnreachable(e)
          ? 'svc cannot read its database just now; try again shortly'
          : 'svc failed to answer this call; its log has details',
      );
    }
  };
}

/**
 * The error as a client receives it: the SDK's McpError puts "MCP error CODE: " before its message, and clients put
 * their own before what they show, so the words would say the code twice.
 */
function unprefixed(e: McpError): McpError {
  e.message = e.message.replace(/^MCP error -?\d+: /, '');
  return e;
}

/** McpServer's own tools/call answers a failure (an unknown tool) as an isError result whose text is prefixed too. */
function unprefixedResult(result: unknown): unknown {
  const r = result as { isError?: boolean; content?: { type: string; text?: string }[] };
  if (r.isError !== true || !Array.isArray(r.content)) return result;
  return {
    ...r,
    content: r.content.map((c) =>
      c.type === 'text' && typeof c.text === 'string' ? { ...c, text: c.text.replace(/^MCP error -?\d+: /, '') } : c,
    ),
  };
}

/** What the handlers of every request share: the store, the cursor key, and where failures are told. */
interface Shared {
  readonly db: Db;
  /** signs resources/list cursors (see cursor.ts) */
  readonly cursorKey: Buffer;
  /** gets what a failed handler could not tell */
  readonly log: Logger;
}

export interface McpOptions extends Shared {
  /** the upstreams' tools, merged after svc's own; null without [upstream] sections */
  readonly upstreams: UpstreamGateway | null;
}

/** Who is calling, as the route knows it. */
export interface McpRequest {
  readonly principal: Principal;
  /** the client declared URL elicitation when it opened its session: a needed connection is asked for that way */
  readonly urlElicitation: boolean;
  /** the caller's client address, for the audit rows of upstream calls */
  readonly peer: string;
  /** aborted when the request's client has gone (a broad search stops at its next turn); made only when asked */
  readonly signal?: () => AbortSignal;
}

/** Who is calling, for one request: what its handlers read with. */
interface Caller extends McpRequest {
  readonly access: Access;
}

/** The key under which a message's caller travels in the AuthInfo the transport hands each handler. */
const CALLER = 'svc.caller';

/**
 * The caller of the request this message came in: set by `answer` for this request's transport, so it is never
 * another request's. Without one (which `answer` never allows) the handler fails rather than guess: every handler
 * calls this inside `guarded`, which logs the failure and answers in svc's own words.
 */
function callerOf(extra: { authInfo?: AuthInfo }): Caller {
  const caller = extra.authInfo?.extra?.[CALLER];
  if (caller === undefined) throw new Error('an MCP message came without its caller');
  return caller as Caller;
}

/** Idle servers kept for the next requests; more at once are built, and dropped when done. */
const POOL_MAX = 64;

export interface McpEndpoint {
  /** Answers one request's parsed body for its caller, on a fresh transport. */
  answer(request: Request, parsedBody: unknown, caller: McpRequest): Promise<Response>;
}

/**
 * The /mcp endpoint: servers built once with svc's tools (and the upstreams'), each answering one request at a time.
 * A server that answered an `initialize` is not kept: it would remember that client's capabilities.
 */
export function mcpEndpoint(options: McpOptions): McpEndpoint {
  const idle: McpServer[] = [];
  return {
    async answer(request, parsedBody, from) {
      // Labels come from the user record read for this very request, so a label change applies on the next call; a
      // token's restriction narrows them inside every query.
      const caller: Caller = { ...from, access: accessOf(from.principal) };
      const server = idle.pop() ?? buildMcpServer(options);
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      const unsent = answerEvenUnwritable(transport, parsedBody, options.log);
      // Not the caller's credential: only who they are, for svc's own handlers.
      const authInfo: AuthInfo = { token: '', clientId: '', scopes: [], extra: { [CALLER]: caller } };
      let response: Response;
      try {
        // Stateless JSON: the response exists once every request id of the body has its answer. A batch holds each id
        // once (batch.ts refuses a repeated one, or a cancel of its own call), so every handler of this request has
        // ended by then; close() would abort one that had not, and its answer would go to this request's transport.
        response = await transport.handleRequest(request, { parsedBody, authInfo });
      } catch (e) {
        await detach(server);
        throw e;
      }
      // The SDK drops each answered call's abort controller a few microtasks after the answer exists; detached in
      // the next turn, close() has none left to abort. Only then is the server idle again.
      // A server whose answer could not be written is not used again.
      const keep = !opensSession(parsedBody) && !unsent.happened;
      setImmediate(() => {
        void detach(server).then(
          () => keep && idle.length < POOL_MAX && idle.push(server),
          () => undefined,
        );
      });
      return response;
    },
  };
}

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
 * The transport writes the request's answer once every id has one, with JSON.stringify; should that throw (an answer
 * nested too deep, which svc's handlers bound, or anything else no JSON can hold), the request would never be
 * answered. Then each id of the request is answered again in words that always encode: a tool call's as its
 * `isError` result, any other's as an internal error. `happened` tells the caller not to use the server again.
 */
function answerEvenUnwritable(transport: WebStandardStreamableHTTPServerTransport, body: unknown, log: Logger): { happened: boolean } {
  const state = { happened: false };
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    try {
      return await send(message, options);
    } catch (e) {
      if (!('id' in message) || 'method' in message) throw e;
      state.happened = true;
      log.warn('mcp_answer_unwritable', { error: e instanceof Error ? e.message.slice(0, 200) : 'failed' });
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
            : { jsonrpc: '2.0', id, error: { code: ErrorCode.InternalError, message: text } };
        try {
          await send(replacement, options);
          return;
        } catch {
          // still not encodable: the next one
        }
      }
    }
  };
  return state;
}

/**
 * Ends the server's transport, so it can take the next one. close() builds a "connection closed" error that reaches
 * no one (and would abort any call still running): built without a stack trace, which costs most of its time.
 * close() does that synchronously.
 */
function detach(server: McpServer): Promise<void> {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return server.close();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function buildMcpServer(options: McpOptions): McpServer {
  const server = new McpServer(SERVER_INFO, {
    jsonSchemaValidator: validator,
    capabilities: { resources: {} },
    instructions:
      'svc holds documents you may be allowed to read. Use `search` to find documents by words, then `fetch` to read one in full by its id. `whoami` tells whose access you are using.',
  });
  const own = options.upstreams ? ownToolHandlers(server) : null;
  registerWhoami(server, options);
  registerSearch(server, options);
  registerFetch(server, options);
  registerResources(server, options);
  if (own && options.upstreams) mergeUpstreamTools(server, options, own, options.upstreams);
  // The stateless endpoint can never send a notification, so none is announced (McpServer announces tools'
  // listChanged as soon as a tool is registered).
  server.server.registerCapabilities({ tools: { listChanged: false }, resources: { listChanged: false } });
  return server;
}

type Handler = (request: never, extra: never) => unknown;

/**
 * Keeps McpServer's own tools/list and tools/call handlers as it installs them (when the first tool is registered),
 * so the merged handlers can answer svc's tools, and an unknown name, exactly as McpServer does.
 */
function ownToolHandlers(server: McpServer): { list?: Handler; call?: Handler } {
  const low = server.server;
  const own: { list?: Handler; call?: Handler } = {};
  const install = low.setRequestHandler.bind(low);
  low.setRequestHandler = ((schema: unknown, handler: Handler) => {
    if (schema === ListToolsRequestSchema) own.list = handler;
    if (schema === CallToolRequestSchema) own.call = handler;
    return (install as (s: unknown, h: Handler) => void)(schema, handler);
  }) as typeof low.setRequestHandler;
  return own;
}

/**
 * tools/list: svc's own tools, then each upstream tool this caller may use as NAME__TOOL with its approved
 * definition. tools/call: an upstream tool the caller may use goes to its upstream; every other name (svc's own, an
 * unknown one, and an upstream tool the caller may not use or that is not approved) to McpServer's handler, so what
 * a caller may not use fails exactly like a tool that does not exist.
 */
function mergeUpstreamTools(
  server: McpServer,
  { log, cursorKey }: Shared,
  own: { list?: Handler; call?: Handler },
  upstreams: UpstreamGateway,
): void {
  const low = server.server;
  delete (low as { setRequestHandler?: unknown }).setRequestHandler;
  const list = own.list as (r: unknown, e: unknown) => Promise<{ tools: unknown[] }>;
  const call = own.call as (r: unknown, e: unknown) => Promise<unknown>;
  const toolsKey = deriveKey(cursorKey, 'mcp-tools-cursor');
  // svc's own tools open the first page; what they take of a page is measured once.
  let ownBytes: number | null = null;
  low.setRequestHandler(
    ListToolsRequestSchema,
    guarded(log, 'tools/list', async (request, extra) => {
      const { principal, access } = callerOf(extra);
      const cursor = request.params?.cursor;
      const after = cursor === undefined ? null : decodeCursor(toolsKey, principal.user.id, cursor);
      if (cursor !== undefined && after === null) throw new McpError(-32602, 'invalid cursor: not one this server gave you');
      const mine = after === null ? await list(request, extra) : { tools: [] };
      ownBytes ??= Buffer.byteLength(JSON.stringify(mine.tools));
      const theirs = await upstreams.tools(access, principal.user.id, after, TOOLS_LIST_MAX - (after === null ? ownBytes : 0));
      return {
        ...mine,
        tools: [...mine.tools, ...theirs.tools],
        ...(theirs.last === null ? {} : { nextCursor: encodeCursor(toolsKey, principal.user.id, theirs.last) }),
      } as never;
    }),
  );
  low.setRequestHandler(
    CallToolRequestSchema,
    guarded(log, 'tools/call', async (request, extra) => {
      const { principal, access, peer, urlElicitation } = callerOf(extra);
      const resolved = await upstreams.resolve(request.params.name, access, principal.user.id);
      if (!resolved) return unprefixedResult(await call(request, extra)) as never;
      const caller = {
        uid: principal.user.uid,
        userId: principal.user.id,
        email: principal.user.email,
        name: principal.user.name,
        labels: effectiveLabels(access),
        scopes: principal.via === 'token' ? [...(principal.scopes ?? [])] : null,
        via: principal.via,
        tokenId: principal.tokenId ?? null,
        grantId: principal.grantId ?? null,
        clientId: principal.clientId ?? null,
        peer,
      };
      if ('connect' in resolved) return upstreams.callConnect(resolved.connect, caller, urlElicitation);
      return upstreams.call(resolved.tool, request.params.arguments, caller, urlElicitation);
    }),
  );
}

function registerWhoami(server: McpServer, { log }: Shared): void {
  server.registerTool(
    'whoami',
    {
      title: 'Who am I',
      description:
        "Tells which svc user this connection acts as: uid, name, email, the ACL labels it reads with, admin flag, how it signed in (token, session or header), and a token's label restriction.",
      outputSchema: whoamiOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    guarded(log, 'whoami', async (extra: { authInfo?: AuthInfo }) => {
      const { principal, access } = callerOf(extra);
      const u = principal.user;
      const restriction = access.restriction === null ? null : [...access.restriction];
      const scopes = principal.via === 'token' ? [...(principal.scopes ?? [])] : null;
      const result = {
        uid: u.uid,
        name: u.name,
        email: u.email,
        labels: [...effectiveLabels(access)],
        admin: u.admin,
        via: principal.via,
        restriction,
        scopes,
      };
      return { content: json(result), structuredContent: result };
    }),
  );
}

function registerSearch(server: McpServer, { db, log }: Shared): void {
  server.registerTool(
    'search',
    {
      title: 'Search documents',
      description:
        'Full-text search over the documents this user may read; best matches first. Give plain words (punctuation and search operators are ignored). Returns id, title and a snippet for each hit; call `fetch` with an id to read the whole document.',
      inputSchema: searchInput,
      outputSchema: searchOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    guarded(log, 'search', async ({ query, limit }, extra) => {
      const { principal, access, signal } = callerOf(extra);
      try {
        const caller = { user: principal.user.id, credential: credentialOf(principal) };
        const results = await searchVisible(db, query, access, limit, caller, signal ? { signal: signal() } : {});
        return { content: json(results), structuredContent: { results } };
      } catch (e) {
        // A search too broad to rank, or one broad search too many at once: the caller is told what to do.
        if (e instanceof AppError) return { content: [{ type: 'text' as const, text: e.message }], isError: true };
        throw e;
      }
    }),
  );
}

function registerFetch(server: McpServer, { db, log }: Shared): void {
  server.registerTool(
    'fetch',
    {
      title: 'Fetch a document',
      description: 'Reads one document in full by its id (as returned by `search`): id, title, text and ACL labels.',
      inputSchema: fetchInput,
      outputSchema: itemOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    guarded(log, 'fetch', async ({ id }, extra) => {
      const item = await fetchVisible(db, id, callerOf(extra).access);
      // Missing and not visible are the same answer, from the same single query.
      if (!item) return { content: [{ type: 'text' as const, text: `not found: no document "${id}"` }], isError: true };
      const result = { id: item.id, title: item.title, text: item.text, labels: [...item.labels] };
      return { content: json(result), structuredContent: result };
    }),
  );
}

/** Resources are served by hand: McpServer's template listing cannot page with a cursor. */
function registerResources(server: McpServer, { db, cursorKey, log }: Shared): void {
  const low = server.server;
  low.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: `${RESOURCE_PREFIX}{id}`,
        name: 'item',
        title: 'Document',
        description: 'A document by id',
        mimeType: 'text/markdown',
      },
    ],
  }));
  low.setRequestHandler(
    ListResourcesRequestSchema,
    guarded(log, 'resources/list', async (request, extra) => {
      const { principal, access } = callerOf(extra);
      const cursor = request.params?.cursor;
      const after = cursor === undefined ? null : decodeCursor(cursorKey, principal.user.id, cursor);
      if (cursor !== undefined && after === null) throw new McpError(-32602, 'invalid cursor: not one this server gave you');
      const page = await listVisible(db, access, after, RESOURCE_PAGE);
      return {
        resources: page.items.map((i) => ({ uri: RESOURCE_PREFIX + i.id, name: i.id, title: i.title, mimeType: 'text/markdown' })),
        ...(page.last === null ? {} : { nextCursor: encodeCursor(cursorKey, principal.user.id, page.last) }),
      };
    }),
  );
  low.setRequestHandler(
    ReadResourceRequestSchema,
    guarded(log, 'resources/read', async (request, extra) => {
      const uri = request.params.uri;
      const id = uri.startsWith(RESOURCE_PREFIX) ? decodeId(uri.slice(RESOURCE_PREFIX.length)) : null;
      const item = id === null ? null : await fetchVisible(db, id, callerOf(extra).access);
      if (!item) throw new McpError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`);
      return { contents: [{ uri, mimeType: 'text/markdown', text: item.text }] };
    }),
  );
}

function decodeId(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}
