// What /mcp offers of the upstreams (CONTRACT §6.1): each tool a caller may use, as NAME__TOOL with its approved
// definition, and a call passed through to the upstream with its result back unchanged. Faults stay on the call: an
// upstream that is down, too slow, breaks the protocol, answers too much or is over the caller's rate gives that call
// an `isError` result naming the upstream and the cause, never the upstream's own detail. Every call is audited with
// the SHA-256 of its arguments, never the arguments.
import type {
  CallToolResult,
  CompleteResult,
  GetPromptResult,
  Prompt,
  ReadResourceResult,
  Resource,
  ResourceTemplateType as ResourceTemplate,
  Tool,
} from '@modelcontextprotocol/client';
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import { fingerprint } from '../domain/canonical-json.ts';
import { mergedName, offerable, SEPARATOR, splitMerged } from '../domain/merged-names.ts';
import type { Access } from '../domain/visibility.ts';
import type { Caller } from '../domain/caller.ts';
import { ConnectionNeeded, UpstreamRefusal } from '../domain/errors.ts';
import { InputAsked, MissingCapability } from '../domain/questions.ts';
import { mapContent, mapPromptResult, mapReadResult, mapResourceTemplate, unmapTemplate, unmapUri } from '../domain/resource-uris.ts';
import type { Logger } from '../log.ts';
import type { Metrics, UpstreamCallKind } from '../metrics/events.ts';
import { findTool, listApproved, type ToolGate } from '../store/upstream-tools.ts';
import { accountFor, listAccounts, type Listing } from '../store/upstream-accounts.ts';
import { mayConnect, mayRead, usable } from './access.ts';
import { currentSpan, inSpan, tracing } from '../trace/spans.ts';
import { mcpSpanTarget } from '../domain/mcp-methods.ts';
import { CallAudit, countedCalls } from './call-audit.ts';
import { UpstreamConnections, type ResourceListener } from './connections.ts';
import { rateCounter, type RateCounter } from './rate.ts';
import { NeedsConnection, UpstreamAccounts, type Bearer } from './accounts.ts';
import { ensureSigningKey, IdentitySigner } from './identity.ts';
import { startDiscovery, type Discovery } from './discovery.ts';
import { listedFingerprint } from './listings.ts';
import { Cancelled, ProtocolFault, SvcFault, UpstreamTimeout, type Relay, type UpstreamConnection } from './connection.ts';
import { keepFromChildren } from './stdio-sandbox.ts';
import { OfferedDefinitions, type OfferedTool } from './offered.ts';
import { AppPins } from './apps.ts';
import { ANSWER_MAX, AnswerTooLarge } from './http-fetch.ts';

/** Where a merged resources/list goes on: an upstream, and its own cursor (none: its first page). */
export interface ResourcesFrom {
  readonly upstream: string;
  readonly cursor?: string;
}

/**
 * Where a resource subscription's updates come from: the upstream, its own URI, and whose connection they come on
 * (a person's id; null: the upstream's one process, shared by everyone).
 */
export interface ResourceWatch {
  readonly upstream: string;
  readonly uri: string;
  readonly owner: number | null;
}

/** At most this many resource templates of one upstream are listed. */
const TEMPLATES_PER_UPSTREAM = 100;
/** An audit row names at most this much of a URI. */
const URI_AUDIT_MAX = 512;

/** The first of `candidates` (in merged-name order) that fit in `budget` bytes; `last` names the last given when more remain. */
function pageOf(candidates: OfferedTool[], budget: number): { objects: Tool[]; last: string | null } {
  candidates.sort((a, b) => (a.tool.name < b.tool.name ? -1 : 1));
  const objects: Tool[] = [];
  let used = 0;
  for (const c of candidates) {
    // Every definition offered is at most 16 KiB, so a page always holds one.
    if (used + c.bytes + 1 > budget && objects.length > 0) return { objects, last: objects[objects.length - 1]!.name };
    used += c.bytes + 1;
    objects.push(c.tool);
  }
  return { objects, last: null };
}

/** The tool that stands for an `auth = oauth` upstream a caller has not connected to: NAME__connect. */
const CONNECT_TOOL = 'connect';

/** Where a person connects their account at an `auth = oauth` upstream: nothing secret in it. */
export const connectUrl = (config: Config, upstream: UpstreamConfig) => `${config.server.baseUrl}/upstreams/${upstream.name}/connect`;

function connectTool(upstream: UpstreamConfig): Tool {
  return {
    name: `${upstream.name}${SEPARATOR}${CONNECT_TOOL}`,
    title: `Connect your account at ${upstream.name}`,
    description: `Connect your account at ${upstream.name}: its tools act as you once you have. Calling this tells you where to connect.`,
    inputSchema: { type: 'object', properties: {} },
  };
}

/** What a merged name a caller may use stands for. */
export type Resolved = { readonly tool: ToolGate } | { readonly connect: UpstreamConfig };

