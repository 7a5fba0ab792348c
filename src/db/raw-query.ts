// Statements without drizzle in between, for the one lookup on every bearer request: on the embedded driver drizzle
// switches a statement to raw mode again on every call, which costs as much as the query itself; on a database
// server the lookups of many requests go out as one statement, which drizzle's prepared queries cannot express.
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

/** Rows as arrays of values, in column order. */
export type RawRows = (sql: string, args: unknown[]) => Promise<ArrayLike<unknown>[]>;

type Execute = (s: { sql: string; args: unknown[] }) => Promise<{ rows: ArrayLike<unknown>[] }>;

/**
 * On a remote database, the bearer lookup's statements straight to its read client (rows as it returns them), on
 * the connection it keeps for lookups where it has one (remote-reads.ts); null on the embedded driver.
 */
export function rawRemoteQuery(db: Db): RawRows | null {
  const client = (db as { $client?: { prepare?: unknown; execute?: Execute; executeLookup?: Execute } }).$client;
  if (typeof client?.prepare === 'function' || typeof client?.execute !== 'function') return null;
  const execute = (client.executeLookup ?? client.execute).bind(client);
  return async (sql, args) => (await execute({ sql, args })).rows;
}
