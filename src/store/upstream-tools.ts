// Upstream tools as objects in the database (CONTRACT §6.1): what discovery found, what an admin approved, the
// tool's own labels and its state. Every instance reads the same rows.
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { upstreamStatus, upstreamTools } from '../db/schema.ts';
import { formatLabels, storedLabels, type LabelSet } from '../domain/labels.ts';
import { notFound } from '../domain/errors.ts';
import { pageOf, window, type Page, type PageRequest } from './paging.ts';

export type ToolState = 'pending' | 'approved' | 'changed' | 'disabled' | 'gone';

/** What agents are told about a tool: everything of it but its name. */
export interface ToolDefinition {
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: Record<string, unknown>;
  readonly outputSchema?: Record<string, unknown>;
  readonly annotations?: Record<string, unknown>;
}

export interface FoundTool {
  readonly name: string;
  readonly definition: ToolDefinition;
  readonly fingerprint: string;
  /** why this definition is never offered and cannot be approved as it is; null: nothing holds it */
  readonly held: readonly string[] | null;
}

export interface UpstreamTool extends FoundTool {
  readonly upstream: string;
  readonly approvedDefinition: ToolDefinition | null;
  readonly approvedFingerprint: string | null;
  /** the tool's own labels; null: its upstream's */
  readonly labels: LabelSet | null;
  readonly state: ToolState;
  /** which server recorded it (UpstreamConfig.server); null: recorded before svc kept it */
  readonly server: string | null;
  readonly firstSeenAt: number;
  readonly updatedAt: number;
}

/**
 * What deciding a call needs of a tool: its state, labels and server, and whether a definition was approved; not the
 * definitions themselves, which a call never sends (a large schema would be read and parsed on every call).
 */
export type ToolGate = Pick<UpstreamTool, 'upstream' | 'name' | 'labels' | 'state' | 'server' | 'approvedFingerprint' | 'held'>;

type Row = typeof upstreamTools.$inferSelect;

function toTool(r: Row): UpstreamTool {
  return {
    ...toGate(r),
    definition: JSON.parse(r.definition) as ToolDefinition,
    fingerprint: r.fingerprint,
    approvedDefinition: r.approvedDefinition === null ? null : (JSON.parse(r.approvedDefinition) as ToolDefinition),
    firstSeenAt: r.firstSeenAt,
    updatedAt: r.updatedAt,
  };
}

/** One page of every upstream's tools, by upstream and name (the admin's page and API: no answer grows with an upstream). */
export async function listToolsPage(db: Db, request: PageRequest, only: { upstream?: string } = {}): Promise<Page<UpstreamTool>> {
  const rows = await db
    .select()
    .from(upstreamTools)
    .where(only.upstream === undefined ? undefined : eq(upstreamTools.upstream, only.upstream))
    .orderBy(asc(upstreamTools.upstream), asc(upstreamTools.name))
    .limit(window(request).limit)
    .offset(window(request).offset)
    .all();
  return pageOf(rows.map(toTool), request);
}

/** A tool's gate as the call path and the listing read it: no definition. */
const gateColumns = {
  upstream: upstreamTools.upstream,
  name: upstreamTools.name,
  labels: upstreamTools.labels,
  state: upstreamTools.state,
  server: upstreamTools.server,
  approvedFingerprint: upstreamTools.approvedFingerprint,
  held: upstreamTools.held,
};

function toGate(row: Pick<Row, keyof typeof gateColumns>): ToolGate {
  return {
    upstream: row.upstream,
    name: row.name,
    labels: row.labels === null ? null : storedLabels(row.labels),
    state: row.state as ToolState,
    server: row.server,
    approvedFingerprint: row.approvedFingerprint,
    held: row.held === null ? null : (JSON.parse(row.held) as string[]),
  };
}

function prepareFind(db: Db) {
  return db
    .select(gateColumns)
    .from(upstreamTools)
    .where(and(eq(upstreamTools.upstream, sql.placeholder('upstream')), eq(upstreamTools.name, sql.placeholder('name'))))
    .prepare();
}
const finds = new WeakMap<Db, ReturnType<typeof prepareFind>>();

/** What the call path needs of one tool: the statement is prepared once per database (not for a transaction). */
export async function findTool(db: Db, upstream: string, name: string): Promise<ToolGate | null> {
  let find = finds.get(db);
  if (!find) {
    find = prepareFind(db);
    finds.set(db, find);
  }
  const row = await find.get({ upstream, name });
  return row ? toGate(row) : null;
}

/**
 * The approved tools, as a caller's tools/list decides on them: no definition is read here (the listing reads the
 * approved definitions of the tools it offers, once per approval: approvedDefinitions).
 */
