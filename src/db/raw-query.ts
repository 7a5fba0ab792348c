// A point query on the embedded driver without drizzle in between, for the one lookup on every bearer request:
// drizzle switches a statement to raw mode again on every call, which costs as much as the query itself.
import type { Db } from './types.ts';

/** A prepared statement in raw mode: `get` gives the row's values in column order. */
export interface RawPointQuery {
  get(param: string): unknown[] | undefined;
}

interface RawStatement extends RawPointQuery {
  raw(on: boolean): RawStatement;
}

/**
 * `sql` (one `?` parameter) prepared once in raw mode on the embedded driver, called directly by the caller (no
 * wrapper on the hot path). null on a remote database, where the caller uses a drizzle prepared query.
 */
export function rawPointQuery(db: Db, sql: string): RawPointQuery | null {
  const client = (db as { $client?: { prepare?: (sql: string) => RawStatement } }).$client;
  if (typeof client?.prepare !== 'function') return null;
  return client.prepare(sql).raw(true);
}
