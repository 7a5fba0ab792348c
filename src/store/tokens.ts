// Personal access tokens: minted, listed, revoked, and looked up on every bearer request.
import { eq, and, count, desc, gt, isNotNull, isNull, lt, lte, notInArray, or } from 'drizzle-orm';
import type { Database, Db, Tx } from '../db/open.ts';
import { tokens } from '../db/schema.ts';
import { rawPointQuery, rawRemoteQuery } from '../db/raw-query.ts';
import { batchedLookup } from '../db/batched.ts';
import { pageOf, window, type Page, type PageRequest } from './paging.ts';
import { databaseClock } from '../db/clock.ts';
import { mintToken, randomId, storedHash, tokenWellFormed } from '../domain/secrets.ts';
import { conflict, notFound } from '../domain/errors.ts';
import type { User } from './users.ts';
import { storedLabels, formatLabels, type LabelSet } from '../domain/labels.ts';
import { formatScopes, storedScopes, type ScopeSet } from '../domain/scopes.ts';

export type TokenState = 'active' | 'expired' | 'revoked';

export interface TokenInfo {
  readonly id: string;
  readonly name: string;
  /** the label restriction, or null: the owner's whole access */
  readonly restriction: LabelSet | null;
  readonly scopes: ScopeSet;
  readonly createdAt: number;
  readonly expiresAt: number | null;
  readonly lastUsedAt: number | null;
  readonly state: TokenState;
}

/** A token just made: the only time its secret is known. */
export interface CreatedToken {
  readonly id: string;
  readonly token: string;
  readonly name: string;
  readonly createdAt: number;
  readonly expiresAt: number | null;
  /** the label restriction, or null: the owner's whole access */
  readonly restriction: LabelSet | null;
  readonly scopes: ScopeSet;
}

/** last_used_at is written at most this often per token, off the request's critical path. */
export const LAST_USED_GRANULARITY_MS = 60_000;
/** Active personal tokens one user may hold at once. */
export const ACTIVE_TOKENS_MAX = 200;
/** Revoked and expired personal tokens kept per user (the newest); older ones are forgotten at the next mint. */
export const INACTIVE_TOKENS_KEPT = 50;

/**
 * A personal token to make, checked already (requests/tokens.ts), its restriction and scopes judged against the
 * owner by the action that asks.
 */
export interface NewToken {
  readonly name: string;
  /** seconds of lifetime; null: it never expires */
  readonly ttlSeconds: number | null;
  /** null: the owner's whole access */
  readonly restriction: LabelSet | null;
  readonly scopes: ScopeSet;
}

const personalOf = (userId: number) => and(eq(tokens.userId, userId), isNull(tokens.grantId));
const activeAt = (now: number) => and(isNull(tokens.revokedAt), or(isNull(tokens.expiresAt), gt(tokens.expiresAt, now)));

function stateOf(row: { expiresAt: number | null; revokedAt: number | null }, now: number): TokenState {
  if (row.revokedAt !== null) return 'revoked';
  if (row.expiresAt !== null && row.expiresAt <= now) return 'expired';
  return 'active';
}

/**
 * Mints a token. Its times start at `epoch` (callers pass `database.tokenEpoch`), by default the database's clock,
 * not this process's, so a host whose clock is off cannot mint a token that is expired already (or lives longer
 * than asked) for the servers that check it. A user holds at most ACTIVE_TOKENS_MAX active personal tokens.
 */
export async function createToken(tx: Tx, userId: number, token: NewToken, epoch?: number): Promise<CreatedToken> {
  const now = epoch ?? (await databaseClock(tx));
  // Counted in the write transaction, which runs alone on the database: parallel mints cannot pass the cap together.
  const active =
    (
      await tx
        .select({ n: count() })
        .from(tokens)
        .where(and(personalOf(userId), activeAt(now)))
        .get()
    )?.n ?? 0;
  if (active >= ACTIVE_TOKENS_MAX)
    throw conflict(
      `you have ${active} active tokens, the most one user may hold (${ACTIVE_TOKENS_MAX}); revoke some before making another`,
    );
  await forgetInactiveTokens(tx, userId, now);
  const secret = mintToken();
  const id = `tok_${randomId(10)}`;
  const expiresAt = token.ttlSeconds === null ? null : now + token.ttlSeconds * 1000;
  await tx.insert(tokens).values({
    id,
    hash: storedHash(secret),
    userId,
    name: token.name,
    createdAt: now,
    expiresAt,
    labels: token.restriction === null ? null : formatLabels(token.restriction),
    scopes: formatScopes(token.scopes),
  });
  return { id, token: secret, name: token.name, createdAt: now, expiresAt, restriction: token.restriction, scopes: token.scopes };
}

