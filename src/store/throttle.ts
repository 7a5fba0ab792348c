// Failed-login counting in the database, so limits hold across restarts and instances.
import { and, eq, gt, lt, desc } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { loginFailures } from '../db/schema.ts';

export const WINDOW_MS = 15 * 60_000;
export const ACCOUNT_LIMIT = 5;
export const ADDRESS_LIMIT = 50;

/** Seconds until `key` is below `limit` failures in the window again, or 0 when it is below now. */
export async function retryAfter(db: Db, key: string, limit: number, now = Date.now()): Promise<number> {
  const rows = await db
    .select({ at: loginFailures.at })
    .from(loginFailures)
    .where(and(eq(loginFailures.key, key), gt(loginFailures.at, now - WINDOW_MS)))
    .orderBy(desc(loginFailures.at))
    .limit(limit)
    .all();
  if (rows.length < limit) return 0;
  const oldestCounted = rows[rows.length - 1]!.at;
  return Math.max(1, Math.ceil((oldestCounted + WINDOW_MS - now) / 1000));
}

export async function recordFailure(tx: Tx, keys: readonly string[], now = Date.now()): Promise<void> {
  await tx.insert(loginFailures).values(keys.map((key) => ({ key, at: now })));
  await tx.delete(loginFailures).where(lt(loginFailures.at, now - WINDOW_MS));
}

export async function clearFailures(tx: Tx, key: string): Promise<void> {
  await tx.delete(loginFailures).where(eq(loginFailures.key, key));
}
