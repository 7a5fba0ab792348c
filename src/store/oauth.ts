// OAuth records: authorization requests waiting for consent, grants, codes, refresh-token families, and the access
// tokens issued under them (rows of `tokens`, so the bearer lookup treats them like any svc token). A grant is the
// one authority behind its codes and tokens: nothing is issued under a revoked one. Every secret is stored as its
// SHA-256 only. Functions that change data take a Tx: call them inside one write. Clients: oauth-clients.ts.
import { and, desc, eq, gt, isNull, isNotNull, lt, ne, notInArray } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { databaseClock } from '../db/clock.ts';
import { oauthClients, oauthCodes, oauthGrants, oauthRefreshTokens, oauthRequests, tokens, users } from '../db/schema.ts';
import { mintToken, randomId, storedHash } from '../domain/secrets.ts';
import { formatLabels, storedLabels, type LabelSet } from '../domain/labels.ts';
import { pageOf, window, type Page, type PageRequest } from './paging.ts';

/** How a client came to be known: registered by an administrator, self-registered, or by its metadata document. */
export type ClientKind = 'dynamic' | 'metadata' | 'static';

// ---- authorization requests waiting for consent

const REQUEST_TTL_MS = 10 * 60_000;

export interface PendingRequest {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly scope: string;
  readonly state: string | null;
  readonly codeChallenge: string;
  readonly resource: string;
}

/**
 * Requests one person may have waiting for consent at once; opening another forgets their oldest. A waiting
 * request keeps its client from being forgotten (oauth-clients.ts), so without a bound one person could keep every
 * registration out.
 */
export const HELD_REQUESTS_PER_USER = 10;

/** Stores a request for one user's consent; returns the secret the consent form carries. */
export async function holdRequest(tx: Tx, userId: number, request: PendingRequest, now = Date.now()): Promise<string> {
  await tx.delete(oauthRequests).where(lt(oauthRequests.expiresAt, now));
  const newest = tx
    .select({ id: oauthRequests.id })
    .from(oauthRequests)
    .where(eq(oauthRequests.userId, userId))
    .orderBy(desc(oauthRequests.expiresAt), desc(oauthRequests.id))
    .limit(HELD_REQUESTS_PER_USER - 1);
  await tx.delete(oauthRequests).where(and(eq(oauthRequests.userId, userId), notInArray(oauthRequests.id, newest)));
  const secret = randomId(20);
  await tx.insert(oauthRequests).values({ id: storedHash(secret), userId, ...request, expiresAt: now + REQUEST_TTL_MS });
  return secret;
}

/** Takes a held request out (single use); null when unknown, someone else's, or expired. */
export async function takeRequest(tx: Tx, secret: string, userId: number, now = Date.now()): Promise<PendingRequest | null> {
  const rows = await tx
    .delete(oauthRequests)
    .where(and(eq(oauthRequests.id, storedHash(secret)), eq(oauthRequests.userId, userId)))
    .returning();
  const row = rows[0];
  if (!row || row.expiresAt <= now) return null;
  return {
    clientId: row.clientId,
    redirectUri: row.redirectUri,
    scope: row.scope,
    state: row.state,
    codeChallenge: row.codeChallenge,
    resource: row.resource,
  };
}

// ---- grants

export interface Grant {
  readonly id: string;
  readonly userId: number;
  readonly clientId: string;
  readonly scope: string;
  readonly redirectUris: readonly string[];
  /** the label restriction chosen at consent; null: the user's whole access */
  readonly restriction: LabelSet | null;
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
  readonly revokedAt: number | null;
}

function toGrant(r: typeof oauthGrants.$inferSelect): Grant {
  const { labels, ...rest } = r;
  return { ...rest, redirectUris: JSON.parse(r.redirectUris) as string[], restriction: labels === null ? null : storedLabels(labels) };
}

