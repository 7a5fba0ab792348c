// Notices to users, as rows that any svc process may claim and send. They come from two places: the audit trail
// (a token an administrator made from the CLI, a password change, an OAuth grant), read past a cursor, so each
// event commits with its own action and is announced once; and tokens entering the expiry warning window, read
// past a watermark, so each scan looks only at tokens that came within the window since the last one.
import { and, eq, inArray, isNull, lte, or, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { audit, noticeCursor, notices, oauthClients, tokens, users } from '../db/schema.ts';

export type NoticeKind = 'token_expiring' | 'token_created' | 'grant_made' | 'password_changed';
export type NoticeOutcome = 'sent' | 'no_email' | 'obsolete' | 'gave_up';

export interface ClaimedNotice {
  readonly id: number;
  readonly kind: NoticeKind;
  readonly detail: Record<string, unknown>;
  readonly attempts: number;
  readonly createdAt: number;
  readonly user: { readonly uid: string; readonly email: string; readonly name: string };
}

/** Audit events older than this when first read are not announced (notices were off, or no server ran). */
export const STALE_EVENT_MS = 24 * 3600_000;
const EVENT_ACTIONS = ['token.create', 'user.update', 'oauth.grant'];
const BATCH = 500;

/** Cheap reads that say whether deriveNotices has anything to do, so an idle tick writes nothing. */
export async function derivationDue(db: Db, now: number, warningMs: number): Promise<boolean> {
  const cursor = await db.select().from(noticeCursor).where(eq(noticeCursor.id, 1)).get();
  if (!cursor) return true;
  const event = await db.get<{ n: number } | undefined>(sql`SELECT 1 AS n FROM audit WHERE id > ${cursor.auditId} LIMIT 1`);
  if (event) return true;
  const entering = await db.get<{ n: number } | undefined>(sql`
    SELECT 1 AS n FROM tokens WHERE expires_at > ${Math.max(now, cursor.expiryUntil)} AND expires_at <= ${now + warningMs} LIMIT 1`);
  return entering !== undefined;
}

/** Makes the notices for new audit events and for tokens that came within `warningMs` of expiring. */
export async function deriveNotices(tx: Tx, now: number, warningMs: number): Promise<number> {
  const cursor = await tx.select().from(noticeCursor).where(eq(noticeCursor.id, 1)).get();
  if (!cursor) {
    // First run: events of the last day are announced, older ones not; tokens already inside the window are.
    const first = await tx.get<{ id: number | null }>(sql`SELECT min(id) AS id FROM audit WHERE at >= ${now - STALE_EVENT_MS}`);
    const last = await tx.get<{ id: number | null }>(sql`SELECT max(id) AS id FROM audit`);
    await tx.insert(noticeCursor).values({ id: 1, auditId: first.id !== null ? first.id - 1 : (last.id ?? 0), expiryUntil: now });
    return deriveNotices(tx, now, warningMs);
  }
  let made = 0;
  const events = await tx
    .select()
    .from(audit)
    .where(and(sql`${audit.id} > ${cursor.auditId}`, inArray(audit.action, EVENT_ACTIONS)))
    .orderBy(audit.id)
    .limit(BATCH)
    .all();
  for (const e of events) {
    if (e.at < now - STALE_EVENT_MS) continue;
    const notice = await fromEvent(tx, e);
    if (notice) made += await insertNotice(tx, notice, now);
  }
  const newest =
    events.length === BATCH
      ? events.at(-1)!.id
      : ((await tx.get<{ id: number | null }>(sql`SELECT max(id) AS id FROM audit`)).id ?? cursor.auditId);

  // A token enters the window as time passes; one born inside it (a short lifetime) is not warned about.
  const until = now + warningMs;
  const from = Math.max(now, cursor.expiryUntil);
  if (until > from) {
    const entering = await tx.all<{ id: number }>(sql`
      INSERT INTO notices (key, user_id, kind, detail, created_at, next_attempt_at)
      SELECT 'token_expiring:' || t.id, t.user_id, 'token_expiring', json_object('token_id', t.id, 'name', t.name, 'expires_at', t.expires_at), ${now}, ${now}
      FROM tokens t
      WHERE t.expires_at > ${from} AND t.expires_at <= ${until} AND t.revoked_at IS NULL AND t.grant_id IS NULL
        AND t.created_at < t.expires_at - ${warningMs}
      ON CONFLICT (key) DO NOTHING
      RETURNING id`);
    made += entering.length;
  }
  await tx
    .update(noticeCursor)
    .set({ auditId: newest, expiryUntil: Math.max(until, cursor.expiryUntil) })
    .where(eq(noticeCursor.id, 1));
  return made;
}

type AuditRow = typeof audit.$inferSelect;
interface NewNotice {
  key: string;
  userId: number;
  kind: NoticeKind;
  detail: Record<string, unknown>;
}

async function fromEvent(tx: Tx, e: AuditRow): Promise<NewNotice | null> {
  const detail = e.detail ? (JSON.parse(e.detail) as Record<string, unknown>) : {};
  const userId = async (uid: string | null) =>
    uid === null ? undefined : (await tx.select({ id: users.id }).from(users).where(eq(users.uid, uid)).get())?.id;
  if (e.action === 'token.create' && e.via === 'cli') {
    const id = await userId(typeof detail.owner === 'string' ? detail.owner : null);
    return id === undefined
      ? null
      : {
          key: `token_created:${e.target}`,
          userId: id,
          kind: 'token_created',
          detail: { name: detail.name, expires_at: detail.expires_at, restriction: detail.restriction },
        };
  }
  if (e.action === 'user.update' && (detail.password === 'set' || detail.password === 'removed')) {
    const id = await userId(e.target);
    const by = e.via === 'cli' ? 'an administrator' : e.actor === e.target ? 'you' : 'an administrator';
    return id === undefined
      ? null
      : { key: `password_changed:${e.id}`, userId: id, kind: 'password_changed', detail: { change: detail.password, by } };
  }
  if (e.action === 'oauth.grant') {
    const id = await userId(e.actor);
    const client = e.target
      ? await tx.select({ name: oauthClients.name }).from(oauthClients).where(eq(oauthClients.id, e.target)).get()
      : undefined;
    return id === undefined
      ? null
      : {
          key: `grant_made:${e.id}`,
          userId: id,
          kind: 'grant_made',
          detail: { client: client?.name ?? '', client_id: e.target, redirect_uri: detail.redirect_uri, restriction: detail.restriction },
        };
  }
  return null;
}

async function insertNotice(tx: Tx, n: NewNotice, now: number): Promise<number> {
  const rows = await tx
    .insert(notices)
    .values({ key: n.key, userId: n.userId, kind: n.kind, detail: JSON.stringify(n.detail), createdAt: now, nextAttemptAt: now })
    .onConflictDoNothing()
    .returning({ id: notices.id });
  return rows.length;
}

const due = (now: number) =>
  and(isNull(notices.doneAt), lte(notices.nextAttemptAt, now), or(isNull(notices.claimedUntil), lte(notices.claimedUntil, now)));

export async function noticesDue(db: Db, now: number): Promise<boolean> {
  return (await db.select({ id: notices.id }).from(notices).where(due(now)).limit(1).get()) !== undefined;
}

/**
 * Takes up to `limit` due notices for `leaseMs`: no other process sends them meanwhile. A notice whose token is no
 * longer active, or whose user is gone, is settled here rather than sent.
 */
export async function claimNotices(tx: Tx, now: number, leaseMs: number, limit: number): Promise<ClaimedNotice[]> {
  const ids = (await tx.select({ id: notices.id }).from(notices).where(due(now)).orderBy(notices.id).limit(limit).all()).map((r) => r.id);
  if (ids.length === 0) return [];
  const rows = await tx
    .update(notices)
    .set({ claimedUntil: now + leaseMs, attempts: sql`${notices.attempts} + 1` })
    .where(inArray(notices.id, ids))
    .returning();
  const owners = new Map(
    (
      await tx
        .select()
        .from(users)
        .where(
          inArray(
            users.id,
            rows.map((r) => r.userId),
          ),
        )
        .all()
    ).map((u) => [u.id, u]),
  );
  const claimed: ClaimedNotice[] = [];
  for (const r of rows.sort((a, b) => a.id - b.id)) {
    const detail = JSON.parse(r.detail) as Record<string, unknown>;
    if (r.kind === 'token_expiring' && !(await tokenStillActive(tx, String(detail.token_id), now))) {
      await settleNotice(tx, r.id, 'obsolete', now);
      continue;
    }
    const u = owners.get(r.userId)!;
    claimed.push({
      id: r.id,
      kind: r.kind as NoticeKind,
      detail,
      attempts: r.attempts,
      createdAt: r.createdAt,
      user: { uid: u.uid, email: u.email, name: u.name },
    });
  }
  return claimed;
}

async function tokenStillActive(tx: Tx, id: string, now: number): Promise<boolean> {
  const t = await tx.select({ revokedAt: tokens.revokedAt, expiresAt: tokens.expiresAt }).from(tokens).where(eq(tokens.id, id)).get();
  return t !== undefined && t.revokedAt === null && (t.expiresAt === null || t.expiresAt > now);
}

export async function settleNotice(tx: Tx, id: number, outcome: NoticeOutcome, now: number): Promise<void> {
  await tx.update(notices).set({ doneAt: now, outcome, claimedUntil: null }).where(eq(notices.id, id));
}

/** Gives the claim back, to be tried again at `at`. */
export async function retryNotice(tx: Tx, id: number, at: number): Promise<void> {
  await tx.update(notices).set({ claimedUntil: null, nextAttemptAt: at }).where(eq(notices.id, id));
}

export const NOTICE_PRUNE_BATCH = 1000;

/** Settled notices older than `before` are removed, NOTICE_PRUNE_BATCH at a time. */
export async function pruneNotices(tx: Tx, before: number): Promise<number> {
  const rows = await tx
    .delete(notices)
    .where(sql`${notices.id} IN (SELECT id FROM notices WHERE done_at IS NOT NULL AND done_at < ${before} LIMIT ${NOTICE_PRUNE_BATCH})`)
    .returning({ id: notices.id });
  return rows.length;
}
