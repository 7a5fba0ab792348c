// A person's own accounts at `auth = oauth` upstreams (CONTRACT §6.2), svc's registrations at their authorization
// servers, and connections under way. Tokens arrive here sealed (upstream/accounts.ts seals and opens them); this
// layer never sees one in the clear.
import { and, eq, isNotNull, isNull, lt, lte, or, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { upstreamAccounts, upstreamClients, upstreamConnects, upstreamRevocations } from '../db/schema.ts';

export type UpstreamAccount = typeof upstreamAccounts.$inferSelect;
export type UpstreamClientRow = typeof upstreamClients.$inferSelect;
export type UpstreamConnect = typeof upstreamConnects.$inferSelect;
export type UpstreamRevocation = typeof upstreamRevocations.$inferSelect;

/** The row of one person's account at one upstream; with `from`, only while it still holds those tokens. */
const accountRow = (userId: number, upstream: string, from?: string) =>
  and(
    eq(upstreamAccounts.userId, userId),
    eq(upstreamAccounts.upstream, upstream),
    from === undefined ? undefined : eq(upstreamAccounts.accessSealed, from),
  );

/** At most this many connections under way per person: older ones go first. */
export const CONNECTS_PER_PERSON = 10;

export async function findAccount(db: Db | Tx, userId: number, upstream: string): Promise<UpstreamAccount | null> {
  return (await db.select().from(upstreamAccounts).where(accountRow(userId, upstream)).get()) ?? null;
}

export async function listAccounts(db: Db, only: { userId?: number; upstream?: string } = {}): Promise<UpstreamAccount[]> {
  return await db
    .select()
    .from(upstreamAccounts)
    .where(
      and(
        only.userId === undefined ? undefined : eq(upstreamAccounts.userId, only.userId),
        only.upstream === undefined ? undefined : eq(upstreamAccounts.upstream, only.upstream),
      ),
    )
    .all();
}

/** What one connection listed of an upstream's tools: each name's fingerprint, null for a tool that listing holds. */
export type Listing = Readonly<Record<string, string | null>>;

/**
 * Stores what svc listed with a person's connection (`listed`), or that it tried and failed (undefined: the earlier
 * listing stays); only while the account is the connection listed with (connecting again makes a new one). True when
 * stored.
 */
export async function recordListing(
  tx: Tx,
  key: { userId: number; upstream: string; connectedAt: number },
  listed: Listing | undefined,
  now: number,
): Promise<boolean> {
  const done = await tx
    .update(upstreamAccounts)
    .set({ listedAt: now, ...(listed === undefined ? {} : { listedTools: JSON.stringify(listed) }) })
    .where(and(accountRow(key.userId, key.upstream), eq(upstreamAccounts.connectedAt, key.connectedAt)))
    .returning({ userId: upstreamAccounts.userId });
  return done.length === 1;
}

/**
 * How many of these people's stored listings of the upstream give each tool each fingerprint (null: held there),
 * counted inside the database: only connected accounts at `server` count. One row per name and fingerprint.
 */
export async function listingVotes(
  db: Db,
  upstream: string,
  server: string,
  userIds: readonly number[],
): Promise<{ name: string; fingerprint: string | null; people: number }[]> {
  if (userIds.length === 0) return [];
  return db.all<{ name: string; fingerprint: string | null; people: number }>(sql`
    SELECT j.key AS name, j.value AS fingerprint, count(*) AS people
    FROM upstream_accounts AS a CROSS JOIN json_each(a.listed_tools) AS j
    WHERE a.upstream = ${upstream} AND a.server = ${server} AND a.state = 'connected' AND a.listed_tools IS NOT NULL
      AND a.user_id IN (SELECT value FROM json_each(${JSON.stringify(userIds)}))
    GROUP BY j.key, j.value`);
}

/** The fingerprint an account's own listing has for the tool named by the placeholder `tool`, read by the database. */
const listedFingerprint = sql<string | null>`(
  SELECT value FROM json_each(${upstreamAccounts.listedTools}) WHERE key = ${sql.placeholder('tool')})`;

function prepareAccountFor(db: Db) {
  return db
    .select({ state: upstreamAccounts.state, server: upstreamAccounts.server, fingerprint: listedFingerprint })
    .from(upstreamAccounts)
    .where(and(eq(upstreamAccounts.userId, sql.placeholder('userId')), eq(upstreamAccounts.upstream, sql.placeholder('upstream'))))
    .prepare();
}
const accountFors = new WeakMap<Db, ReturnType<typeof prepareAccountFor>>();

/**
 * What a call decides on of the caller's account at an upstream: its state and server, and the fingerprint its own
 * listing has for `tool` (null: not listed, or held there). One read by the primary key, the listing looked into by
 * the database; the statement is prepared once per database.
 */
export async function accountFor(
  db: Db,
  userId: number,
  upstream: string,
  tool: string,
): Promise<{ state: string; server: string; fingerprint: string | null } | null> {
  let find = accountFors.get(db);
  if (!find) {
    find = prepareAccountFor(db);
    accountFors.set(db, find);
  }
  return (await find.get({ userId, upstream, tool })) ?? null;
}

/** Stores a new connection; the tokens of the one it replaces (returned) are queued for revocation. */
export async function putAccount(tx: Tx, account: UpstreamAccount): Promise<UpstreamAccount | null> {
  const before = await findAccount(tx, account.userId, account.upstream);
  await tx
    .insert(upstreamAccounts)
    .values(account)
    .onConflictDoUpdate({ target: [upstreamAccounts.userId, upstreamAccounts.upstream], set: { ...account } });
  if (before) await queueRevocations(tx, [before], account.connectedAt);
  return before;
}

/** New tokens after a refresh; only if the row still holds the tokens it was refreshed from (`from`). */
export async function refreshedAccount(
  tx: Tx,
  key: { userId: number; upstream: string },
  from: string,
  change: Pick<UpstreamAccount, 'accessSealed' | 'refreshSealed' | 'expiresAt' | 'scope' | 'refreshedAt'>,
): Promise<boolean> {
  const done = await tx
    .update(upstreamAccounts)
    .set({ ...change, state: 'connected', refreshingUntil: null })
    .where(accountRow(key.userId, key.upstream, from))
    .returning({ userId: upstreamAccounts.userId });
  return done.length === 1;
}

/** Milliseconds since the epoch by the database's clock, inside a statement: what every instance's claim is judged by. */
const databaseNow = sql<number>`CAST(unixepoch('subsec') * 1000 AS INTEGER)`;
const claimLapsed = or(isNull(upstreamAccounts.refreshingUntil), lte(upstreamAccounts.refreshingUntil, databaseNow));

/**
 * Takes the account's refresh for this instance for `holdMs`, only if it still holds the tokens `from` and no other
 * instance holds an unexpired claim; false when another instance is refreshing them (or already has). Both the claim
 * and its lapse are timed by the database's clock: a host whose clock is off neither takes a claim early nor holds
 * one long.
 */
export async function claimRefresh(tx: Tx, key: { userId: number; upstream: string }, from: string, holdMs: number): Promise<boolean> {
  const claimed = await tx
    .update(upstreamAccounts)
    .set({ refreshingUntil: sql`${databaseNow} + ${holdMs}` })
    .where(and(accountRow(key.userId, key.upstream, from), eq(upstreamAccounts.state, 'connected'), claimLapsed))
    .returning({ userId: upstreamAccounts.userId });
  return claimed.length === 1;
}

/** The account as it is now, and whether its refresh claim (if any) has lapsed: a read, for an instance waiting on one. */
export async function watchRefresh(
  db: Db,
  key: { userId: number; upstream: string },
): Promise<{ account: UpstreamAccount; lapsed: boolean } | null> {
  const row = await db
    .select({ account: upstreamAccounts, lapsed: sql<number>`${claimLapsed}` })
    .from(upstreamAccounts)
    .where(accountRow(key.userId, key.upstream))
    .get();
  return row === undefined ? null : { account: row.account, lapsed: Boolean(row.lapsed) };
}

/** Gives a claim back without new tokens (the refresh failed for a reason of the moment): another may try. */
export async function releaseRefresh(tx: Tx, key: { userId: number; upstream: string }, from: string): Promise<void> {
  await tx
    .update(upstreamAccounts)
    .set({ refreshingUntil: null })
    .where(accountRow(key.userId, key.upstream, from));
}

/**
 * Marks the account `reconnect`, only if it still holds the tokens that were refused (`from`); false when it no longer
 * does, or was marked already.
 */
export async function markReconnect(tx: Tx, userId: number, upstream: string, from: string): Promise<boolean> {
  const marked = await tx
    .update(upstreamAccounts)
    .set({ state: 'reconnect', refreshingUntil: null })
    .where(and(accountRow(userId, upstream, from), eq(upstreamAccounts.state, 'connected')))
    .returning({ userId: upstreamAccounts.userId });
  return marked.length === 1;
}

export async function touchAccount(tx: Tx, userId: number, upstream: string, now: number): Promise<void> {
  await tx.update(upstreamAccounts).set({ lastUsedAt: now }).where(accountRow(userId, upstream));
}

/** Removes a person's account at an upstream, its tokens queued for revocation; returns what it was. */
export async function deleteAccount(tx: Tx, userId: number, upstream: string, now: number): Promise<UpstreamAccount | null> {
  const [gone] = await tx.delete(upstreamAccounts).where(accountRow(userId, upstream)).returning();
  if (!gone) return null;
  await queueRevocations(tx, [gone], now);
  return gone;
}

/** Removes every account of a person (revoke all, user removal), their tokens queued for revocation; returns them. */
export async function deleteAccountsOf(tx: Tx, userId: number, now: number): Promise<UpstreamAccount[]> {
  const accounts = await tx.delete(upstreamAccounts).where(eq(upstreamAccounts.userId, userId)).returning();
  if (accounts.length > 0) await queueRevocations(tx, accounts, now);
  return accounts;
}

export async function findClient(db: Db, upstream: string): Promise<UpstreamClientRow | null> {
  return (await db.select().from(upstreamClients).where(eq(upstreamClients.upstream, upstream)).get()) ?? null;
}

/** svc's registrations that keep a client secret (sealed): what `svc check` and start try to open. */
export async function clientsWithSecrets(db: Db): Promise<Pick<UpstreamClientRow, 'upstream' | 'clientSecretSealed'>[]> {
  return db
    .select({ upstream: upstreamClients.upstream, clientSecretSealed: upstreamClients.clientSecretSealed })
    .from(upstreamClients)
    .where(isNotNull(upstreamClients.clientSecretSealed))
    .all();
}

/**
 * Keeps svc's registration at an upstream's server, and returns the one kept: the first instance to register for
 * this server wins, and every instance uses its client. A row for another server (the upstream's url changed) or
 * another kind of client (svc.ini changed) is replaced, and so is the one `replacing` names (a registration made
 * again because its secret cannot be opened) while it is still kept: once another instance has replaced it, theirs stands.
 */
export async function putClient(
  tx: Tx,
  row: UpstreamClientRow,
  replacing?: Pick<UpstreamClientRow, 'clientId'>,
): Promise<UpstreamClientRow> {
  const kept = await tx.select().from(upstreamClients).where(eq(upstreamClients.upstream, row.upstream)).get();
  // The same server, and the same way of being its client (not a configured client changed in svc.ini since).
  const same =
    kept && kept.server === row.server && kept.kind === row.kind && (row.kind !== 'configured' || kept.clientId === row.clientId);
  if (kept && same && kept.clientId !== replacing?.clientId) return kept;
  if (kept) await tx.delete(upstreamClients).where(eq(upstreamClients.upstream, row.upstream));
  await tx.insert(upstreamClients).values(row);
  return row;
}

/** A connection under way, within the per-person bound (the oldest of theirs goes first), expired ones removed. */
export async function addConnect(tx: Tx, row: UpstreamConnect): Promise<void> {
  await tx.delete(upstreamConnects).where(lt(upstreamConnects.expiresAt, row.createdAt));
  const mine = await tx
    .select({ id: upstreamConnects.id })
    .from(upstreamConnects)
    .where(eq(upstreamConnects.userId, row.userId))
    .orderBy(upstreamConnects.createdAt)
    .all();
  for (const old of mine.slice(0, Math.max(0, mine.length - CONNECTS_PER_PERSON + 1)))
    await tx.delete(upstreamConnects).where(eq(upstreamConnects.id, old.id));
  await tx.insert(upstreamConnects).values(row);
}

/** Takes a connection under way by its id: it is gone afterwards whatever the caller finds (single use). */
export async function takeConnect(tx: Tx, id: string): Promise<UpstreamConnect | null> {
  const [row] = await tx.delete(upstreamConnects).where(eq(upstreamConnects.id, id)).returning();
  return row ?? null;
}

async function queueRevocations(tx: Tx, accounts: readonly UpstreamAccount[], now: number): Promise<void> {
  await tx.insert(upstreamRevocations).values(
    accounts.map((a) => ({
      userId: a.userId,
      upstream: a.upstream,
      server: a.server,
      issuer: a.issuer,
      clientId: a.clientId,
      accessSealed: a.accessSealed,
      refreshSealed: a.refreshSealed,
      queuedAt: now,
      nextAt: now,
    })),
  );
}

/** Every queued revocation's person, upstream and sealed access token: what `svc check` and start try to open. */
export async function queuedRevocations(db: Db): Promise<Pick<UpstreamRevocation, 'userId' | 'upstream' | 'accessSealed'>[]> {
  return db
    .select({ userId: upstreamRevocations.userId, upstream: upstreamRevocations.upstream, accessSealed: upstreamRevocations.accessSealed })
    .from(upstreamRevocations)
    .all();
}

/** Queued revocations whose time has come, oldest first. */
export async function dueRevocations(db: Db, now: number, limit: number): Promise<UpstreamRevocation[]> {
  return db
    .select()
    .from(upstreamRevocations)
    .where(lte(upstreamRevocations.nextAt, now))
    .orderBy(upstreamRevocations.id)
    .limit(limit)
    .all();
}

/** Takes a queued revocation for this instance until `until`, unless another instance took it first. */
export async function claimRevocation(tx: Tx, row: UpstreamRevocation, until: number): Promise<boolean> {
  const claimed = await tx
    .update(upstreamRevocations)
    .set({ nextAt: until })
    .where(and(eq(upstreamRevocations.id, row.id), eq(upstreamRevocations.nextAt, row.nextAt)))
    .returning({ id: upstreamRevocations.id });
  return claimed.length === 1;
}

/** A queued revocation is done (or given up): its sealed tokens are gone. */
export async function dropRevocation(tx: Tx, id: number): Promise<void> {
  await tx.delete(upstreamRevocations).where(eq(upstreamRevocations.id, id));
}

/** A revocation that failed, tried again at `nextAt`. */
export async function postponeRevocation(tx: Tx, id: number, attempts: number, nextAt: number): Promise<void> {
  await tx.update(upstreamRevocations).set({ attempts, nextAt }).where(eq(upstreamRevocations.id, id));
}

/**
 * A version of every person's accounts as a listing decides on them (connected, reconnect, what each connection
 * listed): it changes when one is made, deleted, marked or listed again. What change notifications poll
 * (mcp/changes.ts); never a token.
 */
export async function accountsVersion(db: Db): Promise<string> {
  const row = await db
    .select({
      version: sql<string>`count(*) || ':' || coalesce(sum(${upstreamAccounts.connectedAt}), 0) || ':' || coalesce(sum(${upstreamAccounts.state} = 'connected'), 0) || ':' || coalesce(sum(${upstreamAccounts.listedAt}), 0)`,
    })
    .from(upstreamAccounts)
    .get();
  return String(row?.version ?? '');
}