/** The user's standing grant to this client, if it is not revoked. */
export async function activeGrant(db: Db, userId: number, clientId: string): Promise<Grant | null> {
  const row = await db
    .select()
    .from(oauthGrants)
    .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId), isNull(oauthGrants.revokedAt)))
    .get();
  return row ? toGrant(row) : null;
}

/**
 * Records consent: a new grant, or the standing one widened to this scope and redirect URI. The label restriction
 * is the one just chosen, for the tokens issued from now on.
 */
export async function consent(
  tx: Tx,
  userId: number,
  clientId: string,
  scope: string,
  redirectUri: string,
  restriction: LabelSet | null,
  now = Date.now(),
): Promise<Grant> {
  const stored = restriction === null ? null : formatLabels(restriction);
  const existing = await tx
    .select()
    .from(oauthGrants)
    .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId)))
    .get();
  if (existing && existing.revokedAt === null) {
    const uris = [...new Set([...(JSON.parse(existing.redirectUris) as string[]), redirectUri])];
    const scopes = [...new Set([...existing.scope.split(' '), ...scope.split(' ')].filter((s) => s !== ''))].sort().join(' ');
    const rows = await tx
      .update(oauthGrants)
      .set({ scope: scopes, redirectUris: JSON.stringify(uris), labels: stored })
      .where(eq(oauthGrants.id, existing.id))
      .returning();
    return toGrant(rows[0]!);
  }
  // A revoked grant is replaced: consenting again starts afresh.
  if (existing) await tx.delete(oauthGrants).where(eq(oauthGrants.id, existing.id));
  const rows = await tx
    .insert(oauthGrants)
    .values({
      id: `gr_${randomId(12)}`,
      userId,
      clientId,
      scope,
      redirectUris: JSON.stringify([redirectUri]),
      labels: stored,
      createdAt: now,
    })
    .returning();
  return toGrant(rows[0]!);
}

export interface GrantListing extends Grant {
  readonly clientName: string;
  readonly clientKind: ClientKind | null;
}

/** One page of the user's standing grants ("Connected apps"), newest first. */
export async function listGrants(db: Db, userId: number, request: PageRequest): Promise<Page<GrantListing>> {
  const { limit, offset } = window(request);
  const rows = await db
    .select({ g: oauthGrants, name: oauthClients.name, kind: oauthClients.kind })
    .from(oauthGrants)
    .leftJoin(oauthClients, eq(oauthClients.id, oauthGrants.clientId))
    .where(and(eq(oauthGrants.userId, userId), isNull(oauthGrants.revokedAt)))
    .orderBy(desc(oauthGrants.createdAt), desc(oauthGrants.id))
    .limit(limit)
    .offset(offset)
    .all();
  return pageOf(
    rows.map((r) => ({ ...toGrant(r.g), clientName: r.name ?? r.g.clientId, clientKind: (r.kind as ClientKind | null) ?? null })),
    request,
  );
}

/** Ends a grant and everything issued under it: refresh families and access tokens, at once. */
export async function endGrant(tx: Tx, grantId: string, now = Date.now()): Promise<void> {
  await tx
    .update(oauthGrants)
    .set({ revokedAt: now })
    .where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt)));
  await tx
    .update(oauthRefreshTokens)
    .set({ revokedAt: now })
    .where(and(eq(oauthRefreshTokens.grantId, grantId), isNull(oauthRefreshTokens.revokedAt)));
  await tx
    .update(tokens)
    .set({ revokedAt: now })
    .where(and(eq(tokens.grantId, grantId), isNull(tokens.revokedAt)));
}

/** Ends every grant of a user (an admin revoking all of their tokens); returns how many. */
export async function endUserGrants(tx: Tx, userId: number, now = Date.now()): Promise<number> {
  const grants = await tx
    .select({ id: oauthGrants.id })
    .from(oauthGrants)
    .where(and(eq(oauthGrants.userId, userId), isNull(oauthGrants.revokedAt)))
    .all();
  for (const g of grants) await endGrant(tx, g.id, now);
  return grants.length;
}

