// OAuth clients: registered dynamically (RFC 7591), known by a metadata document URL, or added by an admin. A
// client secret is stored as its SHA-256 only. Functions that change data take a Tx: call them inside one write.
import { and, asc, count, eq, gt, isNull, lt, lte, min, not, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { oauthClients, oauthCodes, oauthGrants, oauthRequests } from '../db/schema.ts';
import { randomId, storedHash } from '../domain/secrets.ts';
import { AppError } from '../domain/errors.ts';
import { endGrant, type ClientKind } from './oauth.ts';

export type { ClientKind };
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
    id: r.id,
    kind: r.kind as ClientKind,
    name: r.name,
    redirectUris: JSON.parse(r.redirectUris) as string[],
    authMethod: r.authMethod as AuthMethod,
    secretHash: r.secretHash,
    createdAt: r.createdAt,
    lastUsedAt: r.lastUsedAt,
    refreshAt: r.refreshAt,
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

/**
 * Dynamically registered clients that never completed a grant, kept at most: claude.ai registers anew on every
 * fresh connection, so many are abandoned; past this number the oldest are forgotten first.
 */
export const MAX_UNUSED_CLIENTS = 1000;

/**
 * A client this young may be in its first sign-in: the person signing in, before svc holds their authorization
 * request. Such a client is never forgotten to make room, nor is one with a request waiting for consent or a standing
 * grant (whose code may not be redeemed yet): a flood of registrations cannot break a sign-in in progress.
 */
export const AUTHORIZATION_WINDOW_MS = 10 * 60_000;
/** Never-used clients past a day forgotten by one registration at most, so no registration does unbounded work. */
const FORGET_BATCH = 50;

const neverUsed = () => and(eq(oauthClients.kind, 'dynamic'), isNull(oauthClients.lastUsedAt));
const standingGrant = sql`EXISTS (SELECT 1 FROM ${oauthGrants} WHERE ${oauthGrants.clientId} = ${oauthClients.id} AND ${oauthGrants.revokedAt} IS NULL)`;
/** Never used and no standing grant: what the cap counts. */
const unusedClients = () => and(neverUsed(), not(standingGrant));
const awaitingConsent = (now: number) =>
  sql`EXISTS (SELECT 1 FROM ${oauthRequests} WHERE ${oauthRequests.clientId} = ${oauthClients.id} AND ${oauthRequests.expiresAt} > ${now})`;
const codeWaiting = (now: number) =>
  sql`EXISTS (SELECT 1 FROM ${oauthGrants} JOIN ${oauthCodes} ON ${oauthCodes.grantId} = ${oauthGrants.id}
    WHERE ${oauthGrants.clientId} = ${oauthClients.id} AND ${oauthCodes.usedAt} IS NULL AND ${oauthCodes.expiresAt} > ${now})`;

/**
 * Forgets never-used dynamic clients older than a day that wait for no consent and no code (ending a grant one of
 * them was given but never used), a batch at a time; then, to make room for one more under the cap, the oldest
 * unused ones past the authorization window and not waiting for consent. Throws too_many_requests, with the seconds
 * until the next one leaves the window, when none is left.
 */
async function makeRoomForClient(tx: Tx, now: number): Promise<void> {
  const stale = await tx
    .select({ id: oauthClients.id })
    .from(oauthClients)
    .where(and(neverUsed(), lt(oauthClients.createdAt, now - UNUSED_CLIENT_MS), not(awaitingConsent(now)), not(codeWaiting(now))))
    .orderBy(asc(oauthClients.createdAt))
    .limit(FORGET_BATCH)
    .all();
  for (const client of stale) await removeClient(tx, client.id, now);
  const n = (await tx.select({ n: count() }).from(oauthClients).where(unusedClients()).get())?.n ?? 0;
  if (n < MAX_UNUSED_CLIENTS) return;
  const oldest = await tx
    .select({ id: oauthClients.id })
    .from(oauthClients)
    .where(and(unusedClients(), lte(oauthClients.createdAt, now - AUTHORIZATION_WINDOW_MS), not(awaitingConsent(now))))
    .orderBy(asc(oauthClients.createdAt))
    .limit(n - MAX_UNUSED_CLIENTS + 1)
    .all();
  if (oldest.length === n - MAX_UNUSED_CLIENTS + 1) {
    for (const client of oldest) await removeClient(tx, client.id, now);
    return;
  }
  // Full of clients that may be signing in: the next one leaves the window when the oldest young one does.
  const youngest = await tx
    .select({ at: min(oauthClients.createdAt) })
    .from(oauthClients)
    .where(and(unusedClients(), gt(oauthClients.createdAt, now - AUTHORIZATION_WINDOW_MS)))
    .get();
  const wait = youngest?.at === null || youngest?.at === undefined ? 60_000 : youngest.at + AUTHORIZATION_WINDOW_MS - now;
  throw new AppError(
    'too_many_requests',
    'too many apps are registering right now; try again later',
    undefined,
    Math.max(1, Math.ceil(wait / 1000)),
  );
}

export async function registerClient(
  tx: Tx,
  input: { id?: string; kind: ClientKind; name: string; redirectUris: readonly string[]; authMethod: AuthMethod; secret: string | null },
  now = Date.now(),
): Promise<OauthClient> {
  if (input.kind === 'dynamic') await makeRoomForClient(tx, now);
  const row = {
    id: input.id ?? `oc_${randomId(15)}`,
    kind: input.kind,
    name: input.name,
    redirectUris: JSON.stringify(input.redirectUris),
    authMethod: input.authMethod,
    secretHash: input.secret === null ? null : storedHash(input.secret),
    createdAt: now,
  };
  await tx.insert(oauthClients).values(row);
  return toClient({ ...row, lastUsedAt: null, refreshAt: null });
}

export async function listClients(db: Db): Promise<OauthClient[]> {
  return (await db.select().from(oauthClients).orderBy(asc(oauthClients.createdAt)).all()).map(toClient);
}

/** Forgets a client; a standing grant it had ends with its tokens. */
export async function removeClient(tx: Tx, id: string, now = Date.now()): Promise<boolean> {
  const rows = await tx.delete(oauthClients).where(eq(oauthClients.id, id)).returning({ id: oauthClients.id });
  if (rows.length === 0) return false;
  const standing = await tx
    .select({ id: oauthGrants.id })
    .from(oauthGrants)
    .where(and(eq(oauthGrants.clientId, id), isNull(oauthGrants.revokedAt)))
    .all();
  for (const g of standing) await endGrant(tx, g.id, now);
  return true;
}
