// OAuth records: clients, authorization requests waiting for consent, grants, codes, refresh-token families, and
// the access tokens issued under them (rows of `tokens`, so the bearer lookup treats them like any svc token).
// Every secret is stored as its SHA-256 only. Functions that change data take a Tx: call them inside one write.
import { and, asc, desc, eq, isNull, lt } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { oauthClients, oauthCodes, oauthGrants, oauthRefreshTokens, oauthRequests, tokens } from '../db/schema.ts';
import { mintToken, randomId, storedHash } from '../domain/secrets.ts';
import { databaseNow } from './tokens.ts';
import { formatLabels, storedLabels, type LabelSet } from '../domain/labels.ts';

export type ClientKind = 'dynamic' | 'metadata' | 'static';
export type AuthMethod = 'none' | 'client_secret_post' | 'client_secret_basic';

export interface OauthClient {
  readonly id: string;
  readonly kind: ClientKind;
  readonly name: string;
  readonly redirectUris: readonly string[];
  readonly authMethod: AuthMethod;
  readonly secretHash: string | null;
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
  /** metadata-document clients: when the cached copy must be fetched again */
  readonly refreshAt: number | null;
}

function toClient(r: typeof oauthClients.$inferSelect): OauthClient {
  return {
    id: r.id, kind: r.kind as ClientKind, name: r.name, redirectUris: JSON.parse(r.redirectUris) as string[],
    authMethod: r.authMethod as AuthMethod, secretHash: r.secretHash, createdAt: r.createdAt, lastUsedAt: r.lastUsedAt, refreshAt: r.refreshAt,
  };
}

/** Stores (or refreshes) the copy of a client's metadata document. */
export async function saveMetadataClient(
  tx: Tx,
  url: string,
  meta: { name: string; redirectUris: readonly string[]; maxAgeSeconds: number },
  now = Date.now(),
): Promise<OauthClient> {
  const values = { name: meta.name, redirectUris: JSON.stringify(meta.redirectUris), refreshAt: now + meta.maxAgeSeconds * 1000 };
  const rows = await tx
    .insert(oauthClients)
    .values({ id: url, kind: 'metadata', authMethod: 'none', createdAt: now, ...values })
    .onConflictDoUpdate({ target: oauthClients.id, set: values })
    .returning();
  return toClient(rows[0]!);
}

export async function getClient(db: Db, id: string): Promise<OauthClient | null> {
  const row = await db.select().from(oauthClients).where(eq(oauthClients.id, id)).get();
  return row ? toClient(row) : null;
}

/** A dynamically registered client never used within a day is forgotten. */
export const UNUSED_CLIENT_MS = 86_400_000;

export async function registerClient(
  tx: Tx,
  input: { id?: string; kind: ClientKind; name: string; redirectUris: readonly string[]; authMethod: AuthMethod; secret: string | null },
  now = Date.now(),
): Promise<OauthClient> {
  await tx.delete(oauthClients).where(and(eq(oauthClients.kind, 'dynamic'), isNull(oauthClients.lastUsedAt), lt(oauthClients.createdAt, now - UNUSED_CLIENT_MS)));
  const row = {
    id: input.id ?? `oc_${randomId(15)}`, kind: input.kind, name: input.name, redirectUris: JSON.stringify(input.redirectUris),
    authMethod: input.authMethod, secretHash: input.secret === null ? null : storedHash(input.secret), createdAt: now,
  };
  await tx.insert(oauthClients).values(row);
  return toClient({ ...row, lastUsedAt: null, refreshAt: null });
}

export async function listClients(db: Db): Promise<OauthClient[]> {
  return (await db.select().from(oauthClients).orderBy(asc(oauthClients.createdAt)).all()).map(toClient);
}

export async function removeClient(tx: Tx, id: string): Promise<boolean> {
  const rows = await tx.delete(oauthClients).where(eq(oauthClients.id, id)).returning({ id: oauthClients.id });
  if (rows.length === 0) return false;
  for (const g of await tx.select({ id: oauthGrants.id }).from(oauthGrants).where(eq(oauthGrants.clientId, id)).all()) await endGrant(tx, g.id);
  return true;
}

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

