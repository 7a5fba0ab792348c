// Discovery: what each upstream offers, recorded as reviewed rows: its tools, and (on its shared connection, when
// `expose` lets them through) its prompts and its apps (apps.ts: each read and pinned by its bytes). At start, when an
// upstream says its list changed, every `refresh`, and after a failure. A change of state is audited (actor: the
// upstream): `tool.pending`, `prompt.changed`, `app.approved`…
import { untraced } from '../trace/spans.ts';
import type { Prompt, Tool } from '@modelcontextprotocol/client';
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics/events.ts';
import { listingVotes, recordListing, type UpstreamAccount } from '../store/upstream-accounts.ts';
import {
  recordUpstreamStatus,
  toolFingerprints,
  type DiscoveryChange,
  type Found,
  type FoundApp,
  type FoundPrompt,
  type FoundTool,
  type PromptDefinition,
  type ReviewedDefinition,
  type ToolDefinition,
} from '../store/upstream-tools.ts';
import type { UpstreamConnection } from './connection.ts';
import type { UpstreamConnections } from './connections.ts';
import { NeedsConnection, type UpstreamAccounts } from './accounts.ts';
import { listingOf, mergeListings, whomToList } from './listings.ts';
import { discoverApps } from './apps.ts';
import { approvesAsFound, foundObject, recordFound, uiOf } from './found.ts';

/**
 * A tool's definition as svc keeps and fingerprints it: title, description, schemas and annotations, and of its
 * `_meta` only `ui` (the app it names, apps.ts), when it has one: a tool without it has the fingerprint it had
 * before svc kept it.
 */
export function definitionOf(tool: Tool): ToolDefinition {
  const ui = uiOf(tool._meta);
  return {
    ...(tool.title === undefined ? {} : { title: tool.title }),
    ...(tool.description === undefined ? {} : { description: tool.description }),
    inputSchema: tool.inputSchema,
    ...(tool.outputSchema === undefined ? {} : { outputSchema: tool.outputSchema }),
    ...(tool.annotations === undefined ? {} : { annotations: tool.annotations }),
    ...(ui === undefined ? {} : { _meta: { ui } }),
  };
}

/** A prompt's definition as svc keeps and fingerprints it: title, description and arguments. */
export function promptDefinitionOf(prompt: Prompt): PromptDefinition {
  return {
    ...(prompt.title === undefined ? {} : { title: prompt.title }),
    ...(prompt.description === undefined ? {} : { description: prompt.description }),
    ...(prompt.arguments === undefined ? {} : { arguments: prompt.arguments }),
  };
}

/** At most this many tools of one upstream are kept, and none whose name is longer than NAME_MAX. */
export const TOOLS_PER_UPSTREAM = 1000;
/** The same for prompts. */
export const PROMPTS_PER_UPSTREAM = 1000;
const NAME_MAX = 128;
/** What is kept of a held tool's definition too large or too deep to keep: it is shown as this, with the reason. */
const NOT_KEPT: ToolDefinition = { inputSchema: { type: 'object' } };

export const foundTool = (listed: Tool): FoundTool => foundObject(listed, definitionOf(listed), NOT_KEPT);
export const foundPrompt = (listed: Prompt): FoundPrompt => foundObject(listed, promptDefinitionOf(listed), {});

/**
 * What one listing holds, as recorded: each name once (a name listed twice is held, as its first definition, and the
 * rest of the listing recorded), at most `max`, none with a name over NAME_MAX, only those `only` names (if given);
 * with how many were left out.
 */
function foundOf<L extends { readonly name: string }, D extends ReviewedDefinition>(
  offered: readonly L[],
  make: (listed: L) => Found<D>,
  max: number,
  only: readonly string[] | null,
): { found: Found<D>[]; refused: number } {
  const found = new Map<string, Found<D>>();
  const twice = new Set<string>();
  let refused = 0;
  for (const t of offered) {
    if (only !== null && !only.includes(t.name)) continue;
    if (found.has(t.name)) {
      twice.add(t.name);
      continue;
    }
    // An upstream cannot fill svc's database or its admin page: long names, and objects past the cap, are left out.
    if (t.name.length > NAME_MAX || found.size >= max) {
      refused++;
      continue;
    }
    found.set(t.name, make(t));
  }
  for (const name of twice) {
    const first = found.get(name)!;
    found.set(name, { ...first, held: [...(first.held ?? []), 'the upstream lists this name more than once'] });
  }
  return { found: [...found.values()], refused };
}