type Cause = 'unavailable' | 'timeout' | 'protocol' | 'too_large' | 'rate_limited' | 'svc_error' | 'busy' | 'cancelled' | 'needs_input';

/** What a caller is told of a request the upstream did not answer: the upstream and the cause, never its own detail. */
function refusalText(upstream: string, cause: Cause, detail: string): string {
  return `upstream "${upstream}" ${cause}: ${detail}`;
}

const asResult = (text: string): CallToolResult => ({ content: [{ type: 'text', text }], isError: true });

/** Why a request has no answer from the upstream: its audit outcome. */
type Refused = Cause | 'not_connected';

/** The audit row's action for each kind of request passed to an upstream (CONTRACT §6.3). */
const AUDIT_ACTION: Record<UpstreamCallKind, string> = {
  tool: 'upstream.call',
  prompt: 'upstream.prompt',
  resource: 'upstream.read',
  completion: 'upstream.complete',
};

/** The MCP method of each kind of request passed to an upstream. */
const METHOD: Record<UpstreamCallKind, string> = {
  tool: 'tools/call',
  prompt: 'prompts/get',
  resource: 'resources/read',
  completion: 'completion/complete',
};

/** The upstream's answer, or why there is none: the outcome, what the caller is told, and the upstream's error code. */
type Passed = { answer: Record<string, unknown> } | { refused: Refused; text: string; code?: number };

/** The codes an upstream answers a name or URI it does not have with: MCP's resource not found, and invalid params. */
const NOT_THERE = new Set([-32002, -32602]);

/** One request of a caller's for an upstream: what it is, for the audit trail and the metrics, and how it is sent. */
interface Passage {
  readonly upstream: UpstreamConfig;
  readonly kind: UpstreamCallKind;
  /** the audit row's target after the upstream's name: a tool's or prompt's name, a URI, a completion's reference */
  readonly target: string;
  /** the SHA-256 of a tool call's arguments */
  readonly argumentsSha256?: string;
  readonly send: (connection: UpstreamConnection, identity: string | null) => Promise<Record<string, unknown>>;
  /** whether an answer says the request failed (a tool's isError): the outcome `error` */
  readonly failed?: (answer: Record<string, unknown>) => boolean;
}

function causeOf(e: unknown): Exclude<Cause, 'rate_limited' | 'busy' | 'cancelled'> {
  if (e instanceof MissingCapability) return 'needs_input';
  if (e instanceof AnswerTooLarge) return 'too_large';
  if (e instanceof ProtocolFault) return 'protocol';
  if (e instanceof SvcFault) return 'svc_error';
  if (e instanceof UpstreamTimeout) return 'timeout';
  return 'unavailable';
}

const CAUSE_TEXT: Record<Exclude<Cause, 'rate_limited' | 'cancelled'>, string> = {
  unavailable: 'cannot be reached just now; try again later',
  svc_error: 'svc could not send this call; its log has details',
  busy: 'every session svc may hold there is in use; try again shortly',
  timeout: 'did not answer in time',
  protocol: 'answered with an error or an answer svc cannot read',
  too_large: `answered more than ${ANSWER_MAX / 1024 / 1024} MiB`,
  needs_input: 'asked the person a question your client did not declare it can take',
};

export class UpstreamGateway {
  /** counts calls per upstream and person for `rate` */
  private readonly rate: RateCounter = rateCounter();
  private readonly callAudit: CallAudit;
  /** the approved definitions offered, parsed once per approval: of tools, and of prompts */
  private readonly offered: OfferedDefinitions;
  private readonly offeredPrompts: OfferedDefinitions;
  /** upstreams the last call found unreachable */
  private readonly unreachable = new Set<string>();
  /** the upstreams' apps, served only as approved (apps.ts); the admin's preview reads through it */
  readonly apps: AppPins;
  /** calls that never reach the upstream (over `rate`, told where to connect): one audit row per person, upstream, outcome and minute */
  private readonly counted: ReturnType<typeof countedCalls>;

  constructor(
    private readonly config: Config,
    private readonly database: Database,
    private readonly discovery: Discovery,
    /** every connection to the upstreams: the one a call goes to is decided there */
    private readonly connections: UpstreamConnections,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    /** signs identity assertions for upstreams with identity = jwt; null when none has it */
    private readonly signer: IdentitySigner | null,
    /** the people's own accounts at auth = oauth upstreams; null when there is none */
    readonly accounts: UpstreamAccounts | null = null,
  ) {
    this.callAudit = new CallAudit(database);
    this.offered = new OfferedDefinitions(database);
    this.offeredPrompts = new OfferedDefinitions(database);
    this.counted = countedCalls(database);
    this.apps = new AppPins(config, database, connections, log);
  }