/** Keeps the newest INACTIVE_TOKENS_KEPT revoked or expired personal tokens of a user; older ones go. */
async function forgetInactiveTokens(tx: Tx, userId: number, now: number): Promise<void> {
  const inactive = and(personalOf(userId), or(isNotNull(tokens.revokedAt), lte(tokens.expiresAt, now)));
  const keep = tx
    .select({ id: tokens.id })
    .from(tokens)
    .where(inactive)
    .orderBy(desc(tokens.createdAt), desc(tokens.id))
    .limit(INACTIVE_TOKENS_KEPT);
  await tx.delete(tokens).where(and(inactive, notInArray(tokens.id, keep)));
}

// Personal tokens only: a token issued to an OAuth client carries its grant's restriction, which only a new consent
// may change; to its owner it is as unknown as someone else's token.
const ownPersonal = (userId: number, id: string) => and(eq(tokens.id, id), personalOf(userId));

/** The scopes of one of the user's own personal tokens; someone else's, or an OAuth app's, is not found. */
export async function personalTokenScopes(tx: Tx, userId: number, id: string): Promise<ScopeSet> {
  const current = await tx.select({ scopes: tokens.scopes }).from(tokens).where(ownPersonal(userId, id)).get();
  if (!current) throw notFound('no such token');
  return storedScopes(current.scopes);
}

/** Sets or lifts (null) the restriction of one of the user's own personal tokens. */
export async function setRestriction(
  tx: Tx,
  userId: number,
  id: string,
  restriction: LabelSet | null,
  now = Date.now(),
): Promise<TokenInfo> {
  const rows = await tx
    .update(tokens)
    .set({ labels: restriction === null ? null : formatLabels(restriction) })
    .where(ownPersonal(userId, id))
    .returning();
  if (rows.length === 0) throw notFound('no such token');
  return tokenInfo(rows[0]!, now);
}

function tokenInfo(r: typeof tokens.$inferSelect, now: number): TokenInfo {
  return {
    id: r.id,
    name: r.name,
    restriction: r.labels === null ? null : storedLabels(r.labels),
    scopes: storedScopes(r.scopes),
    createdAt: r.createdAt,
    expiresAt: r.expiresAt,
    lastUsedAt: r.lastUsedAt,
    state: stateOf(r, now),
  };
}

/** One page of the user's personal tokens, newest first. */
export async function listTokens(db: Db, userId: number, request: PageRequest, now = Date.now()): Promise<Page<TokenInfo>> {
  // Personal tokens only: those issued to OAuth clients are listed with their grants ("Connected apps").
  const { limit, offset } = window(request);
  const rows = await db
    .select()
    .from(tokens)
    .where(personalOf(userId))
    .orderBy(desc(tokens.createdAt), desc(tokens.id))
    .limit(limit)
    .offset(offset)
    .all();
  return pageOf(
    rows.map((r) => tokenInfo(r, now)),
    request,
  );
}

/** Revokes one of the user's own tokens; someone else's id is indistinguishable from an unknown one. */
export async function revokeToken(tx: Tx, userId: number, id: string, now = Date.now()): Promise<void> {
  const found = await tx
    .select({ revokedAt: tokens.revokedAt })
    .from(tokens)
    .where(and(eq(tokens.id, id), eq(tokens.userId, userId)))
    .get();
  if (!found) throw notFound('no such token');
  if (found.revokedAt === null) {
    await tx
      .update(tokens)
      .set({ revokedAt: now })
      .where(and(eq(tokens.id, id), isNull(tokens.revokedAt)));
  }
}

export async function revokeAllTokens(tx: Tx, userId: number, now = Date.now()): Promise<number> {
  const rows = await tx
    .update(tokens)
    .set({ revokedAt: now })
    .where(and(eq(tokens.userId, userId), isNull(tokens.revokedAt)))
    .returning({ id: tokens.id });
  return rows.length;
}

export type TokenCheck =
  | {
      ok: true;
      user: User;
      tokenId: string;
      restriction: LabelSet | null;
      scopes: ScopeSet;
      grantId: string | null;
      /** the OAuth client of the grant; null for a personal token */
      clientId: string | null;
      /** whether last_used_at is older than its granularity: the caller stamps it (stampLastUsed), off the request */
      stale: boolean;
    }
  | { ok: false; reason: 'malformed' | 'unknown' | 'expired' | 'revoked' };

interface LookupRow {
  readonly tokenId: string;
  readonly restriction: LabelSet | null;
  readonly expiresAt: number | null;
  readonly revokedAt: number | null;
  readonly lastUsedAt: number | null;
  readonly scopes: ScopeSet;
  /** an OAuth access token's grant, and whether that grant still stands (it is the authority behind the token) */
  readonly grantId: string | null;
  readonly grantRevoked: boolean;
  /** the OAuth client the grant is for; null for a personal token */
  readonly clientId: string | null;
  readonly user: User;
}
type Lookup = (hash: string) => LookupRow | undefined | Promise<LookupRow | undefined>;

