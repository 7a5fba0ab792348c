// The database as the rest of svc sees it: reads through Db, changes only through Tx, which only write() hands out.
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import type * as schema from './schema.ts';

export type Db = BaseSQLiteDatabase<'sync' | 'async', unknown, typeof schema>;
declare const inTransaction: unique symbol;
/** The database inside a write transaction; functions that change data take this, never a plain Db. */
export type Tx = Db & { readonly [inTransaction]: true };