  /**
   * The tools this caller may use, merged-named, with their approved definitions, in merged-name order: those after
   * `after` (a merged name, from a cursor), as many as fit in `budget` bytes; `last` names the last one given when more
   * remain. Of an `auth = oauth` upstream, only once the caller has connected their account there, and only the tools
   * their own connection listed, as they were approved (upstream/listings.ts); before, one tool NAME__connect stands in
   * its place. Only the definitions offered are read, each from a copy kept per approval.
   */
  async tools(access: Access, userId: number, after: string | null, budget: number): Promise<{ tools: Tool[]; last: string | null }> {
    const rows = await listApproved(this.database.db);
    this.offered.keepOnly(rows);
    const connected = await this.connectedUpstreams(userId);
    const may = rows
      .filter((t) => offerable(t) && usable(t, this.config, access))
      .filter((t) => this.oauthOf(t.upstream) === null || listedFingerprint(connected.get(t.upstream), t.name) === t.approvedFingerprint)
      .filter((t) => after === null || mergedName(t) > after);
    const definitions = await this.offered.offered(may, mergedName);
    // A tool's `_meta.ui` only while its app is approved and the caller may read it.
    const candidates: OfferedTool[] = await this.apps.withApps(definitions, access);
    for (const u of this.config.upstreams)
      if (u.oauth !== null && !connected.has(u.name) && mayConnect(u, access)) {
        const tool = connectTool(u);
        if (after === null || tool.name > after) candidates.push({ tool, bytes: Buffer.byteLength(JSON.stringify(tool)) });
      }
    const page = pageOf(candidates, budget);
    return { tools: page.objects, last: page.last };
  }

  /**
   * The prompts this caller may use, as NAME__PROMPT with their approved definitions, paged as tools are. Prompts are
   * listed on an upstream's own connection only, so an `auth = oauth` upstream offers none (docs/upstreams.md).
   */
  async prompts(access: Access, after: string | null, budget: number): Promise<{ prompts: Prompt[]; last: string | null }> {
    const rows = await listApproved(this.database.db, 'prompt');
    this.offeredPrompts.keepOnly(rows);
    const may = rows.filter(
      (p) =>
        offerable(p) && this.oauthOf(p.upstream) === null && usable(p, this.config, access) && (after === null || mergedName(p) > after),
    );
    const page = pageOf([...(await this.offeredPrompts.offered(may, mergedName)).values()], budget);
    return { prompts: page.objects as unknown as Prompt[], last: page.last };
  }

  /** The prompt a merged name stands for, when this caller may use it; null for anything else. */
  async resolvePrompt(name: string, access: Access): Promise<ToolGate | null> {
    const split = splitMerged(name);
    if (split === null || this.oauthOf(split.upstream) !== null) return null;
    const found = await findTool(this.database.db, split.upstream, split.name, 'prompt');
    return found !== null && usable(found, this.config, access) ? found : null;
  }

  /**
   * The upstream's messages for the prompt, with their URIs mapped; a prompt the upstream no longer has reads like
   * one that does not exist (null). Any other failure is the caller's to read, naming the upstream and the cause.
   */
  async getPrompt(
    prompt: ToolGate,
    args: Record<string, unknown> | undefined,
    caller: Caller,
    relay: Relay = {},
  ): Promise<GetPromptResult | null> {
    const upstream = this.upstreamOf(prompt.upstream);
    const params = { name: prompt.name, ...(args === undefined ? {} : { arguments: args }) };
    const passed = await this.pass(
      {
        upstream,
        kind: 'prompt',
        target: prompt.name,
        send: (connection, identity) => connection.send('prompts/get', params, identity, relay),
      },
      caller,
    );
    // Only its messages: a prompt's description is what was approved (prompts/list), never the upstream's text of now.
    if ('answer' in passed) return mapPromptResult(upstream.name, { messages: passed.answer.messages ?? [] }) as GetPromptResult;
    if (passed.code !== undefined && NOT_THERE.has(passed.code)) return null;
    throw new UpstreamRefusal(passed.text);
  }

  /**
   * One page of the resources of the upstreams this caller may read, their URIs mapped: from `from` (an upstream and
   * its own cursor; null: the first), with where the next page starts. An upstream that cannot list now is passed
   * over: one that is down takes nothing from the others. An app (`ui://`) is listed only when it is approved and the
   * caller may read it, as approved (apps.ts).
   */
  async resources(
    access: Access,
    userId: number,
    from: ResourcesFrom | null,
  ): Promise<{ resources: Resource[]; next: ResourcesFrom | null }> {
    const readable = this.config.upstreams.filter((u) => mayRead(u, access));
    let at = from === null ? 0 : readable.findIndex((u) => u.name === from.upstream);
    let cursor = from?.cursor;
    for (; at >= 0 && at < readable.length; at++, cursor = undefined) {
      const upstream = readable[at]!;
      const page = await this.listWith(upstream, userId, (c) => c.listResources(cursor));
      if (page === null) continue;
      const resources = await this.apps.listing(upstream, page.resources, access);
      const following = readable[at + 1];
      const next =
        page.nextCursor !== undefined
          ? { upstream: upstream.name, cursor: page.nextCursor }
          : following === undefined
            ? null
            : { upstream: following.name };
      return { resources, next };
    }
    return { resources: [], next: null };
  }