const LOOKUP_COLUMNS = `t.id, t.expires_at, t.revoked_at, t.last_used_at,
  u.id, u.uid, u.email, u.name, u.labels, u.admin, u.password_hash IS NOT NULL, u.created_at, u.updated_at, t.labels,
  t.scopes, t.grant_id, t.grant_id IS NOT NULL AND (g.id IS NULL OR g.revoked_at IS NOT NULL), g.client_id, t.hash
  FROM tokens t JOIN users u ON u.id = t.user_id LEFT JOIN oauth_grants g ON g.id = t.grant_id`;
const LOOKUP_SQL = `SELECT ${LOOKUP_COLUMNS} WHERE t.hash = ?`;
/** Many hashes at once (a JSON array): one statement for the bearer requests that arrived together. */
const LOOKUP_MANY_SQL = `SELECT ${LOOKUP_COLUMNS} WHERE t.hash IN (SELECT value FROM json_each(?))`;
/** On a database server: lookup statements on their way at once; on either driver, hashes in one batch at most. */
const LOOKUPS_IN_FLIGHT = 2;
const HASHES_PER_LOOKUP = 200;

/** A row of LOOKUP_COLUMNS, by position. */
function lookupRow(r: ArrayLike<unknown>): LookupRow {
  return {
    tokenId: r[0] as string,
    expiresAt: r[1] as number | null,
    revokedAt: r[2] as number | null,
    lastUsedAt: r[3] as number | null,
    restriction: r[13] === null ? null : storedLabels(r[13] as string),
    scopes: storedScopes(r[14] as string),
    grantId: r[15] as string | null,
    grantRevoked: r[16] === 1,
    clientId: r[17] as string | null,
    user: {
      id: r[4] as number,
      uid: r[5] as string,
      email: r[6] as string,
      name: r[7] as string,
      labels: storedLabels(r[8] as string),
      admin: r[9] === 1,
      hasPassword: r[10] === 1,
      createdAt: r[11] as number,
      updatedAt: r[12] as number,
    },
  };
}

/**
 * The lookup, prepared once, and batched on both drivers (db/batched.ts): the bearer requests that arrived in one
 * turn of the event loop are looked up together in the next, each still read after its request arrived. On a
 * database server they share one statement. On the embedded driver each is a raw point query of microseconds, and
 * batching them pays anyway: the requests then go on together, their answers are written in one turn (on this
 * machine a write to a client that sleeps costs ~100 µs of svc's CPU to wake it) and the same code runs warm for
 * each; under 50 connections that doubled what svc answers (docs/performance.md).
 */
function prepareLookup(db: Db): Lookup {
  const raw = rawPointQuery(db, LOOKUP_SQL);
  if (raw) {
    return batchedLookup(
      async (hashes) => {
        const found = new Map<string, LookupRow>();
        for (const hash of hashes) {
          const r = raw.get(hash);
          if (r) found.set(hash, lookupRow(r));
        }
        return found;
      },
      1,
      HASHES_PER_LOOKUP,
    );
  }
  const rows = rawRemoteQuery(db);
  if (!rows) throw new Error('the bearer lookup needs the embedded driver or a remote read client');
  return batchedLookup(
    async (hashes) => new Map((await rows(LOOKUP_MANY_SQL, [JSON.stringify(hashes)])).map((r) => [r[18] as string, lookupRow(r)])),
    LOOKUPS_IN_FLIGHT,
    HASHES_PER_LOOKUP,
  );
}
const lookups = new WeakMap<Db, Lookup>();

/**
 * The bearer hot path: a format check, one SHA-256 and one indexed lookup, and no write. No cache: revocation is
 * immediate.
 */
export async function checkToken(database: Database, token: string, now = database.now()): Promise<TokenCheck> {
  if (!tokenWellFormed(token)) return { ok: false, reason: 'malformed' };
  const db = database.db;
  let lookup = lookups.get(db);
  if (!lookup) {
    lookup = prepareLookup(db);
    lookups.set(db, lookup);
  }
  const row = await lookup(storedHash(token));
  if (!row) return { ok: false, reason: 'unknown' };
  const state = row.grantRevoked ? 'revoked' : stateOf(row, now);
  if (state !== 'active') return { ok: false, reason: state };
  return {
    ok: true,
    user: row.user,
    tokenId: row.tokenId,
    restriction: row.restriction,
    scopes: row.scopes,
    grantId: row.grantId,
    clientId: row.clientId,
    stale: row.lastUsedAt === null || row.lastUsedAt < now - LAST_USED_GRANULARITY_MS,
  };
}

/** Stamps a token's last_used_at, unless another request stamped it within the granularity already. */
export async function stampLastUsed(tx: Tx, id: string, now: number): Promise<void> {
  await tx
    .update(tokens)
    .set({ lastUsedAt: now })
    .where(and(eq(tokens.id, id), or(isNull(tokens.lastUsedAt), lt(tokens.lastUsedAt, now - LAST_USED_GRANULARITY_MS))));
}