/** Revokes one of the user's own grants; someone else's is not found (false). */
export async function revokeGrant(tx: Tx, userId: number, grantId: string): Promise<boolean> {
  const grant = await tx
    .select({ id: oauthGrants.id })
    .from(oauthGrants)
    .where(and(eq(oauthGrants.id, grantId), eq(oauthGrants.userId, userId), isNull(oauthGrants.revokedAt)))
    .get();
  if (!grant) return false;
  await endGrant(tx, grant.id);
  return true;
}

// ---- codes

const CODE_TTL_MS = 10 * 60_000;

export async function issueCode(tx: Tx, grant: Grant, request: PendingRequest, now = Date.now()): Promise<string> {
  const code = randomId(20);
  await tx.insert(oauthCodes).values({
    id: storedHash(code),
    grantId: grant.id,
    clientId: request.clientId,
    redirectUri: request.redirectUri,
    codeChallenge: request.codeChallenge,
    resource: request.resource,
    scope: request.scope,
    expiresAt: now + CODE_TTL_MS,
  });
  return code;
}

export interface CodeRedemption {
  readonly clientId: string;
  readonly redirectUri: string | undefined;
  readonly verifierMatches: (challenge: string) => boolean;
  /** the resource the token request names, if any */
  readonly resource: string | undefined;
  readonly familyId: string;
}

export type CodeUse =
  | { readonly ok: true; readonly grantId: string; readonly resource: string; readonly scope: string }
  | {
      readonly ok: false;
      readonly why: 'unknown' | 'expired' | 'reused' | 'other_client' | 'revoked' | 'redirect_uri' | 'verifier' | 'resource';
    };

/**
 * Redeems a code once. Everything is checked before it is used up (client, expiry, grant, redirect URI, PKCE,
 * resource), so a request that fails leaves it to the one that holds it; a second use revokes what the first
 * one issued.
 */
export async function useCode(tx: Tx, code: string, redemption: CodeRedemption, now = Date.now()): Promise<CodeUse> {
  const row = await tx
    .select()
    .from(oauthCodes)
    .where(eq(oauthCodes.id, storedHash(code)))
    .get();
  if (!row) return { ok: false, why: 'unknown' };
  if (row.clientId !== redemption.clientId) return { ok: false, why: 'other_client' };
  if (row.usedAt !== null) {
    if (row.familyId) await revokeFamily(tx, row.familyId, now);
    return { ok: false, why: 'reused' };
  }
  if (row.expiresAt <= now) return { ok: false, why: 'expired' };
  if (!(await grantIsActive(tx, row.grantId))) return { ok: false, why: 'revoked' };
  if (redemption.redirectUri !== row.redirectUri) return { ok: false, why: 'redirect_uri' };
  if (!redemption.verifierMatches(row.codeChallenge)) return { ok: false, why: 'verifier' };
  if (redemption.resource !== undefined && redemption.resource !== row.resource) return { ok: false, why: 'resource' };
  const used = await tx
    .update(oauthCodes)
    .set({ usedAt: now, familyId: redemption.familyId })
    .where(and(eq(oauthCodes.id, row.id), isNull(oauthCodes.usedAt)))
    .returning({ id: oauthCodes.id });
  if (used.length === 0) return { ok: false, why: 'reused' };
  return { ok: true, grantId: row.grantId, resource: row.resource, scope: row.scope };
}

async function grantIsActive(tx: Tx, grantId: string): Promise<boolean> {
  const grant = await tx.select({ revokedAt: oauthGrants.revokedAt }).from(oauthGrants).where(eq(oauthGrants.id, grantId)).get();
  return grant !== undefined && grant.revokedAt === null;
}

// ---- tokens: an access token (a row of `tokens`) and a refresh token of one family

export interface Issued {
  readonly accessToken: string;
  readonly refreshToken: string;
  readonly expiresIn: number;
  readonly scope: string;
}

const REFRESH_PREFIX = 'svcr_';