/** One tool listing as recorded (foundOf), of the tools the upstream's `tools` names, if it names any. */
export const foundTools = (upstream: UpstreamConfig, offered: readonly Tool[]): { found: FoundTool[]; refused: number } =>
  foundOf(offered, foundTool, TOOLS_PER_UPSTREAM, upstream.tools);
/** One prompt listing as recorded (foundOf): `tools` names tools only. */
export const foundPrompts = (offered: readonly Prompt[]): { found: FoundPrompt[]; refused: number } =>
  foundOf(offered, foundPrompt, PROMPTS_PER_UPSTREAM, null);

/** What was left out of a listing, logged: past the cap svc stops reading, so `more_not_read` says the count is a lower bound. */
function logLeftOut(log: Logger, upstream: string, kind: 'tools' | 'prompts', leftOut: number, read: number, max: number): void {
  if (leftOut > 0) log.warn(`upstream_${kind}_left_out`, { upstream, left_out: leftOut, more_not_read: read > max, [`max_${kind}`]: max });
}

/** What one connection lists of the upstream's tools, as recorded (foundTools); what was left out is logged. */
async function listFound(connection: UpstreamConnection, log: Logger): Promise<FoundTool[]> {
  const offered = await connection.listTools(TOOLS_PER_UPSTREAM);
  const { found, refused } = foundTools(connection.upstream, offered);
  logLeftOut(log, connection.upstream.name, 'tools', refused, offered.length, TOOLS_PER_UPSTREAM);
  return found;
}

/** What the upstream's shared connection lists of its prompts (none when it declared no prompts), as recorded. */
async function listFoundPrompts(connection: UpstreamConnection, log: Logger): Promise<FoundPrompt[]> {
  const offered = await connection.listPrompts(PROMPTS_PER_UPSTREAM);
  const { found, refused } = foundPrompts(offered);
  logLeftOut(log, connection.upstream.name, 'prompts', refused, offered.length, PROMPTS_PER_UPSTREAM);
  return found;
}

/**
 * Lists one upstream's tools and, when `expose` lets them through, its prompts and its apps (`resources`: each app
 * read, apps.ts), on one connection, and records them; the changes of state. A kind `expose` leaves out is not
 * listed, and its rows stay as they are. A prompt or app listing that fails is logged and its rows stay as they are:
 * what was listed is recorded and the upstream is up.
 */
export async function discover(database: Database, connection: UpstreamConnection, log: Logger): Promise<DiscoveryChange[]> {
  const upstream = connection.upstream;
  const tools = upstream.expose.tools ? await listFound(connection, log) : null;
  let prompts: FoundPrompt[] | null = null;
  if (upstream.expose.prompts) {
    try {
      prompts = await listFoundPrompts(connection, log);
    } catch (e) {
      // With no tools listed, the prompts' failure is the upstream's.
      if (tools === null) throw e;
      log.warn('upstream_prompts_failed', { upstream: upstream.name, error: reason(e) });
    }
  }
  let apps: { found: FoundApp[]; keep: Set<string> } | null = null;
  if (upstream.expose.resources) {
    try {
      apps = await discoverApps(connection, log);
    } catch (e) {
      // With nothing else listed, the apps' failure is the upstream's.
      if (tools === null && prompts === null) throw e;
      log.warn('upstream_apps_failed', { upstream: upstream.name, error: reason(e) });
    }
  }
  // Nothing listed: the upstream answers, or is down.
  if (tools === null && !upstream.expose.prompts && !upstream.expose.resources) await connection.capabilities();
  return database.write(async (tx) => {
    const now = database.now();
    // Decided once for every kind of this run, before any is recorded (and marks the server listed, below).
    const auto = await approvesAsFound(tx, upstream);
    const changes = tools === null ? [] : await recordFound(tx, upstream, 'tool', tools, new Set(), now, auto);
    if (prompts !== null) changes.push(...(await recordFound(tx, upstream, 'prompt', prompts, new Set(), now, auto)));
    if (apps !== null) changes.push(...(await recordFound(tx, upstream, 'app', apps.found, apps.keep, now, auto)));
    await recordUpstreamStatus(tx, upstream.name, true, now, upstream.server);
    return changes;
  });
}

/** People listed with their own connections in one discovery of an `auth = oauth` upstream; the rest keep their last listing. */
export const LISTINGS_PER_RUN = 20;
/** Of those, listed at the same time. */
const LISTINGS_AT_ONCE = 4;