/** Stores a request for one user's consent; returns the secret the consent form carries. */
export async function holdRequest(tx: Tx, userId: number, request: PendingRequest, now = Date.now()): Promise<string> {
  await tx.delete(oauthRequests).where(lt(oauthRequests.expiresAt, now));
  const secret = randomId(20);
  await tx.insert(oauthRequests).values({ id: storedHash(secret), userId, ...request, expiresAt: now + REQUEST_TTL_MS });
  return secret;
}

/** Takes a held request out (single use); null when unknown, someone else's, or expired. */
export async function takeRequest(tx: Tx, secret: string, userId: number, now = Date.now()): Promise<PendingRequest | null> {
  const rows = await tx.delete(oauthRequests).where(and(eq(oauthRequests.id, storedHash(secret)), eq(oauthRequests.userId, userId))).returning();
  const row = rows[0];
  if (!row || row.expiresAt <= now) return null;
  return { clientId: row.clientId, redirectUri: row.redirectUri, scope: row.scope, state: row.state, codeChallenge: row.codeChallenge, resource: row.resource };
}

// ---- grants

export interface Grant {
  readonly id: string;
  readonly userId: number;
  readonly clientId: string;
  readonly scope: string;
  readonly redirectUris: readonly string[];
  /** the label restriction chosen at consent; null: the user's whole access */
  readonly labels: LabelSet | null;
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
  readonly revokedAt: number | null;
}

function toGrant(r: typeof oauthGrants.$inferSelect): Grant {
  return { ...r, redirectUris: JSON.parse(r.redirectUris) as string[], labels: r.labels === null ? null : storedLabels(r.labels) };
}

/** The user's standing grant to this client, if it is not revoked. */
export async function activeGrant(db: Db, userId: number, clientId: string): Promise<Grant | null> {
  const row = await db.select().from(oauthGrants).where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId), isNull(oauthGrants.revokedAt))).get();
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
  labels: LabelSet | null,
  now = Date.now(),
): Promise<Grant> {
  const restriction = labels === null ? null : formatLabels(labels);
  const existing = await tx.select().from(oauthGrants).where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId))).get();
  if (existing && existing.revokedAt === null) {
    const uris = [...new Set([...(JSON.parse(existing.redirectUris) as string[]), redirectUri])];
    const scopes = [...new Set([...existing.scope.split(' '), ...scope.split(' ')].filter((s) => s !== ''))].sort().join(' ');
    const rows = await tx.update(oauthGrants).set({ scope: scopes, redirectUris: JSON.stringify(uris), labels: restriction }).where(eq(oauthGrants.id, existing.id)).returning();
    return toGrant(rows[0]!);
  }
  // A revoked grant is replaced: consenting again starts afresh.
  if (existing) await tx.delete(oauthGrants).where(eq(oauthGrants.id, existing.id));
  const rows = await tx.insert(oauthGrants).values({ id: `gr_${randomId(12)}`, userId, clientId, scope, redirectUris: JSON.stringify([redirectUri]), labels: restriction, createdAt: now }).returning();
  return toGrant(rows[0]!);
}

export interface GrantListing extends Grant {
  readonly clientName: string;
  readonly clientKind: ClientKind | null;
}

export async function listGrants(db: Db, userId: number): Promise<GrantListing[]> {
  const rows = await db
    .select({ g: oauthGrants, name: oauthClients.name, kind: oauthClients.kind })
    .from(oauthGrants)
    .leftJoin(oauthClients, eq(oauthClients.id, oauthGrants.clientId))
    .where(and(eq(oauthGrants.userId, userId), isNull(oauthGrants.revokedAt)))
    .orderBy(desc(oauthGrants.createdAt))
    .all();
  return rows.map((r) => ({ ...toGrant(r.g), clientName: r.name ?? r.g.clientId, clientKind: (r.kind as ClientKind | null) ?? null }));
}