export async function issueTokens(
  tx: Tx,
  grantId: string,
  family: { id: string; clientId: string; clientName: string; resource: string; scope: string; parentId?: string },
  ttl: { accessSeconds: number; refreshSeconds: number },
  epoch?: number,
): Promise<Issued> {
  const now = epoch ?? (await databaseClock(tx));
  const grant = await tx.select().from(oauthGrants).where(eq(oauthGrants.id, grantId)).get();
  // Callers check the grant first; this is the last line, so a revoked grant never yields a live token row.
  if (!grant || grant.revokedAt !== null) throw new Error('svc: tokens asked for under a revoked grant');
  const accessToken = mintToken();
  // The access token carries the grant's label restriction, as a personal token carries its own.
  await tx.insert(tokens).values({
    id: `tok_${randomId(10)}`,
    hash: storedHash(accessToken),
    userId: grant.userId,
    name: family.clientName.slice(0, 100),
    createdAt: now,
    expiresAt: now + ttl.accessSeconds * 1000,
    grantId,
    familyId: family.id,
    labels: grant.labels,
  });
  const refreshToken = `${REFRESH_PREFIX}${randomId(30)}`;
  await tx.insert(oauthRefreshTokens).values({
    id: storedHash(refreshToken),
    familyId: family.id,
    parentId: family.parentId ?? null,
    grantId,
    clientId: family.clientId,
    resource: family.resource,
    scope: family.scope,
    createdAt: now,
    expiresAt: now + ttl.refreshSeconds * 1000,
  });
  await tx.update(oauthGrants).set({ lastUsedAt: now }).where(eq(oauthGrants.id, grantId));
  await tx.update(oauthClients).set({ lastUsedAt: now }).where(eq(oauthClients.id, family.clientId));
  return { accessToken, refreshToken, expiresIn: ttl.accessSeconds, scope: family.scope };
}

export async function revokeFamily(tx: Tx, familyId: string, now = Date.now()): Promise<void> {
  await tx
    .update(oauthRefreshTokens)
    .set({ revokedAt: now })
    .where(and(eq(oauthRefreshTokens.familyId, familyId), isNull(oauthRefreshTokens.revokedAt)));
  await tx
    .update(tokens)
    .set({ revokedAt: now })
    .where(and(eq(tokens.familyId, familyId), isNull(tokens.revokedAt)));
}

export type RefreshUse =
  | {
      readonly ok: true;
      readonly grantId: string;
      readonly familyId: string;
      readonly tokenId: string;
      readonly resource: string;
      readonly scope: string;
    }
  | { readonly ok: false; readonly why: 'unknown' | 'revoked' | 'expired' | 'reused' | 'other_client' | 'resource' };

/**
 * Uses a refresh token for rotation. A rotated token still works once within `graceSeconds` (clients that refresh
 * from several processes at once), which gives it a second successor; any other reuse, or the use of both
 * successors of one token (a family that forked), revokes the whole family.
 */
export async function useRefresh(
  tx: Tx,
  token: string,
  use: { clientId: string; resource: string | undefined; graceSeconds: number },
  now = Date.now(),
): Promise<RefreshUse> {
  const { clientId, graceSeconds } = use;
  if (!token.startsWith(REFRESH_PREFIX)) return { ok: false, why: 'unknown' };
  const row = await tx
    .select()
    .from(oauthRefreshTokens)
    .where(eq(oauthRefreshTokens.id, storedHash(token)))
    .get();
  if (!row) return { ok: false, why: 'unknown' };
  if (row.clientId !== clientId) return { ok: false, why: 'other_client' };
  if (row.revokedAt !== null || !(await grantIsActive(tx, row.grantId))) return { ok: false, why: 'revoked' };
  if (row.expiresAt <= now) return { ok: false, why: 'expired' };
  if (use.resource !== undefined && use.resource !== row.resource) return { ok: false, why: 'resource' };
  const reused = async (): Promise<RefreshUse> => {
    await revokeFamily(tx, row.familyId, now);
    return { ok: false, why: 'reused' };
  };
  if (row.rotatedAt !== null) {
    if (row.graceUsedAt !== null || now - row.rotatedAt > graceSeconds * 1000) return reused();
    await tx.update(oauthRefreshTokens).set({ graceUsedAt: now }).where(eq(oauthRefreshTokens.id, row.id));
  } else {
    if (row.parentId !== null) {
      const sibling = await tx
        .select({ id: oauthRefreshTokens.id })
        .from(oauthRefreshTokens)
        .where(
          and(eq(oauthRefreshTokens.parentId, row.parentId), ne(oauthRefreshTokens.id, row.id), isNotNull(oauthRefreshTokens.rotatedAt)),
        )
        .get();
      if (sibling) return reused();
    }
    await tx.update(oauthRefreshTokens).set({ rotatedAt: now }).where(eq(oauthRefreshTokens.id, row.id));
  }
  return { ok: true, grantId: row.grantId, familyId: row.familyId, tokenId: row.id, resource: row.resource, scope: row.scope };
}

