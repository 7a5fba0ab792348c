// The audit trail: admin actions, sign-ins, token creation and revocation, refused proxy requests.
import { and, asc, desc, eq, gt, lt, or, sql, type SQL } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { audit } from '../db/schema.ts';
import { storedHash } from '../domain/secrets.ts';
import { currentTraceId } from '../trace/spans.ts';

export interface AuditEvent {
  /** uid of whoever acted; null when nobody is signed in (a failed login) */
  actor: string | null;
  /** token, session, header, cli, or anonymous */
  via: string;
  action: string;
  target?: string | null;
  detail?: Record<string, unknown> | null;
  peer?: string | null;
  /**
   * the trace of the request it belongs to (CONTRACT §8); absent: the trace of the work under way when it is written,
   * which is its request's unless it is written for several (counted rows) or later (calls committed in groups)
   */
  traceId?: string | null;
}

export interface AuditEntry extends Required<Omit<AuditEvent, 'detail'>> {
  id: number;
  at: number;
  detail: Record<string, unknown> | null;
}

/**
 * An entry's detail is kept whole up to this many characters of JSON, and a larger one as its size and SHA-256:
 * anyone can cause some entries (a registration names its redirect URIs), and no entry may make a page of the
 * trail large.
 */
export const AUDIT_DETAIL_MAX = 4096;

function detailText(detail: Record<string, unknown> | null | undefined): string | null {
  if (!detail) return null;
  const text = JSON.stringify(detail);
  if (text.length <= AUDIT_DETAIL_MAX) return text;
  return JSON.stringify({ truncated: true, bytes: Buffer.byteLength(text), sha256: storedHash(text) });
}

export async function recordAudit(tx: Tx, event: AuditEvent, now = Date.now()): Promise<void> {
  await recordAudits(tx, [{ event, at: now }]);
}

/**
 * A text as UTF-8 can hold it: a lone surrogate (half an emoji, cut off by a length limit, or sent as `\ud800` by
 * anyone who can cause an entry) becomes U+FFFD, as the driver makes it of a bound string. Through JSON it would
 * reach the table as bytes that are not UTF-8, and reading the row would abort svc.
 */
function wellFormed<T extends string | null>(text: T): T {
  return (text === null ? null : text.replace(/\p{Surrogate}/gu, '\uFFFD')) as T;
}

/**
 * Several rows in one statement (the upstream calls' group commit): each with the time it happened. The rows go as
 * one JSON array through a statement whose text never changes, in their order: building a multi-row INSERT through
 * the query builder cost about 3 µs a row, more than the insert itself.
 */
export async function recordAudits(tx: Tx, rows: readonly { event: AuditEvent; at: number }[]): Promise<void> {
  if (rows.length === 0) return;
  const traced = currentTraceId();
  const values = rows.map(({ event, at }) => ({
    at,
    actor: wellFormed(event.actor),
    via: wellFormed(event.via),
    action: wellFormed(event.action),
    target: wellFormed(event.target ?? null),
    detail: detailText(event.detail),
    peer: wellFormed(event.peer ?? null),
    trace_id: event.traceId === undefined ? traced : event.traceId,
  }));
  await tx.run(
    sql`INSERT INTO audit (at, actor, via, action, target, detail, peer, trace_id)
        SELECT value ->> 'at', value ->> 'actor', value ->> 'via', value ->> 'action', value ->> 'target',
               value ->> 'detail', value ->> 'peer', value ->> 'trace_id'
        FROM json_each(${JSON.stringify(values)}) ORDER BY key`,
  );
}

/**
 * Events that anyone can cause without signing in (refused proxy requests) are kept as one row per peer and
 * reason per minute, with a count, so a flood cannot push real events out of sight. `count` is added to the
 * row of the current minute, made when there is none.
 */
export async function recordCountedAudit(
  tx: Tx,
  event: { via: string; action: string; peer: string; reason: string },
  count: number,
  now = Date.now(),
): Promise<void> {
  await addToCountedRow(
    tx,
    and(eq(audit.peer, event.peer), sql`json_extract(${audit.detail}, '$.reason') = ${event.reason}`)!,
    { actor: null, via: event.via, action: event.action, detail: { reason: event.reason, count }, peer: event.peer, traceId: null },
    count,
    now,
  );
}