/** Ends a grant and everything issued under it: refresh families and access tokens, at once. */
async function endGrant(tx: Tx, grantId: string, now = Date.now()): Promise<void> {
  await tx.update(oauthGrants).set({ revokedAt: now }).where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt)));
  await tx.update(oauthRefreshTokens).set({ revokedAt: now }).where(and(eq(oauthRefreshTokens.grantId, grantId), isNull(oauthRefreshTokens.revokedAt)));
  await tx.update(tokens).set({ revokedAt: now }).where(and(eq(tokens.grantId, grantId), isNull(tokens.revokedAt)));
}

/** Revokes one of the user's own grants; someone else's is not found (false). */
export async function revokeGrant(tx: Tx, userId: number, grantId: string): Promise<boolean> {
  const grant = await tx.select({ id: oauthGrants.id }).from(oauthGrants).where(and(eq(oauthGrants.id, grantId), eq(oauthGrants.userId, userId), isNull(oauthGrants.revokedAt))).get();
  if (!grant) return false;
  await endGrant(tx, grant.id);
  return true;
}

// ---- codes

const CODE_TTL_MS = 10 * 60_000;

export async function issueCode(tx: Tx, grant: Grant, request: PendingRequest, now = Date.now()): Promise<string> {
  const code = randomId(20);
  await tx.insert(oauthCodes).values({
    id: storedHash(code), grantId: grant.id, clientId: request.clientId, redirectUri: request.redirectUri,
    codeChallenge: request.codeChallenge, resource: request.resource, scope: request.scope, expiresAt: now + CODE_TTL_MS,
  });
  return code;
}

export type CodeUse =
  | { readonly ok: true; readonly grantId: string; readonly redirectUri: string; readonly codeChallenge: string; readonly resource: string; readonly scope: string; readonly clientId: string }
  | { readonly ok: false; readonly why: 'unknown' | 'expired' | 'reused' | 'other_client' };

/** Uses a code once. A second use revokes what the first one issued; another client's code is not touched. */
export async function useCode(tx: Tx, code: string, clientId: string, familyId: string, now = Date.now()): Promise<CodeUse> {
  const row = await tx.select().from(oauthCodes).where(eq(oauthCodes.id, storedHash(code))).get();
  if (!row) return { ok: false, why: 'unknown' };
  if (row.clientId !== clientId) return { ok: false, why: 'other_client' };
  if (row.usedAt !== null) {
    if (row.familyId) await revokeFamily(tx, row.familyId, now);
    return { ok: false, why: 'reused' };
  }
  if (row.expiresAt <= now) return { ok: false, why: 'expired' };
  await tx.update(oauthCodes).set({ usedAt: now, familyId }).where(eq(oauthCodes.id, row.id));
  return { ok: true, grantId: row.grantId, redirectUri: row.redirectUri, codeChallenge: row.codeChallenge, resource: row.resource, scope: row.scope, clientId: row.clientId };
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
  family: { id: string; clientId: string; clientName: string; resource: string; scope: string },
  ttl: { accessSeconds: number; refreshSeconds: number },
): Promise<Issued> {
  const now = await databaseNow(tx);
  const grant = (await tx.select().from(oauthGrants).where(eq(oauthGrants.id, grantId)).get())!;
  const accessToken = mintToken();
  // The access token carries the grant's label restriction, as a personal token carries its own.
  await tx.insert(tokens).values({
    id: `tok_${randomId(10)}`, hash: storedHash(accessToken), userId: grant.userId, name: family.clientName.slice(0, 100),
    createdAt: now, expiresAt: now + ttl.accessSeconds * 1000, grantId, familyId: family.id, labels: grant.labels,
  });
  const refreshToken = `${REFRESH_PREFIX}${randomId(30)}`;
  await tx.insert(oauthRefreshTokens).values({
    id: storedHash(refreshToken), familyId: family.id, grantId, clientId: family.clientId, resource: family.resource, scope: family.scope,
    createdAt: now, expiresAt: now + ttl.refreshSeconds * 1000,
  });
  await tx.update(oauthGrants).set({ lastUsedAt: now }).where(eq(oauthGrants.id, grantId));
  await tx.update(oauthClients).set({ lastUsedAt: now }).where(eq(oauthClients.id, family.clientId));
  return { accessToken, refreshToken, expiresIn: ttl.accessSeconds, scope: family.scope };
}