/** Whether a listing failed because the person's connection is gone or must be made again (not the upstream's fault). */
function needsConnection(e: unknown): boolean {
  for (let depth = 0; depth < 5 && e instanceof Error; depth++, e = e.cause) if (e instanceof NeedsConnection) return true;
  return false;
}

/**
 * Discovery of an `auth = oauth` upstream (listings.ts): lists with the connections whomToList picks, each with its
 * person's token on a connection of its own closed after it, stores each person's listing, and records the merge of
 * every connected person's stored listing. Nothing while no one is connected; a failure when every listing tried
 * failed (the upstream is down). `more`: people never listed are waiting for another run. Tools only: an `auth = oauth`
 * upstream's prompts are not listed yet (each person's listing would be merged as its tools are).
 */
async function discoverPerPerson(
  database: Database,
  upstream: UpstreamConfig,
  accounts: UpstreamAccounts,
  connections: UpstreamConnections,
  log: Logger,
): Promise<{ changes: DiscoveryChange[]; more: boolean }> {
  const live = await accounts.liveAccounts(upstream);
  if (live.length === 0) return { changes: [], more: false };
  const { pick, more } = whomToList(live, LISTINGS_PER_RUN);
  const listed = new Map<UpstreamAccount, FoundTool[] | Error>();
  for (let i = 0; i < pick.length; i += LISTINGS_AT_ONCE) {
    await Promise.all(
      pick.slice(i, i + LISTINGS_AT_ONCE).map(async (account) => {
        const connection = connections.listing(upstream, account.userId);
        try {
          listed.set(account, await listFound(connection, log));
        } catch (e) {
          listed.set(account, e instanceof Error ? e : new Error(String(e)));
        } finally {
          await connection.close();
        }
      }),
    );
  }
  const failed = [...listed.values()].filter((r): r is Error => r instanceof Error && !needsConnection(r));
  if (failed.length > 0 && failed.length === pick.length) throw failed[0];
  // Some failed, others did not: those people keep their earlier listings, and the upstream is up.
  if (failed.length > 0)
    log.warn('upstream_listings_failed', { upstream: upstream.name, failed: failed.length, tried: pick.length, error: reason(failed[0]) });
  const changes = await database.write(async (tx) => {
    const now = database.now();
    const fresh: FoundTool[][] = [];
    for (const [account, result] of listed) {
      const found = result instanceof Error ? undefined : result;
      if ((await recordListing(tx, account, found && listingOf(found), now)) && found) fresh.push(found);
    }
    const people = live.map((a) => a.userId);
    // What the upstream's `tools` leaves out counts for nothing (it may have changed since a listing was stored).
    const votes = (await listingVotes(tx, upstream.name, upstream.server, people)).filter(
      (v) => upstream.tools === null || upstream.tools.includes(v.name),
    );
    // No connected person's listing is known yet: nothing to record (as before anyone connected).
    if (votes.length === 0 && fresh.length === 0) return [];
    const merged = mergeListings(votes, fresh, await toolFingerprints(tx, upstream.name), TOOLS_PER_UPSTREAM);
    if (merged.refused > 0)
      log.warn('upstream_tools_left_out', { upstream: upstream.name, left_out: merged.refused, max_tools: TOOLS_PER_UPSTREAM });
    const changes = await recordFound(tx, upstream, 'tool', merged.found, merged.keep, now, await approvesAsFound(tx, upstream));
    await recordUpstreamStatus(tx, upstream.name, true, now, upstream.server);
    return changes;
  });
  return { changes, more };
}

const RETRY_FIRST_MS = 1000;
const LIST_CHANGED_MS = 10_000;

/** Why a listing failed, for the log: the error's own words, short (the log may name the upstream and the database). */
/** What failed, for the log: the innermost cause (a database error wrapped by drizzle's "Failed query: …" says why). */
function reason(e: unknown): string {
  let inner = e;
  for (let depth = 0; depth < 5 && inner instanceof Error && inner.cause instanceof Error; depth++) inner = inner.cause;
  return (inner instanceof Error ? inner.message : String(inner)).slice(0, 300);
}

