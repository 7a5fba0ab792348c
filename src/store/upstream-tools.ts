// What svc reviews of its upstreams as objects in the database (CONTRACT §6.1, §6.3): tools, prompts and apps, one
// model for the three. Each row is what discovery found, what an admin approved, the object's own labels and its
// state. Every instance reads the same rows. Every function takes the kind; left out, it is a tool.
import { and, asc, eq, inArray, isNull, or, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { upstreamStatus, upstreamTools } from '../db/schema.ts';
import { formatLabels, storedLabels, type LabelSet } from '../domain/labels.ts';
import { notFound } from '../domain/errors.ts';
import { pageOf, window, type Page, type PageRequest } from './paging.ts';

/** What svc reviews: an upstream's tools, its prompts, and its apps (`ui://` resources, named by their URI). */
export type ReviewedKind = 'tool' | 'prompt' | 'app';
export const REVIEWED_KINDS: readonly ReviewedKind[] = ['tool', 'prompt', 'app'];

export type ToolState = 'pending' | 'approved' | 'changed' | 'disabled' | 'gone';
/** The state of any reviewed object (the same five for every kind). */
export type ReviewState = ToolState;
export const REVIEW_STATES: readonly ReviewState[] = ['pending', 'approved', 'changed', 'disabled', 'gone'];

/** What agents are told about a tool: everything of it but its name. */
export interface ToolDefinition {
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: Record<string, unknown>;
  readonly outputSchema?: Record<string, unknown>;
  readonly annotations?: Record<string, unknown>;
}

/** One argument of a prompt, as the upstream lists it. */
export interface PromptArgumentDefinition {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly required?: boolean;
}

/** What agents are told about a prompt: the MCP Prompt's fields but its name. */
export interface PromptDefinition {
  readonly title?: string;
  readonly description?: string;
  readonly arguments?: readonly PromptArgumentDefinition[];
}

/**
 * What is pinned of an app (a `ui://` resource: code the person's client renders): how it is listed, the SHA-256 of
 * its contents and their size in bytes, whether they are served as a base64 blob, and its `_meta.ui` (CSP,
 * permissions, domain). Other bytes, the other encoding, or another `_meta.ui`, are another definition.
 */
export interface AppDefinition {
  readonly title?: string;
  readonly description?: string;
  readonly mimeType?: string;
  readonly contents_sha256: string;
  /** 'blob': served as a base64 blob, which hosts decode otherwise than text; absent: served as text */
  readonly encoding?: 'blob';
  readonly ui?: Record<string, unknown>;
  readonly size: number;
}

export interface Definitions {
  readonly tool: ToolDefinition;
  readonly prompt: PromptDefinition;
  readonly app: AppDefinition;
}
export type ReviewedDefinition = Definitions[ReviewedKind];

/** One object as an upstream listed it: its definition, that definition's fingerprint, and why it is held. */
export interface Found<D extends ReviewedDefinition = ReviewedDefinition> {
  readonly name: string;
  readonly definition: D;
  readonly fingerprint: string;
  /** why this definition is never offered and cannot be approved as it is; null: nothing holds it */
  readonly held: readonly string[] | null;
}
export type FoundTool = Found<ToolDefinition>;
export type FoundPrompt = Found<PromptDefinition>;
export type FoundApp = Found<AppDefinition>;

/** A reviewed object's row; `K` narrows its kind and so its definitions. */
export interface UpstreamObject<K extends ReviewedKind = ReviewedKind> extends Found<Definitions[K]> {
  readonly upstream: string;
  readonly kind: K;
  readonly approvedDefinition: Definitions[K] | null;
  readonly approvedFingerprint: string | null;
  /** the object's own labels; null: its upstream's */
  readonly labels: LabelSet | null;
  readonly state: ReviewState;
  /** which server recorded it (UpstreamConfig.server); null: recorded before svc kept it */
  readonly server: string | null;
  readonly firstSeenAt: number;
  readonly updatedAt: number;
}
export type UpstreamTool = UpstreamObject<'tool'>;
export type UpstreamPrompt = UpstreamObject<'prompt'>;
export type UpstreamApp = UpstreamObject<'app'>;

/**
 * What deciding a call needs of a tool (or a prompt, or an app): its state, labels and server, and whether a
 * definition was approved; not the definitions themselves, which a call never sends (a large schema would be read and
 * parsed on every call).
 */
export type ToolGate = Pick<UpstreamObject, 'upstream' | 'kind' | 'name' | 'labels' | 'state' | 'server' | 'approvedFingerprint' | 'held'>;
/** The gate of any reviewed object: the same as a tool's. */
export type ReviewedGate = ToolGate;

type Row = typeof upstreamTools.$inferSelect;

function toObject<K extends ReviewedKind>(r: Row): UpstreamObject<K> {
  return {
    ...toGate(r),
    kind: r.kind as K,
    definition: JSON.parse(r.definition) as Definitions[K],
    fingerprint: r.fingerprint,
    approvedDefinition: r.approvedDefinition === null ? null : (JSON.parse(r.approvedDefinition) as Definitions[K]),
    firstSeenAt: r.firstSeenAt,
    updatedAt: r.updatedAt,
  };
}

/** The kinds in the order svc shows them: tools, prompts, apps. */
const KIND_ORDER = sql`CASE ${upstreamTools.kind} WHEN 'tool' THEN 0 WHEN 'prompt' THEN 1 ELSE 2 END`;

/**
 * One page of the reviewed objects, by upstream, kind (tools, prompts, apps) and name: of one upstream and of one
 * kind when asked (the admin's page, the API, the CLI: no answer grows with an upstream).
 */
export async function listObjectsPage<K extends ReviewedKind = ReviewedKind>(
  db: Db,
  request: PageRequest,
  only: { upstream?: string; kind?: K } = {},
): Promise<Page<UpstreamObject<K>>> {
  const rows = await db
    .select()
    .from(upstreamTools)
    .where(
      and(
        only.upstream === undefined ? undefined : eq(upstreamTools.upstream, only.upstream),
        only.kind === undefined ? undefined : eq(upstreamTools.kind, only.kind),
      ),
    )
    .orderBy(asc(upstreamTools.upstream), KIND_ORDER, asc(upstreamTools.name))
    .limit(window(request).limit)
    .offset(window(request).offset)
    .all();
  return pageOf(
    rows.map((r) => toObject<K>(r)),
    request,
  );
}

/** One page of every upstream's tools, by upstream and name. */
export const listToolsPage = (db: Db, request: PageRequest, only: { upstream?: string } = {}): Promise<Page<UpstreamTool>> =>
  listObjectsPage(db, request, { ...only, kind: 'tool' });

/** An object's gate as the call path and the listing read it: no definition. */
const gateColumns = {
  upstream: upstreamTools.upstream,
  kind: upstreamTools.kind,
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
    kind: row.kind as ReviewedKind,
    name: row.name,
    labels: row.labels === null ? null : storedLabels(row.labels),
    state: row.state as ReviewState,
    server: row.server,
    approvedFingerprint: row.approvedFingerprint,
    held: row.held === null ? null : (JSON.parse(row.held) as string[]),
  };
}

