// A point query on the embedded driver without drizzle in between, for the one lookup on every bearer request:
// drizzle switches a statement to raw mode again on every call, which costs as much as the query itself.
import type { Db } from './types.ts';

interface RawStatement {
  raw(on: boolean): RawStatement;
  get(param: string): unknown[] | undefined;
}

/**
 * `sql` (one `?` parameter) prepared once in raw mode on the embedded driver: a function from the parameter to
 * the row's values in column order. null on a remote database, where the caller uses a drizzle prepared query.
 */
export function rawPointQuery(db: Db, sql: string): ((param: string) => unknown[] | undefined) | null {
  const client = (db as { $client?: { prepare?: (sql: string) => RawStatement } }).$client;
  if (typeof client?.prepare !== 'function') return null;
  const statement = client.prepare(sql).raw(true);
  return (param) => statement.get(param);
}
