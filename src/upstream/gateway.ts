// What /mcp offers of the upstreams (CONTRACT §6.1): each tool a caller may use, as NAME__TOOL with its approved
// definition, and a call passed through to the upstream with its result back unchanged. Faults stay on the call: an
// upstream that is down, too slow, breaks the protocol, answers too much or is over the caller's rate gives that call
// an `isError` result naming the upstream and the cause, never the upstream's own detail. Every call is audited with
// the SHA-256 of its arguments, never the arguments.
import type { CallToolResult, Tool } from '@modelcontextprotocol/client';
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import { fingerprint } from '../domain/canonical-json.ts';
import { mergedName, offerable, SEPARATOR, splitMerged } from '../domain/merged-names.ts';
import type { Access } from '../domain/visibility.ts';
import type { Caller } from '../domain/caller.ts';
import { ConnectionNeeded } from '../domain/errors.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics/events.ts';
import { findTool, listApproved, type ToolGate } from '../store/upstream-tools.ts';
import { accountFor, listAccounts, type Listing } from '../store/upstream-accounts.ts';
import { mayConnect, usable } from './access.ts';
import { CallAudit, countedCalls } from './call-audit.ts';
import { UpstreamConnections } from './connections.ts';
import { rateCounter, type RateCounter } from './rate.ts';
import { NeedsConnection, UpstreamAccounts, type Bearer } from './accounts.ts';
import { ensureSigningKey, IdentitySigner } from './identity.ts';
import { startDiscovery, type Discovery } from './discovery.ts';
import { listedFingerprint } from './listings.ts';
import { ProtocolFault, SvcFault, UpstreamTimeout } from './connection.ts';
import { keepFromChildren } from './stdio-sandbox.ts';
import { OfferedDefinitions, type OfferedTool } from './offered.ts';
import { ANSWER_MAX, AnswerTooLarge } from './http-fetch.ts';

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

type Cause = 'unavailable' | 'timeout' | 'protocol' | 'too_large' | 'rate_limited' | 'svc_error' | 'busy';

function refusal(upstream: string, cause: Cause, detail: string): CallToolResult {
  return { content: [{ type: 'text', text: `upstream "${upstream}" ${cause}: ${detail}` }], isError: true };
}

function causeOf(e: unknown): Exclude<Cause, 'rate_limited' | 'busy'> {
  if (e instanceof AnswerTooLarge) return 'too_large';
  if (e instanceof ProtocolFault) return 'protocol';
  if (e instanceof SvcFault) return 'svc_error';
  if (e instanceof UpstreamTimeout) return 'timeout';
  return 'unavailable';
}

const CAUSE_TEXT: Record<Exclude<Cause, 'rate_limited'>, string> = {
  unavailable: 'cannot be reached just now; try again later',
  svc_error: 'svc could not send this call; its log has details',
  busy: 'every session svc may hold there is in use; try again shortly',
  timeout: 'did not answer in time',
  protocol: 'answered with an error or an answer svc cannot read',
  too_large: `answered more than ${ANSWER_MAX / 1024 / 1024} MiB`,
};