/** The row of one object: its upstream, kind and name. */
const rowOf = (o: { readonly upstream: string; readonly kind: ReviewedKind; readonly name: string }) =>
  and(eq(upstreamTools.upstream, o.upstream), eq(upstreamTools.kind, o.kind), eq(upstreamTools.name, o.name));

function prepareFind(db: Db) {
  return db
    .select(gateColumns)
    .from(upstreamTools)
    .where(
      and(
        eq(upstreamTools.upstream, sql.placeholder('upstream')),
        eq(upstreamTools.kind, sql.placeholder('kind')),
        eq(upstreamTools.name, sql.placeholder('name')),
      ),
    )
    .prepare();
}
const finds = new WeakMap<Db, ReturnType<typeof prepareFind>>();

/** What the call path needs of one tool (or prompt, or app): the statement is prepared once per database (not for a transaction). */
export async function findTool(db: Db, upstream: string, name: string, kind: ReviewedKind = 'tool'): Promise<ToolGate | null> {
  let find = finds.get(db);
  if (!find) {
    find = prepareFind(db);
    finds.set(db, find);
  }
  const row = await find.get({ upstream, kind, name });
  return row ? toGate(row) : null;
}

/**
 * The approved tools (or prompts, or apps), as a caller's listing decides on them: no definition is read here (the
 * listing reads the approved definitions of those it offers, once per approval: approvedDefinitions).
 */