export async function listApproved(db: Db): Promise<ToolGate[]> {
  const rows = await db
    .select(gateColumns)
    .from(upstreamTools)
    .where(eq(upstreamTools.state, 'approved'))
    .orderBy(asc(upstreamTools.upstream), asc(upstreamTools.name))
    .all();
  return rows.map(toGate);
}

/** The approved definitions (as stored, unparsed) of some tools of one upstream, with the fingerprint each is pinned by. */
export async function approvedDefinitions(
  db: Db,
  upstream: string,
  names: readonly string[],
): Promise<{ name: string; approvedFingerprint: string | null; approvedDefinition: string | null }[]> {
  if (names.length === 0) return [];
  return db
    .select({
      name: upstreamTools.name,
      approvedFingerprint: upstreamTools.approvedFingerprint,
      approvedDefinition: upstreamTools.approvedDefinition,
    })
    .from(upstreamTools)
    .where(and(eq(upstreamTools.upstream, upstream), inArray(upstreamTools.name, [...names])))
    .all();
}

/** The fingerprints of one upstream's tools, as recorded and as approved: what merging people's listings weighs. */
export async function toolFingerprints(
  db: Db,
  upstream: string,
): Promise<Map<string, { fingerprint: string; approvedFingerprint: string | null }>> {
  const rows = await db
    .select({ name: upstreamTools.name, fingerprint: upstreamTools.fingerprint, approvedFingerprint: upstreamTools.approvedFingerprint })
    .from(upstreamTools)
    .where(eq(upstreamTools.upstream, upstream))
    .all();
  return new Map(rows.map((r) => [r.name, { fingerprint: r.fingerprint, approvedFingerprint: r.approvedFingerprint }]));
}

/** One tool's row, read inside a transaction or by a page; a missing tool is 404. */
export async function getTool(db: Db, upstream: string, name: string): Promise<UpstreamTool> {
  const row = await db
    .select()
    .from(upstreamTools)
    .where(and(eq(upstreamTools.upstream, upstream), eq(upstreamTools.name, name)))
    .get();
  const tool = row ? toTool(row) : null;
  if (!tool) throw notFound(`no tool "${name}" of upstream "${upstream}"`);
  return tool;
}

/**
 * A tool's state after discovery found it again as `found`; `approved` is what was approved of it, if any. `auto`:
 * a tool never approved is approved as found (review = auto, in the server's first listing), unless it is held.
 */
function stateFound(tool: Pick<ToolGate, 'state'>, approved: string | null, found: FoundTool, auto: boolean): ToolState {
  if (tool.state === 'disabled') return 'disabled';
  if (approved === null) return auto && found.held === null ? 'approved' : 'pending';
  return found.fingerprint === approved ? 'approved' : 'changed';
}

export interface DiscoveryChange {
  readonly name: string;
  readonly from: ToolState | null;
  readonly to: ToolState;
}

/**
 * Records what discovery found on one upstream: new tools pending (or approved, with review = auto, when this is the
 * first listing of this server and the tool is not held: a tool that appears later waits, so an upstream cannot
 * rename its way past review), a definition that differs from the approved one `changed` (whatever review says),
 * tools no longer offered `gone`. A tool recorded from another server of the same name (its url or command changed)
 * is new again: its approval is not carried over. The tools named in `keep` stay as they are (an `auth = oauth`
 * upstream's tool that people's earlier listings still have). Returns the changes of state, for the audit trail.
 */