export class UpstreamGateway {
  /** counts calls per upstream and person for `rate` */
  private readonly rate: RateCounter = rateCounter();
  private readonly callAudit: CallAudit;
  /** the approved definitions offered, parsed once per approval */
  private readonly offered: OfferedDefinitions;
  /** upstreams the last call found unreachable */
  private readonly unreachable = new Set<string>();
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
    this.counted = countedCalls(database);
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
    const candidates: OfferedTool[] = [...definitions.values()];
    for (const u of this.config.upstreams)
      if (u.oauth !== null && !connected.has(u.name) && mayConnect(u, access)) {
        const tool = connectTool(u);
        if (after === null || tool.name > after) candidates.push({ tool, bytes: Buffer.byteLength(JSON.stringify(tool)) });
      }
    candidates.sort((a, b) => (a.tool.name < b.tool.name ? -1 : 1));
    const tools: Tool[] = [];
    let used = 0;
    for (const c of candidates) {
      // Every definition offered is at most 16 KiB, so a page always holds one.
      if (used + c.bytes + 1 > budget && tools.length > 0) return { tools, last: tools[tools.length - 1]!.name };
      used += c.bytes + 1;
      tools.push(c.tool);
    }
    return { tools, last: null };
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
    const [answer, outcome] =
      overRate !== null
        ? [overRate, 'rate_limited']
        : bearer === null
          ? [refusal(upstream.name, 'unavailable', CAUSE_TEXT.unavailable), 'unavailable']
          : 'token' in bearer
            ? [{ content: [{ type: 'text' as const, text: `Your account at ${upstream.name} is connected.` }] }, 'ok']
            : [this.needsConnection(upstream, bearer.connect), 'not_connected'];
    if (outcome === 'ok')
      await this.audit({ upstream: upstream.name, name: CONNECT_TOOL }, null, caller, outcome, Math.round(performance.now() - started));
    else await this.counted.record({ actor: caller.uid, via: caller.via, upstream: upstream.name, peer: caller.peer, outcome });
    if (outcome === 'not_connected' && urlElicitation) throw this.elicitation(upstream);
    return answer;
  }

  /** The answer to a call that needs the caller's account at the upstream connected first. */
  private needsConnection(upstream: UpstreamConfig, connect: 'none' | 'reconnect'): CallToolResult {
    const url = connectUrl(this.config, upstream);
    const what = connect === 'none' ? 'is not connected' : 'must be connected again';
    return {
      content: [
        { type: 'text', text: `upstream "${upstream.name}" not_connected: your account at ${upstream.name} ${what}; connect it at ${url}` },
      ],
      isError: true,
    };
  }

  /**
   * Calls the tool for the caller. A call that needs the caller's account connected first is answered with the URL
   * elicitation error (-32042) when the client declared URL elicitation, else with an isError result naming the URL.
   */
  async call(tool: ToolGate, args: Record<string, unknown> | undefined, caller: Caller, urlElicitation = false): Promise<CallToolResult> {
    // Hashed before the upstream sees the call, so its audit row can always be written.
    const argumentsSha256 = fingerprint(args ?? {});
    const started = performance.now();
    const { answer, outcome } = await this.callAudit.during(() => this.answer(tool, args, caller));
    const seconds = (performance.now() - started) / 1000;
    this.metrics.upstreamCall(tool.upstream, outcome, seconds);
    if (outcome === 'ok' || outcome === 'unavailable') this.reached(tool.upstream, outcome === 'ok');
    // Calls that never reached the upstream (refused over the rate, or told where to connect) are counted, one row per
    // person, upstream, outcome and minute: a caller cannot flood the trail with them.
    if (outcome === 'rate_limited' || outcome === 'not_connected')
      await this.counted.record({ actor: caller.uid, via: caller.via, upstream: tool.upstream, peer: caller.peer, outcome });
    else await this.audit(tool, argumentsSha256, caller, outcome, Math.round(seconds * 1000));
    if (outcome === 'not_connected' && urlElicitation) throw this.elicitation(this.oauthOf(tool.upstream)!);
    return answer;
  }

  /**
   * The URL elicitation error that sends the person to connect their account at the upstream. Its message names the
   * URL too: clients that do not show the elicitation show the message.
   */
  private elicitation(upstream: UpstreamConfig): ConnectionNeeded {
    const url = connectUrl(this.config, upstream);
    return new ConnectionNeeded(url, `Connect your account at ${upstream.name} to use its tools: ${url}`);
  }

  /**
   * The call's answer, and its outcome for the audit row and the metrics: ok, error (the upstream's own isError) or
   * a cause. An answer is at most ANSWER_MAX bytes as it arrives: the transports cut off a larger one (too_large).
   */
  /** Counts the call against the upstream's `rate` for this caller: the refusal when it is over, else null. */
  private async overRate(upstream: UpstreamConfig, caller: Caller): Promise<CallToolResult | null> {
    const wait = upstream.rate === null ? null : await this.rate.take(`${upstream.name}\n${caller.userId}`, upstream.rate);
    return wait === null ? null : refusal(upstream.name, 'rate_limited', `over its rate for you; try again in ${wait} s`);
  }

  /** An identity assertion; a failure to sign is svc's, not the upstream's. */
  private async sign(caller: Caller, upstream: UpstreamConfig): Promise<string> {
    try {
      return await this.signer!.sign(caller, upstream);
    } catch (e) {
      throw new SvcFault(`signing the identity assertion failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private async answer(
    tool: ToolGate,
    args: Record<string, unknown> | undefined,
    caller: Caller,
  ): Promise<{ answer: CallToolResult; outcome: 'ok' | 'error' | 'not_connected' | Cause }> {
    const upstream = this.config.upstreams.find((u) => u.name === tool.upstream)!;
    const overRate = await this.overRate(upstream, caller);
    if (overRate !== null) return { answer: overRate, outcome: 'rate_limited' };
    if (upstream.oauth !== null) {
      const bearer = await this.bearerFor(upstream, caller);
      if (bearer === null) return { answer: refusal(upstream.name, 'unavailable', CAUSE_TEXT.unavailable), outcome: 'unavailable' };
      if ('connect' in bearer) return { answer: this.needsConnection(upstream, bearer.connect), outcome: 'not_connected' };
    }
    let result: CallToolResult;
    try {
      // Signed before a connection is taken: the call starts on it at once, so it counts as in use from the moment
      // it is handed out (a connection not in use may be closed to make room).
      const identity = upstream.identity === 'jwt' ? await this.sign(caller, upstream) : null;
      const connection = this.connections.forCall(upstream, caller.userId);
      if (connection === null) return { answer: refusal(upstream.name, 'busy', CAUSE_TEXT.busy), outcome: 'busy' };
      result = (await connection.callTool(tool.name, args, identity)) as CallToolResult;
    } catch (e) {
      if (e instanceof NeedsConnection) return { answer: this.needsConnection(upstream, e.connect), outcome: 'not_connected' };
      const cause = causeOf(e);
      this.log.warn('upstream_call_failed', {
        upstream: upstream.name,
        tool: tool.name,
        cause,
        error: e instanceof Error ? e.message : String(e),
      });
      return { answer: refusal(upstream.name, cause, CAUSE_TEXT[cause]), outcome: cause };
    }
    const answer: CallToolResult = {
      content: result.content,
      ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }),
      ...(result.isError === undefined ? {} : { isError: result.isError }),
    };
    if (upstream.oauth !== null) this.accounts!.used(caller.userId, upstream);
    return { answer, outcome: result.isError ? 'error' : 'ok' };
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
  ): Promise<void> {
    const credential = caller.tokenId === null ? caller.via : caller.tokenId;
    await this.callAudit.record({
      actor: caller.uid,
      via: caller.via,
      action: 'upstream.call',
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