  /** The resource templates of every upstream this caller may read, mapped; an upstream that cannot list now is passed over. */
  async templates(access: Access, userId: number): Promise<ResourceTemplate[]> {
    const readable = this.config.upstreams.filter((u) => mayRead(u, access));
    const lists = await Promise.all(
      readable.map(async (upstream) => {
        const listed = await this.listWith(upstream, userId, (c) => c.listResourceTemplates(TEMPLATES_PER_UPSTREAM));
        return (listed ?? []).slice(0, TEMPLATES_PER_UPSTREAM).map((t) => mapResourceTemplate(upstream.name, t));
      }),
    );
    return lists.flat();
  }

  /** A listing on the caller's connection to the upstream; null when it cannot be had now (logged). */
  private async listWith<T>(
    upstream: UpstreamConfig,
    userId: number,
    list: (connection: UpstreamConnection) => Promise<T>,
  ): Promise<T | null> {
    const connection = this.connections.forCall(upstream, userId);
    if (connection === null) return null;
    try {
      return await list(connection);
    } catch (e) {
      if (!(e instanceof NeedsConnection))
        this.log.warn('upstream_listing_failed', {
          upstream: upstream.name,
          error: e instanceof Error ? e.message.slice(0, 200) : 'failed',
        });
      return null;
    }
  }

  /**
   * Reads a mapped URI for the caller: the upstream's contents with their URIs mapped, or null when the URI is not
   * one of an upstream the caller may read, or the upstream has no such resource (the same answer as a URI that
   * does not exist). An app (`ui://`) is read only when it is approved and the caller may read it, and served only
   * as approved: other bytes now are null too, and make it `changed` (apps.ts).
   */
  async read(mapped: string, caller: Caller, relay: Relay = {}): Promise<ReadResourceResult | null> {
    const target = unmapUri(mapped);
    const upstream = target === null ? undefined : this.config.upstreams.find((u) => u.name === target.upstream);
    if (target === null || upstream === undefined || !mayRead(upstream, caller.access)) return null;
    const app = target.uri.startsWith('ui://') ? await this.apps.approved(upstream, target.uri, caller.access) : undefined;
    if (app === null) return null;
    const passed = await this.pass(
      {
        upstream,
        kind: 'resource',
        target: target.uri.slice(0, URI_AUDIT_MAX),
        send: (connection, identity) => connection.send('resources/read', { uri: target.uri }, identity, relay),
      },
      caller,
    );
    if ('answer' in passed)
      return app === undefined
        ? (mapReadResult(upstream.name, { contents: passed.answer.contents ?? [] }) as ReadResourceResult)
        : this.apps.served(upstream, app, mapped, passed.answer);
    if (passed.code !== undefined && NOT_THERE.has(passed.code)) return null;
    throw new UpstreamRefusal(passed.text);
  }

  /**
   * resources/subscribe (or unsubscribe) of a mapped URI for the caller, on the caller's connection to the owning
   * upstream (connections.ts forCall): where its updates will come from, or null when the URI is not one of an
   * upstream the caller may read, or the upstream has no such resource (the answer of a URI that does not exist).
   * Under the upstream's `rate` but for svc's own renewal (`renew`); not audited: nothing is read. An unsubscribe (svc
   * letting go of one) needs no right to read: it is sent on the person's own connection also once they lost it.
   */
  async subscription(mapped: string, caller: Caller, subscribe: boolean, renew = false): Promise<ResourceWatch | null> {
    const target = unmapUri(mapped);
    const upstream = target === null ? undefined : this.config.upstreams.find((u) => u.name === target.upstream);
    if (target === null || upstream === undefined || target.uri.startsWith('ui://')) return null;
    if (subscribe && !mayRead(upstream, caller.access)) return null;
    const overRate = renew ? null : await this.overRate(upstream, caller);
    if (overRate !== null) throw new UpstreamRefusal(overRate);
    const connection = this.connections.forCall(upstream, caller.userId);
    if (connection === null) throw new UpstreamRefusal(refusalText(upstream.name, 'busy', CAUSE_TEXT.busy));
    try {
      if (subscribe && (await connection.capabilities()).resources?.subscribe !== true)
        throw new UpstreamRefusal(`upstream "${upstream.name}" does not offer resource subscriptions`);
      const identity = upstream.identity === 'jwt' ? await this.sign(caller, upstream) : null;
      await connection.resourceSubscription(target.uri, subscribe, identity);
    } catch (e) {
      if (e instanceof UpstreamRefusal) throw e;
      if (e instanceof ProtocolFault && e.code !== undefined && NOT_THERE.has(e.code)) return null;
      if (e instanceof NeedsConnection) throw new UpstreamRefusal(this.connectText(upstream, e.connect));
      const cause = causeOf(e);
      throw new UpstreamRefusal(refusalText(upstream.name, cause, CAUSE_TEXT[cause]));
    }
    return { upstream: upstream.name, uri: target.uri, owner: this.connections.ownerOf(upstream, caller.userId) };
  }