export async function listApproved(db: Db, kind: ReviewedKind = 'tool'): Promise<ToolGate[]> {
  const rows = await db
    .select(gateColumns)
    .from(upstreamTools)
    .where(and(eq(upstreamTools.kind, kind), eq(upstreamTools.state, 'approved')))
    .orderBy(asc(upstreamTools.upstream), asc(upstreamTools.name))
    .all();
  return rows.map(toGate);
}

/** The approved definitions (as stored, unparsed) of some objects of one kind of one upstream, with the fingerprint each is pinned by. */
export async function approvedDefinitions(
  db: Db,
  upstream: string,
  names: readonly string[],
  kind: ReviewedKind = 'tool',
): Promise<{ name: string; approvedFingerprint: string | null; approvedDefinition: string | null }[]> {
  if (names.length === 0) return [];
  return db
    .select({
      name: upstreamTools.name,
      approvedFingerprint: upstreamTools.approvedFingerprint,
      approvedDefinition: upstreamTools.approvedDefinition,
    })
    .from(upstreamTools)
    .where(and(eq(upstreamTools.upstream, upstream), eq(upstreamTools.kind, kind), inArray(upstreamTools.name, [...names])))
    .all();
}

/** The fingerprints of one upstream's tools (or prompts, or apps), as recorded and as approved: what merging people's listings weighs. */
export async function toolFingerprints(
  db: Db,
  upstream: string,
  kind: ReviewedKind = 'tool',
): Promise<Map<string, { fingerprint: string; approvedFingerprint: string | null }>> {
  const rows = await db
    .select({ name: upstreamTools.name, fingerprint: upstreamTools.fingerprint, approvedFingerprint: upstreamTools.approvedFingerprint })
    .from(upstreamTools)
    .where(and(eq(upstreamTools.upstream, upstream), eq(upstreamTools.kind, kind)))
    .all();
  return new Map(rows.map((r) => [r.name, { fingerprint: r.fingerprint, approvedFingerprint: r.approvedFingerprint }]));
}

/** One object's row, read inside a transaction or by a page; a missing one is 404 (`no prompt "x" of upstream "y"`). */
export async function getObject<K extends ReviewedKind>(db: Db, upstream: string, name: string, kind: K): Promise<UpstreamObject<K>> {
  const row = await db.select().from(upstreamTools).where(rowOf({ upstream, kind, name })).get();
  if (!row) throw notFound(`no ${kind} "${name}" of upstream "${upstream}"`);
  return toObject<K>(row);
}

/** One tool's row; a missing tool is 404. */
export const getTool = (db: Db, upstream: string, name: string): Promise<UpstreamTool> => getObject(db, upstream, name, 'tool');

/**
 * An object's state after discovery found it again as `found`; `approved` is what was approved of it, if any. `auto`:
 * one never approved is approved as found (review = auto, in the server's first listing), unless it is held.
 */
function stateFound(object: Pick<ToolGate, 'state'>, approved: string | null, found: Found, auto: boolean): ReviewState {
  if (object.state === 'disabled') return 'disabled';
  if (approved === null) return auto && found.held === null ? 'approved' : 'pending';
  return found.fingerprint === approved ? 'approved' : 'changed';
}

export interface DiscoveryChange {
  readonly kind: ReviewedKind;
  readonly name: string;
  readonly from: ReviewState | null;
  readonly to: ReviewState;
}

/** What recording one listing knows of an upstream's rows of one kind: their gates and fingerprints, by name. */
async function knownRows(tx: Tx, upstream: string, kind: ReviewedKind) {
  // What deciding each object's state needs of its row, not its definitions (an upstream's rows can hold megabytes
  // of them, more than a database server answers in one response).
  const rows = await tx
    .select({ ...gateColumns, fingerprint: upstreamTools.fingerprint })
    .from(upstreamTools)
    .where(and(eq(upstreamTools.upstream, upstream), eq(upstreamTools.kind, kind)))
    .all();
  return new Map(rows.map((r) => [r.name, { ...toGate(r), fingerprint: r.fingerprint }]));
}

/**
 * Whether the upstream's listing from `server` now is that server's first successful one: the server svc last listed
 * it from is another (or none). Before svc kept that, a row of the upstream (of any kind) recorded from this server,
 * or from before svc kept servers, says it was listed. Read once per run, before anything of it is recorded.
 */