/**
 * RFC 7009: a refresh token ends its family, and a grant left with no live family and no code waiting to be
 * redeemed ends too (the app signed itself out: it leaves Connected apps, with its access tokens). An access token of
 * this client ends itself. Unknown: nothing. Returns the grant that ended, if one did.
 */
export async function revokeOauthToken(
  tx: Tx,
  token: string,
  clientId: string,
  now = Date.now(),
): Promise<{ grantId: string; uid: string } | null> {
  if (token.startsWith(REFRESH_PREFIX)) {
    const row = await tx
      .select()
      .from(oauthRefreshTokens)
      .where(eq(oauthRefreshTokens.id, storedHash(token)))
      .get();
    if (!row || row.clientId !== clientId) return null;
    await revokeFamily(tx, row.familyId, now);
    const grant = await tx
      .select({ uid: users.uid, userId: users.id })
      .from(oauthGrants)
      .innerJoin(users, eq(users.id, oauthGrants.userId))
      .where(and(eq(oauthGrants.id, row.grantId), isNull(oauthGrants.revokedAt)))
      .get();
    if (!grant || (await grantInUse(tx, row.grantId, grant.userId, now))) return null;
    await endGrant(tx, row.grantId, now);
    return { grantId: row.grantId, uid: grant.uid };
  }
  const access = await tx
    .select({ id: tokens.id })
    .from(tokens)
    .innerJoin(oauthGrants, eq(oauthGrants.id, tokens.grantId))
    .where(and(eq(tokens.hash, storedHash(token)), eq(oauthGrants.clientId, clientId)))
    .get();
  if (access)
    await tx
      .update(tokens)
      .set({ revokedAt: now })
      .where(and(eq(tokens.id, access.id), isNull(tokens.revokedAt)));
  return null;
}

/**
 * A grant is in use while a refresh token of it lives, a code issued under it waits to be redeemed, or it stands
 * behind enterprise assertions (tokens with no refresh family): those clients have no browser in which to consent
 * again, so one installation's sign-out must not end the grant for every other.
 */
async function grantInUse(tx: Tx, grantId: string, userId: number, now: number): Promise<boolean> {
  const assertion = await tx
    .select({ id: tokens.id })
    .from(tokens)
    .where(and(eq(tokens.userId, userId), eq(tokens.grantId, grantId), isNull(tokens.familyId)))
    .limit(1)
    .get();
  if (assertion) return true;
  const refresh = await tx
    .select({ id: oauthRefreshTokens.id })
    .from(oauthRefreshTokens)
    .where(and(eq(oauthRefreshTokens.grantId, grantId), isNull(oauthRefreshTokens.revokedAt), gt(oauthRefreshTokens.expiresAt, now)))
    .limit(1)
    .get();
  if (refresh) return true;
  const code = await tx
    .select({ id: oauthCodes.id })
    .from(oauthCodes)
    .where(and(eq(oauthCodes.grantId, grantId), isNull(oauthCodes.usedAt), gt(oauthCodes.expiresAt, now)))
    .limit(1)
    .get();
  return code !== undefined;
}