export async function recordDiscovery(
  tx: Tx,
  upstream: string,
  server: string,
  found: readonly FoundTool[],
  review: 'admin' | 'auto',
  now: number,
  keep: ReadonlySet<string> = new Set(),
): Promise<DiscoveryChange[]> {
  // What deciding each tool's state needs of its row, not its definitions (an upstream's rows can hold megabytes of
  // them, more than a database server answers in one response).
  const rows = await tx
    .select({ ...gateColumns, fingerprint: upstreamTools.fingerprint })
    .from(upstreamTools)
    .where(eq(upstreamTools.upstream, upstream))
    .all();
  const known = new Map(rows.map((r) => [r.name, { ...toGate(r), fingerprint: r.fingerprint }]));
  // This server's first listing: no row recorded from it yet (a row from before svc kept the server counts as its).
  const auto = review === 'auto' && ![...known.values()].some((t) => t.server === null || t.server === server);
  const changes: DiscoveryChange[] = [];
  for (const tool of found) {
    const before = known.get(tool.name);
    known.delete(tool.name);
    const definition = JSON.stringify(tool.definition);
    const held = tool.held === null ? null : JSON.stringify(tool.held);
    if (!before) {
      const state = auto && tool.held === null ? 'approved' : 'pending';
      const approved = state === 'approved' ? { approvedDefinition: definition, approvedFingerprint: tool.fingerprint } : {};
      await tx.insert(upstreamTools).values({
        upstream,
        name: tool.name,
        definition,
        fingerprint: tool.fingerprint,
        state,
        server,
        held,
        firstSeenAt: now,
        updatedAt: now,
        ...approved,
      });
      changes.push({ name: tool.name, from: null, to: state });
      continue;
    }
    // A row from before svc kept the server is taken as this server's; one from another server starts over.
    const otherServer = before.server !== null && before.server !== server;
    const approvedBefore = otherServer ? null : before.approvedFingerprint;
    const state = stateFound(before, approvedBefore, tool, auto);
    const sameHeld = held === (before.held === null ? null : JSON.stringify(before.held));
    if (state === before.state && tool.fingerprint === before.fingerprint && before.server === server && sameHeld) continue;
    const approve =
      state === 'approved' && approvedBefore === null
        ? { approvedDefinition: definition, approvedFingerprint: tool.fingerprint }
        : otherServer
          ? { approvedDefinition: null, approvedFingerprint: null }
          : {};
    await tx
      .update(upstreamTools)
      .set({ definition, fingerprint: tool.fingerprint, state, server, held, updatedAt: now, ...approve })
      .where(and(eq(upstreamTools.upstream, upstream), eq(upstreamTools.name, tool.name)));
    if (state !== before.state || otherServer) changes.push({ name: tool.name, from: before.state, to: state });
  }
  for (const gone of known.values()) {
    // A disabled tool stays disabled while it is away, so coming back cannot enable it.
    if (gone.state === 'gone' || gone.state === 'disabled' || keep.has(gone.name)) continue;
    await tx
      .update(upstreamTools)
      .set({ state: 'gone', updatedAt: now })
      .where(and(eq(upstreamTools.upstream, upstream), eq(upstreamTools.name, gone.name)));
    changes.push({ name: gone.name, from: gone.state, to: 'gone' });
  }
  return changes;
}

/** Pins the tool's current definition as what agents are told, and approves it. */
export async function approveTool(tx: Tx, tool: UpstreamTool, now: number): Promise<void> {
  await tx
    .update(upstreamTools)
    .set({ approvedDefinition: JSON.stringify(tool.definition), approvedFingerprint: tool.fingerprint, state: 'approved', updatedAt: now })
    .where(and(eq(upstreamTools.upstream, tool.upstream), eq(upstreamTools.name, tool.name)));
}

export async function disableTool(tx: Tx, tool: UpstreamTool, now: number): Promise<void> {
  await tx
    .update(upstreamTools)
    .set({ state: 'disabled', updatedAt: now })
    .where(and(eq(upstreamTools.upstream, tool.upstream), eq(upstreamTools.name, tool.name)));
}

/** Gives the tool its own labels, or (null) returns it to its upstream's. */
export async function labelTool(tx: Tx, tool: UpstreamTool, labels: LabelSet | null, now: number): Promise<void> {
  await tx
    .update(upstreamTools)
    .set({ labels: labels === null ? null : formatLabels(labels), updatedAt: now })
    .where(and(eq(upstreamTools.upstream, tool.upstream), eq(upstreamTools.name, tool.name)));
}

/** How many tools of each upstream are in each state (svc upstream list): counted in the database, no definition read. */
export async function toolCounts(db: Db): Promise<Map<string, Record<ToolState, number>>> {
  const rows = await db
    .select({ upstream: upstreamTools.upstream, state: upstreamTools.state, n: sql<number>`count(*)` })
    .from(upstreamTools)
    .groupBy(upstreamTools.upstream, upstreamTools.state)
    .all();
  const counts = new Map<string, Record<ToolState, number>>();
  for (const r of rows) {
    const of = counts.get(r.upstream) ?? { pending: 0, approved: 0, changed: 0, disabled: 0, gone: 0 };
    of[r.state as ToolState] = Number(r.n);
    counts.set(r.upstream, of);
  }
  return counts;
}

/** Records whether an upstream answered its last discovery. */
export async function recordUpstreamStatus(tx: Tx, upstream: string, up: boolean, now: number): Promise<void> {
  const state = up ? 'up' : 'down';
  await tx
    .insert(upstreamStatus)
    .values({ upstream, state, checkedAt: now })
    .onConflictDoUpdate({ target: upstreamStatus.upstream, set: { state, checkedAt: now } });
}

export async function upstreamStatuses(db: Db): Promise<Map<string, { state: 'up' | 'down'; checkedAt: number }>> {
  const rows = await db.select().from(upstreamStatus).all();
  return new Map(rows.map((r) => [r.upstream, { state: r.state as 'up' | 'down', checkedAt: r.checkedAt }]));
}
