// Identity-assertion signing keys (table signing_keys): the newest unretired one signs; retired ones stay published
// for a while so assertions signed just before a rotation still verify.
import { desc, gt, isNull, or } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { signingKeys } from '../db/schema.ts';

export interface SigningKeyRow {
  readonly kid: string;
  readonly privateSealed: string;
  readonly publicJwk: Record<string, unknown>;
  readonly createdAt: number;
  readonly retiredAt: number | null;
}

type Row = typeof signingKeys.$inferSelect;
const toKey = (r: Row): SigningKeyRow => ({ ...r, publicJwk: JSON.parse(r.publicJwk) as Record<string, unknown> });

/** The key that signs now: the newest one not retired. */
export async function currentSigningKey(db: Db): Promise<SigningKeyRow | null> {
  const row = await db.select().from(signingKeys).where(isNull(signingKeys.retiredAt)).orderBy(desc(signingKeys.createdAt)).limit(1).get();
  return row ? toKey(row) : null;
}

/** The keys to publish: those not retired, and those retired after `since`. */
export async function publishedSigningKeys(db: Db, since: number): Promise<SigningKeyRow[]> {
  const rows = await db
    .select()
    .from(signingKeys)
    .where(or(isNull(signingKeys.retiredAt), gt(signingKeys.retiredAt, since)))
    .orderBy(desc(signingKeys.createdAt))
    .all();
  return rows.map(toKey);
}

/** Adds a key; with `retireOthers`, every key signing until now is retired at `now`. */
export async function addSigningKey(
  tx: Tx,
  key: { kid: string; privateSealed: string; publicJwk: Record<string, unknown> },
  now: number,
  retireOthers: boolean,
): Promise<void> {
  if (retireOthers) await tx.update(signingKeys).set({ retiredAt: now }).where(isNull(signingKeys.retiredAt));
  await tx
    .insert(signingKeys)
    .values({ kid: key.kid, privateSealed: key.privateSealed, publicJwk: JSON.stringify(key.publicJwk), createdAt: now });
}

export async function hasSigningKey(tx: Tx): Promise<boolean> {
  return Boolean(await tx.select({ kid: signingKeys.kid }).from(signingKeys).where(isNull(signingKeys.retiredAt)).limit(1).get());
}
