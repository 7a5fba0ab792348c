// The database drivers the store is tested on: the embedded file, @libsql/client on a file, and @libsql/client
// over HTTP on a real sqld. Each opened database is fresh and removed by close().
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, type Database, type DatabaseEvents } from '../../src/db/open.ts';
import { startSqld } from './sqld.ts';

export const DRIVERS = ['embedded', '@libsql/client', 'sqld'] as const;
export type Driver = (typeof DRIVERS)[number];

export async function openFresh(driver: Driver): Promise<{ database: Database; close(): Promise<void> }> {
  if (driver === 'sqld') {
    const sqld = await startSqld({ auth: true });
    const database = await openDatabase(sqld.url, sqld.token);
    return {
      database,
      close: async () => {
        database.close();
        await sqld.remove();
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'svc-driver-'));
  const database = await openDatabase(`file:${join(dir, 'svc.db')}`, null, { forceClient: driver === '@libsql/client' });
  return {
    database,
    close: async () => {
      database.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Database events that count the read statements sent (`reads`), for openDatabase's `events`. */
export function readCounter(): { readonly events: DatabaseEvents; reads: number } {
  const counter = {
    reads: 0,
    events: {
      busyRetry() {},
      databaseError() {},
      databaseStatements(kind: 'read' | 'write', count: number) {
        if (kind === 'read') counter.reads += count;
      },
    },
  };
  return counter;
}
