// Failed-login counting in the database, so limits hold across restarts and instances. An attempt is reserved
// (counted as a failure) in one write transaction before its password is checked, and released when it
// succeeds: SQLite runs write transactions one at a time across every process, so a burst of guesses can verify
// at most the limit, however many arrive at once.
import { and, eq, gt, lt, desc, inArray } from 'drizzle-orm';
import type { Tx } from '../db/open.ts';
import { loginFailures } from '../db/schema.ts';

export const WINDOW_MS = 15 * 60_000;
export const ACCOUNT_LIMIT = 5;
export const ADDRESS_LIMIT = 50;

/** Seconds until `key` is below `limit` failures in the window again, or 0 when it is below now. */
async function retryAfter(tx: Tx, key: string, limit: number, now: number): Promise<number> {
  const rows = await tx
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

export type Reservation = { readonly ok: true; readonly ids: readonly number[] } | { readonly ok: false; readonly retryAfter: number };

/** Counts an attempt against every key, unless one of them is at its limit already. */
export async function reserveAttempt(
  tx: Tx,
  limits: readonly (readonly [key: string, limit: number])[],
  now = Date.now(),
): Promise<Reservation> {
  await tx.delete(loginFailures).where(lt(loginFailures.at, now - WINDOW_MS));
  let wait = 0;
  for (const [key, limit] of limits) wait = Math.max(wait, await retryAfter(tx, key, limit, now));
  if (wait > 0) return { ok: false, retryAfter: wait };
  const rows = await tx
    .insert(loginFailures)
    .values(limits.map(([key]) => ({ key, at: now })))
    .returning({ id: loginFailures.id });
  return { ok: true, ids: rows.map((r) => r.id) };
}

/** A reserved attempt that succeeded: it is no failure, and the account's earlier failures are forgiven. */
export async function releaseAttempt(tx: Tx, ids: readonly number[], accountKey: string): Promise<void> {
  await tx.delete(loginFailures).where(inArray(loginFailures.id, [...ids]));
  await tx.delete(loginFailures).where(eq(loginFailures.key, accountKey));
}