  /** The upstreams whose resources this caller may read (access.ts mayRead), by name, in configuration order. */
  readable(access: Access): string[] {
    return this.config.upstreams.filter((u) => mayRead(u, access)).map((u) => u.name);
  }

  /** Tells `listener` what the upstreams say of their resources, on any of their connections (mcp/changes.ts). */
  listenToResources(listener: ResourceListener): void {
    this.connections.resourceListener = listener;
  }

  /**
   * completion/complete for a prompt NAME__PROMPT or a mapped resource template the caller may use: the owning
   * upstream's completion. Anything else, or an upstream that cannot answer, is an empty completion.
   */
  async complete(params: Record<string, unknown>, caller: Caller): Promise<CompleteResult> {
    const empty: CompleteResult = { completion: { values: [], hasMore: false } };
    const ref = (params.ref ?? {}) as { type?: unknown; name?: unknown; uri?: unknown };
    let owner: { upstream: UpstreamConfig; ref: Record<string, unknown> } | null = null;
    if (ref.type === 'ref/prompt' && typeof ref.name === 'string') {
      const prompt = await this.resolvePrompt(ref.name, caller.access);
      if (prompt !== null) owner = { upstream: this.upstreamOf(prompt.upstream), ref: { type: 'ref/prompt', name: prompt.name } };
    } else if (ref.type === 'ref/resource' && typeof ref.uri === 'string') {
      const target = unmapTemplate(ref.uri);
      const upstream = target === null ? undefined : this.config.upstreams.find((u) => u.name === target.upstream);
      if (target !== null && upstream !== undefined && mayRead(upstream, caller.access))
        owner = { upstream, ref: { type: 'ref/resource', uri: target.uri } };
    }
    if (owner === null) return empty;
    const { upstream } = owner;
    // Only what a completion is: the caller's own `_meta` (a progress token, anything else) does not go on.
    const sent = { ref: owner.ref, argument: params.argument, ...(params.context === undefined ? {} : { context: params.context }) };
    const passed = await this.pass(
      {
        upstream,
        kind: 'completion',
        target: String(owner.ref.name ?? owner.ref.uri).slice(0, URI_AUDIT_MAX),
        send: (connection, identity) => connection.send('completion/complete', sent, identity),
      },
      caller,
    );
    if (!('answer' in passed)) return empty;
    const completion = (passed.answer as { completion?: unknown }).completion;
    return typeof completion === 'object' && completion !== null ? ({ completion } as CompleteResult) : empty;
  }

  /**
   * What a merged name stands for, when this caller may use it: an upstream tool (of an `auth = oauth` upstream, one
   * their own connection listed as it was approved), or NAME__connect of an `auth = oauth` upstream the caller has not
   * connected to; null for anything else.
   */
  async resolve(name: string, access: Access, userId: number): Promise<Resolved | null> {
    const split = splitMerged(name);
    if (split === null) return null;
    const { upstream, name: tool } = split;
    const found = await findTool(this.database.db, upstream, tool);
    const may = found !== null && usable(found, this.config, access);
    const oauthUpstream = this.oauthOf(upstream);
    if (oauthUpstream === null) return may ? { tool: found! } : null;
    const mayConnectThere = mayConnect(oauthUpstream, access);
    if ((!may && !mayConnectThere) || this.accounts === null) return null;
    // One read of the caller's account, by its key: connected, and what their own listing has of this tool.
    const mine = await accountFor(this.database.db, userId, upstream, tool);
    const connected = mine !== null && mine.state === 'connected' && mine.server === oauthUpstream.server;
    if (may && connected && mine.fingerprint === found!.approvedFingerprint) return { tool: found! };
    if (!mayConnectThere) return null;
    // Not connected, any name of the upstream is answered as NAME__connect: its tools may not be listed yet (nobody
    // connected), and which exist tells a caller nothing they could use.
    if (tool === CONNECT_TOOL || !connected) return { connect: oauthUpstream };
    return null;
  }

