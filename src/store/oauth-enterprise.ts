// Records of enterprise-managed authorization (CONTRACT §7.1): assertions already used, the grant an exchange
// stands under (listed with the user's Connected apps, where revoking it stops further exchanges), and the access
// token it issues. Functions take a Tx: the whole exchange is one write, so a replay loses on every instance.
import { and, eq, lt } from 'drizzle-orm';
import type { Tx } from '../db/open.ts';
import { databaseClock } from '../db/clock.ts';
import { oauthAssertions, oauthClients, oauthGrants, tokens } from '../db/schema.ts';
import { mintToken, randomId, storedHash } from '../domain/secrets.ts';
import { formatScopes } from '../domain/scopes.ts';

/**
 * A used assertion is remembered this long past its expiry before its record goes: another instance whose clock
 * is a little behind may still take it as unexpired, and must then find it used.
 */
export const USED_ASSERTION_KEPT_MS = 10 * 60_000;

/** Records an assertion as used; false when it was used before (a replay). Long-expired records are removed first. */
export async function claimAssertion(tx: Tx, issuer: string, jti: string, expiresAt: number, now = Date.now()): Promise<boolean> {
  await tx.delete(oauthAssertions).where(lt(oauthAssertions.expiresAt, now - USED_ASSERTION_KEPT_MS));
  const rows = await tx
    .insert(oauthAssertions)
    .values({ id: storedHash(`${issuer}\n${jti}`), expiresAt })
    .onConflictDoNothing()
    .returning({ id: oauthAssertions.id });
  return rows.length === 1;
}

/**
 * The grant an exchange for this user and client stands under: the standing one, or a new one with the scope
 * `mcp`. Null when the user revoked it: revoking the app under Connected apps stops its exchanges.
 */
export async function enterpriseGrant(
  tx: Tx,
  userId: number,
  clientId: string,
  now = Date.now(),
): Promise<{ id: string; restriction: string | null } | null> {
  const existing = await tx
    .select()
    .from(oauthGrants)
    .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId)))
    .get();
  if (existing) return existing.revokedAt === null ? { id: existing.id, restriction: existing.labels } : null;
  const id = `gr_${randomId(12)}`;
  await tx.insert(oauthGrants).values({ id, userId, clientId, scope: 'mcp', redirectUris: '[]', labels: null, createdAt: now });
  return { id, restriction: null };
}

/** An access token under the grant: scope `mcp`, the grant's label restriction, no refresh token. */
export async function issueAssertionToken(
  tx: Tx,
  grant: { id: string; restriction: string | null },
  userId: number,
  client: { id: string; name: string },
  accessSeconds: number,
  epoch?: number,
): Promise<{ accessToken: string; expiresIn: number }> {
  const now = epoch ?? (await databaseClock(tx));
  const accessToken = mintToken();
  await tx.insert(tokens).values({
    id: `tok_${randomId(10)}`,
    hash: storedHash(accessToken),
    userId,
    name: client.name.slice(0, 100),
    createdAt: now,
    expiresAt: now + accessSeconds * 1000,
    grantId: grant.id,
    labels: grant.restriction,
    scopes: formatScopes(['mcp']),
  });
  await tx.update(oauthGrants).set({ lastUsedAt: now }).where(eq(oauthGrants.id, grant.id));
  await tx.update(oauthClients).set({ lastUsedAt: now }).where(eq(oauthClients.id, client.id));
  return { accessToken, expiresIn: accessSeconds };
}
