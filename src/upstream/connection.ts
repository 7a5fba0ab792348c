// One connection to one upstream MCP server, through the SDK's own Client and transports: Streamable HTTP to a
// `url`, or a stdio child svc starts from `command`. Opened on first use and again after it fails or the child exits
// (a child is started again with backoff: 1 s doubling to 60 s). Only `token_env`'s value crosses to the upstream:
// never a caller's token, cookie or header.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  ErrorCode,
  ListToolsResultSchema,
  McpError,
  ToolListChangedNotificationSchema,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { UpstreamConfig } from '../config/load.ts';
import type { Logger } from '../log.ts';
import { VERSION } from '../version.ts';
import { AnswerTooLarge, upstreamFetch } from './http-fetch.ts';
import { nestingDepth } from '../domain/canonical-json.ts';
import { launch } from './stdio-sandbox.ts';

const BACKOFF_FIRST_MS = 1000;
/** How long closing a connection waits for an HTTP upstream to end its session. */
const SESSION_END_MS = 2000;
/** An upstream's answer nested deeper than this is refused. */
export const NESTING_MAX = 64;

/** An answer the upstream sent that breaks what svc takes (the call's `protocol` fault). */
export class ProtocolFault extends Error {}
/** A failure of svc's own before the request left for the upstream: the upstream is not at fault. */
export class SvcFault extends Error {}
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

/** A request body's identity assertion moved from its `_meta` to the header X-Svc-Identity. */
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
    const transport = new StreamableHTTPClientTransport(new URL(t.url), {
      requestInit: { headers },
      fetch: async (input, init) => {
        const sent = identityToHeader(init);
        if (bearer === null) return http.fetch(input, sent);
        const send = (token: string) => {
          const withToken = new Headers(sent?.headers);
          withToken.set('Authorization', `Bearer ${token}`);
          return http.fetch(input, { ...sent, headers: withToken });
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
    return { transport, release: () => http.close() };
  }
  // In a sandbox where the host has one (stdio-sandbox.ts): the child can read neither svc nor its database.
  const transport = new StdioClientTransport({ ...launch(t), env: childEnvironment(t.env), stderr: 'pipe' });
  return { transport, release: () => undefined };
}

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
  /** when the last call ended (or the connection was made) */
  usedAt = Date.now();

  constructor(
    readonly upstream: UpstreamConfig,
    private readonly log: Logger,
    /** told when the upstream says its tool list changed */
    private readonly onToolsChanged: () => void,
    /** auth = oauth: the person's token, asked for each request; null: the upstream's own token_env, if any */
    private readonly bearer: BearerSource | null = null,
  ) {}

  /** The connected client: the open one, or a new connection (refused while a restart's backoff runs). */
  connected(): Promise<Client> {
    if (this.stopped) return Promise.reject(new Error('the upstream connection is closed'));
    if (this.client) return this.client;
    if (Date.now() < this.retryAt) return Promise.reject(new Error('the upstream is restarting'));
    const opening = this.open(++this.generation);
    this.client = opening;
    opening.catch(() => {
      if (this.client === opening) this.lost();
    });
    return opening;
  }

  private async open(generation: number): Promise<Client> {
    this.openedAt = Date.now();
    const client = new Client({ name: 'svc', version: VERSION });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.onToolsChanged());
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
    client.onclose = () => {
      release();
      if (!this.stopped && generation === this.generation) this.lost();
    };
    try {
      await client.connect(transport, { timeout: this.upstream.timeoutMs });
    } catch (e) {
      release();
      throw e;
    }
    this.failures = 0;
    return client;
  }

  /** The connection ended or failed: the next use opens a new one, after the backoff for a stdio child. */
  private lost(): void {
    if (this.client === null) return;
    const old = this.client;
    this.client = null;
    void old?.then((c) => c.close()).catch(() => undefined);
    // A child cut off for an oversized answer did not fail: it is started again at once.
    if (this.upstream.transport.kind === 'stdio' && this.oversizedAt < this.openedAt) {
      const wait = Math.min(BACKOFF_FIRST_MS * 2 ** this.failures, BACKOFF_MAX_MS);
      this.failures++;
      this.retryAt = Date.now() + wait;
      this.log.warn('upstream_lost', { upstream: this.upstream.name, restart_in_ms: wait });
    }
  }

  /**
   * The tools the upstream offers, page by page, up to `max` (one more, so the caller can tell there were more) and
   * at most LIST_PAGES pages: a hostile upstream cannot make svc hold more than that.
   */
  async listTools(max: number): Promise<Tool[]> {
    const client = await this.connected();
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < LIST_PAGES; page++) {
      // Asked as a plain request: the SDK's listTools also compiles a JSON Schema validator for every outputSchema
      // listed, and keeps them (a hostile listing held svc's event loop for seconds, and its memory grew with each).
      const answer = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, ListToolsResultSchema, {
        timeout: this.upstream.timeoutMs,
      });
      for (const tool of answer.tools) {
        if (tools.length > max) return tools;
        tools.push(tool);
      }
      cursor = answer.nextCursor;
      if (cursor === undefined) break;
    }
    return tools;
  }

  /** Calls one tool; the SDK's own errors (timeout, connection closed, the upstream's JSON-RPC error) propagate. */
  async callTool(name: string, args: Record<string, unknown> | undefined, identity: string | null = null): Promise<unknown> {
    this.inFlight++;
    const current = this.connected();
    const started = Date.now();
    try {
      const client = await current;
      const meta = identity === null ? {} : { _meta: { [IDENTITY_META]: identity } };
      // A plain request, passed through as it is: no validation against the upstream's own outputSchema (an
      // upstream's pattern could hold svc's event loop; the caller's client validates against the approved schema).
      const params = { name, ...(args === undefined ? {} : { arguments: args }), ...meta };
      const answer = await client.request({ method: 'tools/call', params }, CallToolResultSchema, {
        timeout: this.upstream.timeoutMs,
      });
      // Bounded as it is read: an answer nested deeper could not be written back to the caller.
      if (nestingDepth(answer, NESTING_MAX) > NESTING_MAX) throw new ProtocolFault(`the answer nests deeper than ${NESTING_MAX} levels`);
      return answer;
    } catch (e) {
      // Arguments no JSON text can hold (nested too deep for JSON.stringify) fail as the request is written, before
      // anything is sent: svc's failure, not the upstream's.
      if (e instanceof RangeError) throw new SvcFault(`the request could not be encoded: ${e.message}`);
      // A closed connection is replaced now, not when its close event comes: the next call must not find it.
      const closed = this.oversizedAt >= started || (e instanceof McpError && e.code === ErrorCode.ConnectionClosed);
      if (closed && this.client === current) this.lost();
      if (this.oversizedAt >= started) throw new AnswerTooLarge('the upstream answered more than 10 MiB');
      throw e;
    } finally {
      this.inFlight--;
      this.usedAt = Date.now();
    }
  }

  /** Whether a call is under way on this connection: it must not be closed now. */
  get busy(): boolean {
    return this.inFlight > 0;
  }

  /**
   * Closes the connection; an HTTP upstream's session is ended there too (a DELETE with its id, waited for at most
   * SESSION_END_MS), so what it kept for the person does not outlive their session at svc.
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