export async function firstListing(tx: Tx, upstream: string, server: string): Promise<boolean> {
  const status = await tx
    .select({ listedServer: upstreamStatus.listedServer })
    .from(upstreamStatus)
    .where(eq(upstreamStatus.upstream, upstream))
    .get();
  const listed = status?.listedServer ?? null;
  if (listed !== null) return listed !== server;
  const row = await tx
    .select({ name: upstreamTools.name })
    .from(upstreamTools)
    .where(and(eq(upstreamTools.upstream, upstream), or(isNull(upstreamTools.server), eq(upstreamTools.server, server))))
    .limit(1)
    .get();
  return row === undefined;
}

/**
 * Records what discovery found of one kind on one upstream: new objects pending (or approved, when `auto`: review =
 * auto and this is the server's first successful listing, firstListing, and the object is not held; anything that
 * appears in a later listing waits, a kind's first objects too, so an upstream cannot rename or add its way past
 * review), a definition that differs from the approved one `changed` (whatever review says), those no longer offered
 * `gone`. A row recorded from another server of the same name (its url or command changed) is new again: its
 * approval is not carried over. The names in `keep` stay as they are (an `auth = oauth` upstream's tool that people's
 * earlier listings still have). Returns the changes of state, for the audit trail.
 */
export async function recordDiscovery(
  tx: Tx,
  upstream: string,
  server: string,
  found: readonly Found[],
  auto: boolean,
  now: number,
  keep: ReadonlySet<string> = new Set(),
  kind: ReviewedKind = 'tool',
): Promise<DiscoveryChange[]> {
  const known = await knownRows(tx, upstream, kind);
  const changes: DiscoveryChange[] = [];
  for (const object of found) {
    const before = known.get(object.name);
    known.delete(object.name);
    const change = before
      ? await recordAgain(tx, { upstream, kind, server, now, auto }, before, object)
      : await recordNew(tx, { upstream, kind, server, now, auto }, object);
    if (change) changes.push(change);
  }
  for (const gone of known.values()) {
    // A disabled object stays disabled while it is away, so coming back cannot enable it.
    if (gone.state === 'gone' || gone.state === 'disabled' || keep.has(gone.name)) continue;
    await tx
      .update(upstreamTools)
      .set({ state: 'gone', updatedAt: now })
      .where(rowOf({ upstream, kind, name: gone.name }));
    changes.push({ kind, name: gone.name, from: gone.state, to: 'gone' });
  }
  return changes;
}

/** Where one listing is recorded: the upstream, the kind, the server that listed it, when, and whether it approves as found. */
interface Recording {
  readonly upstream: string;
  readonly kind: ReviewedKind;
  readonly server: string;
  readonly now: number;
  readonly auto: boolean;
}

async function recordNew(tx: Tx, at: Recording, object: Found): Promise<DiscoveryChange> {
  const definition = JSON.stringify(object.definition);
  const state = at.auto && object.held === null ? 'approved' : 'pending';
  const approved = state === 'approved' ? { approvedDefinition: definition, approvedFingerprint: object.fingerprint } : {};
  await tx.insert(upstreamTools).values({
    upstream: at.upstream,
    kind: at.kind,
    name: object.name,
    definition,
    fingerprint: object.fingerprint,
    state,
    server: at.server,
    held: object.held === null ? null : JSON.stringify(object.held),
    firstSeenAt: at.now,
    updatedAt: at.now,
    ...approved,
  });
  return { kind: at.kind, name: object.name, from: null, to: state };
}

async function recordAgain(
  tx: Tx,
  at: Recording,
  before: ToolGate & { fingerprint: string },
  object: Found,
): Promise<DiscoveryChange | null> {
  const definition = JSON.stringify(object.definition);
  const held = object.held === null ? null : JSON.stringify(object.held);
  // A row from before svc kept the server is taken as this server's; one from another server starts over.
  const otherServer = before.server !== null && before.server !== at.server;
  const approvedBefore = otherServer ? null : before.approvedFingerprint;
  const state = stateFound(before, approvedBefore, object, at.auto);
  const sameHeld = held === (before.held === null ? null : JSON.stringify(before.held));
  if (state === before.state && object.fingerprint === before.fingerprint && before.server === at.server && sameHeld) return null;
  const approve =
    state === 'approved' && approvedBefore === null
      ? { approvedDefinition: definition, approvedFingerprint: object.fingerprint }
      : otherServer
        ? { approvedDefinition: null, approvedFingerprint: null }
        : {};
  await tx
    .update(upstreamTools)
    .set({ definition, fingerprint: object.fingerprint, state, server: at.server, held, updatedAt: at.now, ...approve })
    .where(rowOf({ upstream: at.upstream, kind: at.kind, name: object.name }));
  return state !== before.state || otherServer ? { kind: at.kind, name: object.name, from: before.state, to: state } : null;
}

