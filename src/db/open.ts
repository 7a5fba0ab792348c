// Opens the database named by server.database. Embedded `file:` databases use the synchronous libsql binding
// (a prepared point query costs a few µs, see README "Performance"); remote sqld/Turso URLs use
// @libsql/client. Code that uses the database awaits every query and never relies on a synchronous result
// or an interactive transaction, so both drivers run the same code.
import { fileURLToPath } from 'node:url';
import { mkdirSync } from 'node:fs';
import { migrationsFolder } from '../runtime/assets.ts';
import { dirname, resolve } from 'node:path';
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import * as schema from './schema.ts';

export type Db = BaseSQLiteDatabase<'sync' | 'async', unknown, typeof schema>;

export interface Database {
  readonly db: Db;
  readonly driver: 'embedded' | 'client';
  migrate(): Promise<void>;
  close(): void;
}


export interface OpenOptions {
  /** Use @libsql/client even for file: URLs; tests use it to run the remote code path on a local file. */
  readonly forceClient?: boolean;
}

export async function openDatabase(url: string, authToken: string | null, options: OpenOptions = {}): Promise<Database> {
  if (url.startsWith('file:') && !options.forceClient) return openEmbedded(url);
  return openClient(url, authToken);
}

async function openEmbedded(url: string): Promise<Database> {
  const { default: Sqlite } = await import('better-sqlite3');
  const { drizzle } = await import('drizzle-orm/better-sqlite3');
  const { migrate } = await import('drizzle-orm/better-sqlite3/migrator');
  const path = filePath(url);
  if (path !== ':memory:') mkdirSync(dirname(resolve(path)), { recursive: true });
  const client = new Sqlite(path);
  // mmap: reads of large indexes (a million tokens) become page lookups instead of read() calls.
  client.exec('PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA mmap_size = 268435456;');
  const db = drizzle({ client, schema });
  return {
    db: db as unknown as Db,
    driver: 'embedded',
    migrate: async () => migrate(db, { migrationsFolder: migrationsFolder() }),
    close: () => client.close(),
  };
}

async function openClient(url: string, authToken: string | null): Promise<Database> {
  const { createClient } = await import('@libsql/client');
  const { drizzle } = await import('drizzle-orm/libsql');
  const { migrate } = await import('drizzle-orm/libsql/migrator');
  if (url.startsWith('file:')) mkdirSync(dirname(resolve(filePath(url))), { recursive: true });
  const client = createClient({ url, ...(authToken ? { authToken } : {}) });
  if (url.startsWith('file:')) await client.executeMultiple('PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;');
  const db = drizzle({ client, schema });
  return {
    db: db as unknown as Db,
    driver: 'client',
    migrate: async () => migrate(db, { migrationsFolder: migrationsFolder() }),
    close: () => client.close(),
  };
}

function filePath(url: string): string {
  // file:relative/path, file:/abs/path and file:///abs/path all name a path on this machine.
  const rest = url.slice('file:'.length).replace(/\?.*$/, '');
  return rest.startsWith('//') ? fileURLToPath(url.replace(/\?.*$/, '')) : rest;
}
