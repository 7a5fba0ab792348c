// The database server's own clock: the time every svc host and the CLI agree on, whatever their own clocks say.
import { sql } from 'drizzle-orm';
import type { Db } from './types.ts';

/** Milliseconds since the epoch by the database's clock (one query). */
export async function databaseClock(db: Db): Promise<number> {
  const row = await db.get<{ now: number }>(sql`SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now`);
  return Number(row!.now);
}