export async function revokeFamily(tx: Tx, familyId: string, now = Date.now()): Promise<void> {
  await tx.update(oauthRefreshTokens).set({ revokedAt: now }).where(and(eq(oauthRefreshTokens.familyId, familyId), isNull(oauthRefreshTokens.revokedAt)));
  await tx.update(tokens).set({ revokedAt: now }).where(and(eq(tokens.familyId, familyId), isNull(tokens.revokedAt)));
}

export type RefreshUse =
  | { readonly ok: true; readonly grantId: string; readonly familyId: string; readonly clientId: string; readonly resource: string; readonly scope: string }
  | { readonly ok: false; readonly why: 'unknown' | 'revoked' | 'expired' | 'reused' | 'other_client' };

/**
 * Uses a refresh token for rotation. A rotated token still works once within `graceSeconds` (clients that refresh
 * from several processes at once); any other reuse revokes the whole family.
 */
export async function useRefresh(tx: Tx, token: string, clientId: string, graceSeconds: number, now = Date.now()): Promise<RefreshUse> {
  if (!token.startsWith(REFRESH_PREFIX)) return { ok: false, why: 'unknown' };
  const row = await tx.select().from(oauthRefreshTokens).where(eq(oauthRefreshTokens.id, storedHash(token))).get();
  if (!row) return { ok: false, why: 'unknown' };
  if (row.clientId !== clientId) return { ok: false, why: 'other_client' };
  const grant = await tx.select({ revokedAt: oauthGrants.revokedAt }).from(oauthGrants).where(eq(oauthGrants.id, row.grantId)).get();
  if (row.revokedAt !== null || !grant || grant.revokedAt !== null) return { ok: false, why: 'revoked' };
  if (row.expiresAt <= now) return { ok: false, why: 'expired' };
  if (row.rotatedAt !== null) {
    if (row.graceUsedAt === null && now - row.rotatedAt <= graceSeconds * 1000) {
      await tx.update(oauthRefreshTokens).set({ graceUsedAt: now }).where(eq(oauthRefreshTokens.id, row.id));
    } else {
      await revokeFamily(tx, row.familyId, now);
      return { ok: false, why: 'reused' };
    }
  } else {
    await tx.update(oauthRefreshTokens).set({ rotatedAt: now }).where(eq(oauthRefreshTokens.id, row.id));
  }
  return { ok: true, grantId: row.grantId, familyId: row.familyId, clientId: row.clientId, resource: row.resource, scope: row.scope };
}

/** RFC 7009: a refresh token ends its family; an access token of this client ends itself. Unknown: nothing. */
export async function revokeOauthToken(tx: Tx, token: string, clientId: string, now = Date.now()): Promise<void> {
  if (token.startsWith(REFRESH_PREFIX)) {
    const row = await tx.select().from(oauthRefreshTokens).where(eq(oauthRefreshTokens.id, storedHash(token))).get();
    if (row && row.clientId === clientId) await revokeFamily(tx, row.familyId, now);
    return;
  }
  const access = await tx
    .select({ id: tokens.id })
    .from(tokens)
    .innerJoin(oauthGrants, eq(oauthGrants.id, tokens.grantId))
    .where(and(eq(tokens.hash, storedHash(token)), eq(oauthGrants.clientId, clientId)))
    .get();
  if (access) await tx.update(tokens).set({ revokedAt: now }).where(and(eq(tokens.id, access.id), isNull(tokens.revokedAt)));
}