  /**
   * A tool called by its bare upstream name, as an app's own page calls it (CONTRACT §6.3): the tool NAME__TOOL when
   * exactly one tool this caller may use (resolve) has that name; null for none, for more than one, and for a name
   * in svc's merged form of a configured upstream (svc's tool of that name, usable or not). svc's own tools are
   * matched before this is asked (mcp/methods.ts), so an upstream's tool never shadows one of them.
   */
  async resolveBare(name: string, access: Access, userId: number): Promise<Resolved | null> {
    const split = splitMerged(name);
    if (split !== null && this.config.upstreams.some((u) => u.name === split.upstream)) return null;
    const named = (await listApproved(this.database.db)).filter((t) => t.name === name && offerable(t));
    const found: Resolved[] = [];
    for (const t of named) {
      const resolved = await this.resolve(mergedName(t), access, userId);
      if (resolved !== null && 'tool' in resolved) found.push(resolved);
    }
    return found.length === 1 ? found[0]! : null;
  }

  private oauthOf(upstream: string): UpstreamConfig | null {
    return this.config.upstreams.find((u) => u.name === upstream && u.oauth !== null) ?? null;
  }

  /** The `auth = oauth` upstreams the caller is connected to, each with what their connection listed (null: not yet). */
  private async connectedUpstreams(userId: number): Promise<Map<string, Listing | null>> {
    if (this.accounts === null) return new Map();
    const mine = await listAccounts(this.database.db, { userId });
    const connected = mine.filter((a) => a.state === 'connected' && a.server === this.oauthOf(a.upstream)?.server);
    return new Map(connected.map((a) => [a.upstream, a.listedTools === null ? null : (JSON.parse(a.listedTools) as Listing)]));
  }

  /** The caller's token for the upstream, or that they must connect; null when its server cannot be reached. */
  private async bearerFor(upstream: UpstreamConfig, caller: Caller): Promise<Bearer | null> {
    try {
      return await this.accounts!.bearer(caller.userId, upstream);
    } catch (e) {
      this.log.warn('upstream_token_unavailable', {
        upstream: upstream.name,
        error: e instanceof Error ? e.message.slice(0, 200) : 'failed',
      });
      return null;
    }
  }

  /**
   * NAME__connect (or any name of the upstream, before the caller has connected): says whether the caller is
   * connected, and where to connect when not. Under the upstream's `rate` like its tools; an answer that is not `ok`
   * (the caller can ask again and again without reaching the upstream) is audited counted, one row per person,
   * upstream, outcome and minute.
   */
  async callConnect(upstream: UpstreamConfig, caller: Caller, urlElicitation = false): Promise<CallToolResult> {
    const started = performance.now();
    const overRate = await this.overRate(upstream, caller);
    const bearer = overRate === null ? await this.bearerFor(upstream, caller) : null;
    const [answer, outcome]: [CallToolResult, string] =
      overRate !== null
        ? [asResult(overRate), 'rate_limited']
        : bearer === null
          ? [asResult(refusalText(upstream.name, 'unavailable', CAUSE_TEXT.unavailable)), 'unavailable']
          : 'token' in bearer
            ? [{ content: [{ type: 'text' as const, text: `Your account at ${upstream.name} is connected.` }] }, 'ok']
            : [asResult(this.connectText(upstream, bearer.connect)), 'not_connected'];
    if (outcome === 'ok')
      await this.audit({ upstream: upstream.name, name: CONNECT_TOOL }, null, caller, outcome, Math.round(performance.now() - started));
    else await this.counted.record({ actor: caller.uid, via: caller.via, upstream: upstream.name, peer: caller.peer, outcome });
    if (outcome === 'not_connected' && urlElicitation) throw this.elicitation(upstream);
    return answer;
  }

  /** What a caller is told of a request that needs their account at the upstream connected first. */
  private connectText(upstream: UpstreamConfig, connect: 'none' | 'reconnect'): string {
    const url = connectUrl(this.config, upstream);
    const what = connect === 'none' ? 'is not connected' : 'must be connected again';
    return `upstream "${upstream.name}" not_connected: your account at ${upstream.name} ${what}; connect it at ${url}`;
  }

