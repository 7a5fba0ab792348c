// Keys the database made at migration (table server_keys), shared by every instance on it.
import { eq } from 'drizzle-orm';
import type { Db } from '../db/open.ts';
import { serverKeys } from '../db/schema.ts';

/** The key of this name, hex as stored; null when the database has none (not migrated). */
export async function serverKey(db: Db, name: string): Promise<string | null> {
  const row = await db.select({ key: serverKeys.key }).from(serverKeys).where(eq(serverKeys.name, name)).get();
  return row?.key ?? null;
}