/**
 * Upstream calls counted rather than written one by one (CONTRACT §6.1): a person's calls refused over an upstream's
 * `rate`, and their calls answered only with where to connect (`not_connected`, `unavailable` of an `auth = oauth`
 * upstream's connect answer). One `upstream.call` row per person, upstream, outcome and minute with their count;
 * `count` is added to the current minute's row, made when there is none.
 */
export async function recordCountedCalls(
  tx: Tx,
  event: { actor: string; via: string; upstream: string; peer: string; outcome: string },
  count: number,
  now = Date.now(),
): Promise<void> {
  await addToCountedRow(
    tx,
    and(
      eq(audit.actor, event.actor),
      eq(audit.target, event.upstream),
      sql`json_extract(${audit.detail}, '$.outcome') = ${event.outcome}`,
    )!,
    {
      actor: event.actor,
      via: event.via,
      action: 'upstream.call',
      target: event.upstream,
      detail: { outcome: event.outcome, count },
      peer: event.peer,
      traceId: null,
    },
    count,
    now,
  );
}

/**
 * Adds `count` to the newest row of the event's action this minute that `match` finds, or records the event. Such a
 * row stands for many requests, and names none's trace.
 */
async function addToCountedRow(tx: Tx, match: SQL, event: AuditEvent, count: number, now: number): Promise<void> {
  const row = await tx
    .select({ id: audit.id })
    .from(audit)
    .where(and(eq(audit.action, event.action), gt(audit.at, now - COUNTED_WINDOW_MS), match))
    .orderBy(desc(audit.id))
    .limit(1)
    .get();
  if (row) {
    await tx
      .update(audit)
      .set({ detail: sql`json_set(${audit.detail}, '$.count', json_extract(${audit.detail}, '$.count') + ${count})` })
      .where(eq(audit.id, row.id));
  } else {
    await recordAudit(tx, event, now);
  }
}
export const COUNTED_WINDOW_MS = 60_000;

/** Who acts in a request: the signed-in caller and the address the request came from. */
export interface Actor {
  readonly uid: string;
  /** the channel they came through: token, session, header, or cli (an operator on the machine) */
  readonly via: string;
  /** the client address; null on the CLI */
  readonly peer: string | null;
}

/** Records an action by a signed-in caller. */
export async function recordActorAudit(
  tx: Tx,
  actor: Actor,
  action: string,
  target: string,
  detail?: Record<string, unknown>,
): Promise<void> {
  await recordAudit(tx, { actor: actor.uid, via: actor.via, action, target, detail: detail ?? null, peer: actor.peer });
}

/** Newest first; `before` is the id to continue below (paging). */
export async function listAudit(db: Db, limit: number, before?: number): Promise<AuditEntry[]> {
  const rows = await db
    .select()
    .from(audit)
    .where(before === undefined ? undefined : lt(audit.id, before))
    .orderBy(desc(audit.id))
    .limit(limit)
    .all();
  return rows.map(toEntry);
}

/** Oldest first, for export: entries since `since` (ms), acted by or on `uid` when given. */
export async function exportAudit(db: Db, options: { since?: number; uid?: string }): Promise<AuditEntry[]> {
  const rows = await db
    .select()
    .from(audit)
    .where(
      and(
        options.since === undefined ? undefined : gt(audit.at, options.since),
        options.uid === undefined ? undefined : or(eq(audit.actor, options.uid), eq(audit.target, options.uid)),
      ),
    )
    .orderBy(asc(audit.id))
    .all();
  return rows.map(toEntry);
}

/** Removes up to `batch` entries older than `before` (ms), oldest first; returns how many. */
export async function pruneAuditBatch(tx: Tx, before: number, batch: number): Promise<number> {
  const rows = await tx
    .delete(audit)
    .where(sql`${audit.id} IN (SELECT id FROM audit WHERE at < ${before} ORDER BY id LIMIT ${batch})`)
    .returning({ id: audit.id });
  return rows.length;
}

function toEntry(r: typeof audit.$inferSelect): AuditEntry {
  return {
    id: r.id,
    at: r.at,
    actor: r.actor,
    via: r.via,
    action: r.action,
    target: r.target,
    detail: r.detail === null ? null : (JSON.parse(r.detail) as Record<string, unknown>),
    peer: r.peer,
    traceId: r.traceId,
  };
}