  /**
   * Calls the tool for the caller. A call that needs the caller's account connected first is answered with the URL
   * elicitation error (-32042) when the client declared URL elicitation, else with an isError result naming the URL.
   * Every URI in its result is mapped to the one a caller reads back through svc (domain/resource-uris.ts).
   */
  async call(
    tool: ToolGate,
    args: Record<string, unknown> | undefined,
    caller: Caller,
    urlElicitation = false,
    relay: Relay = {},
  ): Promise<CallToolResult | InputAsked> {
    const upstream = this.upstreamOf(tool.upstream);
    const passed = await this.pass(
      {
        upstream,
        kind: 'tool',
        target: tool.name,
        // Hashed before the upstream sees the call, so its audit row can always be written.
        argumentsSha256: fingerprint(args ?? {}),
        send: (connection, identity) => connection.callTool(tool.name, args, identity, relay),
        failed: (answer) => (answer as CallToolResult).isError === true,
      },
      caller,
    );
    if ('refused' in passed) {
      if (passed.refused === 'not_connected' && urlElicitation) throw this.elicitation(upstream);
      return { content: [{ type: 'text', text: passed.text }], isError: true };
    }
    if (passed.answer.resultType === 'input_required') return InputAsked.from(passed.answer);
    const result = passed.answer as CallToolResult;
    return {
      content: mapContent(upstream.name, result.content) as CallToolResult['content'],
      ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }),
      ...(result.isError === undefined ? {} : { isError: result.isError }),
    };
  }

  /**
   * One request of a caller's passed to an upstream, with everything a tool call has: the upstream's `rate`, the
   * person's own token (auth = oauth), the identity assertion, the connection that is the caller's, the faults, the
   * metrics and the audit row. The answer, or why there is none in words the caller may read.
   */
  private pass(passage: Passage, caller: Caller): Promise<Passed> {
    if (!tracing()) return this.passOn(passage, caller);
    const { upstream, kind } = passage;
    const http = upstream.transport.kind === 'http' ? new URL(upstream.transport.url) : null;
    const target = mcpSpanTarget(METHOD[kind], passage.target);
    return inSpan(
      target.name,
      {
        kind: 'client',
        attributes: {
          ...target.attributes,
          'server.address': http?.hostname,
          'server.port': http === null ? undefined : Number(http.port || (http.protocol === 'https:' ? 443 : 80)),
          'network.transport': http === null ? 'pipe' : 'tcp',
          'svc.upstream.name': upstream.name,
        },
      },
      () => this.passOn(passage, caller),
    );
  }

  /** pass(), in the upstream call's span when there is one: its outcome named there, a failure marking it. */
  private async passOn(passage: Passage, caller: Caller): Promise<Passed> {
    const { upstream, kind } = passage;
    const started = performance.now();
    const passed = await this.callAudit.during(() => this.reach(passage, caller));
    const outcome =
      'answer' in passed
        ? passed.answer.resultType === 'input_required'
          ? 'input_required'
          : passage.failed?.(passed.answer)
            ? 'error'
            : 'ok'
        : passed.refused;
    const seconds = (performance.now() - started) / 1000;
    const span = currentSpan();
    span.set('svc.upstream.outcome', outcome);
    if (outcome !== 'ok' && outcome !== 'input_required') span.fail(outcome === 'error' ? 'tool_error' : outcome);
    this.metrics.upstreamCall(upstream.name, outcome, seconds, kind);
    if (outcome === 'ok' || outcome === 'unavailable') this.reached(upstream.name, outcome === 'ok');
    // Requests that never reached the upstream (refused over the rate, or told where to connect) are counted, one row
    // per person, upstream, outcome and minute: a caller cannot flood the trail with them.
    if (outcome === 'rate_limited' || outcome === 'not_connected')
      await this.counted.record({ actor: caller.uid, via: caller.via, upstream: upstream.name, peer: caller.peer, outcome });
    else
      await this.audit(
        { upstream: upstream.name, name: passage.target },
        passage.argumentsSha256 ?? null,
        caller,
        outcome,
        Math.round(seconds * 1000),
        AUDIT_ACTION[kind],
      );
    if ('answer' in passed && upstream.oauth !== null) this.accounts!.used(caller.userId, upstream);
    return passed;
  }

  /** The upstream's answer to the passage, or why there is none (its outcome, and what the caller is told). */
  private async reach(passage: Passage, caller: Caller): Promise<Passed> {
    const { upstream } = passage;
    const overRate = await this.overRate(upstream, caller);
    if (overRate !== null) return { refused: 'rate_limited', text: overRate };
    if (upstream.oauth !== null) {
      const bearer = await this.bearerFor(upstream, caller);
      if (bearer === null) return { refused: 'unavailable', text: refusalText(upstream.name, 'unavailable', CAUSE_TEXT.unavailable) };
      if ('connect' in bearer) return { refused: 'not_connected', text: this.connectText(upstream, bearer.connect) };
    }
    try {
      // Signed before a connection is taken: the call starts on it at once, so it counts as in use from the moment
      // it is handed out (a connection not in use may be closed to make room).
      const identity = upstream.identity === 'jwt' ? await this.sign(caller, upstream) : null;
      const connection = this.connections.forCall(upstream, caller.userId);
      if (connection === null) return { refused: 'busy', text: refusalText(upstream.name, 'busy', CAUSE_TEXT.busy) };
      return { answer: await passage.send(connection, identity) };
    } catch (e) {
      if (e instanceof NeedsConnection) return { refused: 'not_connected', text: this.connectText(upstream, e.connect) };
      if (e instanceof Cancelled)
        return { refused: 'cancelled', text: refusalText(upstream.name, 'cancelled', 'the request was cancelled') };
      const cause = causeOf(e);
      this.log.warn('upstream_call_failed', {
        upstream: upstream.name,
        kind: passage.kind,
        target: passage.target.slice(0, 200),
        cause,
        error: e instanceof Error ? e.message : String(e),
      });
      return {
        refused: cause,
        text: refusalText(upstream.name, cause, CAUSE_TEXT[cause]),
        ...(e instanceof ProtocolFault && e.code !== undefined ? { code: e.code } : {}),
      };
    }
  }

  private upstreamOf(name: string): UpstreamConfig {
    return this.config.upstreams.find((u) => u.name === name)!;
  }

  /**
   * The URL elicitation error that sends the person to connect their account at the upstream. Its message names the
   * URL too: clients that do not show the elicitation show the message.
   */
  private elicitation(upstream: UpstreamConfig): ConnectionNeeded {
    const url = connectUrl(this.config, upstream);
    return new ConnectionNeeded(url, `Connect your account at ${upstream.name} to use its tools: ${url}`);
  }

  /** Counts the request against the upstream's `rate` for this caller: what the caller is told when it is over, else null. */
  private async overRate(upstream: UpstreamConfig, caller: Caller): Promise<string | null> {
    const wait = upstream.rate === null ? null : await this.rate.take(`${upstream.name}\n${caller.userId}`, upstream.rate);
    return wait === null ? null : refusalText(upstream.name, 'rate_limited', `over its rate for you; try again in ${wait} s`);
  }

  /**
   * An identity assertion, its `jti` named on the span under way (the upstream call's); a failure to sign is svc's,
   * not the upstream's.
   */
  private async sign(caller: Caller, upstream: UpstreamConfig): Promise<string> {
    try {
      const { assertion, jti } = await this.signer!.sign(caller, upstream);
      currentSpan().set('svc.identity.jti', jti);
      return assertion;
    } catch (e) {
      throw new SvcFault(`signing the identity assertion failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /**
   * A call reached the upstream, or found it unreachable. A change is told to the metrics and makes svc list the
   * upstream's tools again, which records its state for svc upstream list.
   */
  private reached(upstream: string, up: boolean): void {
    this.metrics.upstreamUp(upstream, up);
    if (up === !this.unreachable.has(upstream)) return;
    if (up) this.unreachable.delete(upstream);
    else this.unreachable.add(upstream);
    // At most one listing every 10 s, however often callers make the upstream come and go.
    this.discovery.listChanged(upstream);
  }

  async stop(): Promise<void> {
    await this.counted.flush();
  }

  private async audit(
    tool: Pick<ToolGate, 'upstream' | 'name'>,
    argumentsSha256: string | null,
    caller: Caller,
    outcome: string,
    durationMs: number,
    action = AUDIT_ACTION.tool,
  ): Promise<void> {
    const credential = caller.tokenId === null ? caller.via : caller.tokenId;
    await this.callAudit.record({
      actor: caller.uid,
      via: caller.via,
      action,
      target: `${tool.upstream}/${tool.name}`,
      detail: {
        credential,
        ...(caller.grantId === null ? {} : { grant: caller.grantId }),
        ...(caller.clientId === null ? {} : { client: caller.clientId }),
        outcome,
        duration_ms: durationMs,
        ...(argumentsSha256 === null ? {} : { arguments_sha256: argumentsSha256 }),
      },
      peer: caller.peer,
    });
  }
}

/** The upstreams' connections and discovery, started, and the gateway /mcp offers them through. */
export async function startGateway(
  config: Config,
  database: Database,
  log: Logger,
  metrics: Metrics,
): Promise<{ gateway: UpstreamGateway; stop(): Promise<void> }> {
  keepFromChildren(config.server.database);
  let signer: IdentitySigner | null = null;
  if (config.upstreams.some((u) => u.identity === 'jwt')) {
    // Checked when the configuration was read: identity = jwt needs the session secret.
    const secret = config.auth.session!.secret;
    await ensureSigningKey(database, secret);
    signer = new IdentitySigner(config, database, secret);
  }
  // auth = oauth: each person's own account; a connection made or ended has the upstream's tools listed again. An
  // upstream that says its tools changed, on any connection, has them listed again.
  let discovery: Discovery | null = null;
  const accounts = config.upstreams.some((u) => u.oauth !== null)
    ? new UpstreamAccounts(config, database, log, (name) => discovery?.accountsChanged(name) ?? Promise.resolve())
    : null;
  const connections = new UpstreamConnections(config, log, accounts, (name) => discovery?.listChanged(name));
  discovery = startDiscovery(config, database, log, metrics, accounts, connections);
  // Tokens of deleted connections still to be revoked (the command line's too): now, and every 10 s.
  accounts?.start();
  const gateway = new UpstreamGateway(config, database, discovery, connections, log, metrics, signer, accounts);
  return {
    gateway,
    async stop() {
      await gateway.stop();
      await discovery.stop();
      await connections.stop();
      await accounts?.stop();
    },
  };
}