/** Pins the object's current definition as what agents are told, and approves it. */
export async function approveTool(tx: Tx, object: UpstreamObject, now: number): Promise<void> {
  await tx
    .update(upstreamTools)
    .set({
      approvedDefinition: JSON.stringify(object.definition),
      approvedFingerprint: object.fingerprint,
      state: 'approved',
      updatedAt: now,
    })
    .where(rowOf(object));
}

export async function disableTool(tx: Tx, object: UpstreamObject, now: number): Promise<void> {
  await tx.update(upstreamTools).set({ state: 'disabled', updatedAt: now }).where(rowOf(object));
}

/** Gives the object its own labels, or (null) returns it to its upstream's. */
export async function labelTool(tx: Tx, object: UpstreamObject, labels: LabelSet | null, now: number): Promise<void> {
  await tx
    .update(upstreamTools)
    .set({ labels: labels === null ? null : formatLabels(labels), updatedAt: now })
    .where(rowOf(object));
}

export type StateCounts = Record<ReviewState, number>;
export const noCounts = (): StateCounts => ({ pending: 0, approved: 0, changed: 0, disabled: 0, gone: 0 });

/**
 * How many objects of each kind of each upstream are in each state (svc upstream list): counted in the database, no
 * definition read.
 */
export async function objectCounts(db: Db): Promise<Map<string, Record<ReviewedKind, StateCounts>>> {
  const rows = await db
    .select({ upstream: upstreamTools.upstream, kind: upstreamTools.kind, state: upstreamTools.state, n: sql<number>`count(*)` })
    .from(upstreamTools)
    .groupBy(upstreamTools.upstream, upstreamTools.kind, upstreamTools.state)
    .all();
  const counts = new Map<string, Record<ReviewedKind, StateCounts>>();
  for (const r of rows) {
    const of = counts.get(r.upstream) ?? { tool: noCounts(), prompt: noCounts(), app: noCounts() };
    of[r.kind as ReviewedKind][r.state as ReviewState] = Number(r.n);
    counts.set(r.upstream, of);
  }
  return counts;
}

/**
 * Records whether an upstream answered its last discovery; `listed`: the server it was listed from, successfully (what
 * firstListing reads). A failure leaves the server last listed as it was.
 */
export async function recordUpstreamStatus(tx: Tx, upstream: string, up: boolean, now: number, listed?: string): Promise<void> {
  const state = up ? 'up' : 'down';
  const set = { state, checkedAt: now, ...(listed === undefined ? {} : { listedServer: listed }) };
  await tx
    .insert(upstreamStatus)
    .values({ upstream, ...set })
    .onConflictDoUpdate({ target: upstreamStatus.upstream, set });
}

export async function upstreamStatuses(db: Db): Promise<Map<string, { state: 'up' | 'down'; checkedAt: number }>> {
  const rows = await db.select().from(upstreamStatus).all();
  return new Map(rows.map((r) => [r.upstream, { state: r.state as 'up' | 'down', checkedAt: r.checkedAt }]));
}

/**
 * A version of every reviewed row: it changes when a row is added, removed or written (each write stamps updated_at),
 * so a caller's listing can only have changed when it did. What change notifications poll (mcp/changes.ts): one read
 * over the table's rows, no definition read.
 */
export async function reviewedVersion(db: Db): Promise<string> {
  const row = await db
    .select({
      version: sql<string>`count(*) || ':' || coalesce(max(${upstreamTools.updatedAt}), 0) || ':' || coalesce(sum(${upstreamTools.updatedAt}), 0)`,
    })
    .from(upstreamTools)
    .get();
  return String(row?.version ?? '');
}