/** The upstreams' tools, listed at start, every `refresh`, after a failure and when an upstream says they changed. */
export interface Discovery {
  /** lists an upstream's tools again now (what a failure or list_changed asks for) */
  rediscover(name: string): Promise<void>;
  /** an upstream said its tools changed: listed again, at most once every LIST_CHANGED_MS */
  listChanged(name: string): void;
  /**
   * a person connected to (or disconnected from) an `auth = oauth` upstream: listed again now, or after the listing
   * under way; resolves when that listing is done
   */
  accountsChanged(name: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Lists one upstream's tools: on its shared connection, or for an `auth = oauth` upstream with the connections of the
 * people connected to it (until someone connects, nothing). `more`: another run is due soon.
 */
async function listOnceWith(
  database: Database,
  upstream: UpstreamConfig,
  connections: UpstreamConnections,
  accounts: UpstreamAccounts | null,
  log: Logger,
): Promise<{ changes: DiscoveryChange[]; more: boolean }> {
  if (upstream.oauth === null) return { changes: await discover(database, connections.shared(upstream.name), log), more: false };
  if (accounts === null) return { changes: [], more: false };
  return discoverPerPerson(database, upstream, accounts, connections, log);
}

/** `run(name)` at most once every LIST_CHANGED_MS per name, however often asked: asks in between make one run. */
function throttled(run: (name: string) => unknown, timers: NodeJS.Timeout[], stopped: () => boolean): (name: string) => void {
  const lastAsked = new Map<string, number>();
  const scheduled = new Set<string>();
  return (name) => {
    if (scheduled.has(name) || stopped()) return;
    scheduled.add(name);
    const wait = Math.max(0, (lastAsked.get(name) ?? 0) + LIST_CHANGED_MS - Date.now());
    timers.push(
      setTimeout(() => {
        scheduled.delete(name);
        lastAsked.set(name, Date.now());
        // Asked for by a call that found the upstream come or go, and done for every caller: in no call's trace.
        void untraced(() => run(name));
      }, wait).unref(),
    );
  };
}

export function startDiscovery(
  config: Config,
  database: Database,
  log: Logger,
  metrics: Metrics,
  /** the people's accounts at `auth = oauth` upstreams; null when there is none */
  accounts: UpstreamAccounts | null,
  connections: UpstreamConnections,
): Discovery {
  const timers: NodeJS.Timeout[] = [];
  const running = new Map<string, Promise<void>>();
  const retryMs = new Map<string, number>();
  /** upstreams to list again once the listing under way is done */
  const again = new Set<string>();
  let stopped = false;
  const listOnce = (upstream: UpstreamConfig) => listOnceWith(database, upstream, connections, accounts, log);
  const rediscover = (name: string): Promise<void> => {
    const upstream = config.upstreams.find((u) => u.name === name);
    if (!upstream || stopped) return Promise.resolve();
    const already = running.get(name);
    if (already) return already;
    const run = listOnce(upstream)
      .then(({ changes, more }) => {
        retryMs.delete(name);
        metrics.upstreamUp(name, true);
        // A tool's change as NAME:STATE, a prompt's as prompt:NAME:STATE.
        const said = changes.map((c) => `${c.kind === 'tool' ? '' : `${c.kind}:`}${c.name}:${c.to}`);
        if (changes.length > 0) log.info('upstream_tools', { upstream: name, changes: said.join(' ') });
        // People never listed wait for a run of their own: soon, not at the next `refresh`.
        if (more && !stopped) timers.push(setTimeout(() => void rediscover(name), RETRY_FIRST_MS).unref());
      })
      .catch(async (e: unknown) => {
        metrics.upstreamUp(name, false);
        await database.write((tx) => recordUpstreamStatus(tx, name, false, database.now())).catch(() => undefined);
        // Listed again soon, then less and less often, up to every `refresh`.
        const wait = Math.min((retryMs.get(name) ?? RETRY_FIRST_MS / 2) * 2, upstream.refreshMs);
        retryMs.set(name, wait);
        if (!stopped) timers.push(setTimeout(() => void rediscover(name), wait).unref());
        log.warn('upstream_discovery_failed', { upstream: name, error: reason(e), retry_in_ms: wait });
      })
      .finally(() => {
        running.delete(name);
        if (again.delete(name)) void rediscover(name);
      });
    running.set(name, run);
    return run;
  };
  // list_changed lists again, at most once every LIST_CHANGED_MS per upstream: a flood of notifications is one listing.
  const soon = throttled(rediscover, timers, () => stopped);
  for (const upstream of config.upstreams) {
    void rediscover(upstream.name);
    const timer = setInterval(() => void rediscover(upstream.name), upstream.refreshMs);
    timer.unref();
    timers.push(timer);
  }
  return {
    rediscover,
    listChanged: soon,
    accountsChanged(name) {
      const under = running.get(name);
      if (!under) return rediscover(name);
      again.add(name);
      // The listing under way ends by starting the next one (above): this waits for that one too.
      return under.then(() => running.get(name));
    },
    async stop() {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      await Promise.allSettled([...running.values()]);
    },
  };
}
