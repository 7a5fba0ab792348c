// One connection to one upstream MCP server, through the SDK's own Client and transports: Streamable HTTP to a
// `url`, or a stdio child svc starts from `command`. Opened on first use and again after it fails or the child exits
// (a child is started again with backoff: 1 s doubling to 60 s). Only `token_env`'s value crosses to the upstream:
// never a caller's token, cookie or header.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ToolListChangedNotificationSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { UpstreamConfig } from '../config/load.ts';
import type { Logger } from '../log.ts';
import { VERSION } from '../version.ts';

const BACKOFF_FIRST_MS = 1000;
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

function transportFor(upstream: UpstreamConfig): Transport {
  const t = upstream.transport;
  if (t.kind === 'http') {
    const headers: Record<string, string> = upstream.token === null ? {} : { Authorization: `Bearer ${upstream.token}` };
    return new StreamableHTTPClientTransport(new URL(t.url), { requestInit: { headers, redirect: 'error' } });
  }
  return new StdioClientTransport({ command: t.command, args: [...t.args], env: childEnvironment(t.env), stderr: 'pipe' });
}

export class UpstreamConnection {
  private client: Promise<Client> | null = null;
  private failures = 0;
  private retryAt = 0;
  private stopped = false;

  constructor(
    readonly upstream: UpstreamConfig,
    private readonly log: Logger,
    /** told when the upstream says its tool list changed */
    private readonly onToolsChanged: () => void,
  ) {}

  /** The connected client: the open one, or a new connection (refused while a restart's backoff runs). */
  connected(): Promise<Client> {
    if (this.stopped) return Promise.reject(new Error('the upstream connection is closed'));
    if (this.client) return this.client;
    if (Date.now() < this.retryAt) return Promise.reject(new Error('the upstream is restarting'));
    const opening = this.open();
    this.client = opening;
    opening.catch(() => {
      if (this.client === opening) this.lost();
    });
    return opening;
  }

  private async open(): Promise<Client> {
    const client = new Client({ name: 'svc', version: VERSION });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.onToolsChanged());
    const transport = transportFor(this.upstream);
    if (transport instanceof StdioClientTransport) {
      transport.stderr?.on('data', (chunk: Buffer) => {
        this.log.debug?.('upstream_stderr', { upstream: this.upstream.name, text: chunk.toString('utf8').slice(0, 500) });
      });
    }
    client.onclose = () => {
      if (!this.stopped) this.lost();
    };
    await client.connect(transport, { timeout: this.upstream.timeoutMs });
    this.failures = 0;
    return client;
  }

  /** The connection ended or failed: the next use opens a new one, after the backoff for a stdio child. */
  private lost(): void {
    const old = this.client;
    this.client = null;
    void old?.then((c) => c.close()).catch(() => undefined);
    if (this.upstream.transport.kind === 'stdio') {
      const wait = Math.min(BACKOFF_FIRST_MS * 2 ** this.failures, BACKOFF_MAX_MS);
      this.failures++;
      this.retryAt = Date.now() + wait;
      this.log.warn('upstream_lost', { upstream: this.upstream.name, restart_in_ms: wait });
    }
  }

  /** Every tool the upstream offers (all pages). */
  async listTools(): Promise<Tool[]> {
    const client = await this.connected();
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: this.upstream.timeoutMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined && tools.length < 10_000);
    return tools;
  }

  async close(): Promise<void> {
    this.stopped = true;
    const client = this.client;
    this.client = null;
    await client?.then((c) => c.close()).catch(() => undefined);
  }
}
