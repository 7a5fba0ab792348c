// Opens the database named by server.database and is the only way to change it.
//
// Reads go to `db`. Every change goes through `write(fn)`: one transaction, `BEGIN IMMEDIATE … COMMIT`, run one
// at a time per process, and after it the connection must be back in autocommit, or the change is rolled back
// and reported as failed. A `2xx` answer or CLI exit 0 therefore always means committed (CONTRACT §5
// "Durability"). When another process holds the write lock, svc waits without blocking its event loop, up to
// BUSY_WAIT_MS, then gives up with DatabaseBusy and nothing changed.
//
// Embedded `file:` databases use the synchronous libsql binding (a prepared point query costs a few µs, see
// docs/performance.md) through two connections: a query-only one for reads, so a read can never see or join
// a transaction in progress, and one for writes. Remote sqld/Turso URLs use @libsql/client.
import { fileURLToPath } from 'node:url';
import { accessSync, constants as fs, existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { sql } from 'drizzle-orm';
import * as schema from './schema.ts';
import { replacingConnection, type Connection } from './libsql-statements.ts';
import { transactionSpan } from './spans.ts';
import { loadMigrations, applyMigrations, pendingMigrations, type Migration } from './migrations.ts';
import {
  answeredWithin,
  DatabaseBusy,
  DatabaseFailure,
  DatabaseUnavailable,
  DatabaseUnreachable,
  isBusy,
  isUnreachable,
  unreachableReason,
  safeDatabaseMessage,
  explainFileFailure,
  sqliteCode,
} from './errors.ts';
import { migrationText } from '../runtime/assets.ts';

export type { Db, Tx } from './types.ts';
import type { Db, Tx } from './types.ts';
import { systemClock, type Clock } from '../domain/clock.ts';
import { databaseClock } from './clock.ts';

export interface WriteOptions {
  /** how long to wait for another process's lock (default BUSY_WAIT_MS); 0 for best-effort writes such as last-used stamps */
  readonly waitMs?: number;
}

export interface Database {
  readonly driver: 'embedded' | 'client';
  /** the time expiries are judged by, and short-lived things (sessions, codes, flows) stamped with: this process's clock */
  readonly now: Clock;
  /**
   * Where a token's lifetime starts: the database's clock, so a host whose clock is off (a CLI on another machine)
   * cannot mint a token that is already expired or lives too long.
   */
  tokenEpoch(tx: Tx): Promise<number>;
  /** the absolute path for file: databases, else the URL without credentials */
  readonly location: string;
  /** reads only: committed data */
  readonly db: Db;
  /** runs fn in one write transaction; its result once committed. Throws DatabaseBusy when the lock stays taken. */
  write<T>(fn: (tx: Tx) => Promise<T>, options?: WriteOptions): Promise<T>;
  migrate(): Promise<string[]>;
  /**
   * What is wrong, for startup, svc check and /readyz: empty when the file is the one opened, it can be read and
   * written, and (unless `pendingIsProblem` is false) no migration is pending.
   */
  problems(options?: { pendingIsProblem?: boolean; waitMs?: number }): Promise<string[]>;
  close(): void;
}

export interface OpenOptions {
  /** Use @libsql/client even for file: URLs; tests use it to run the remote code path on a local file. */
  readonly forceClient?: boolean;
  /** told of lock retries and failed writes (the metrics) */
  readonly events?: DatabaseEvents;
  /** for tests that move time (both clocks above): never set from svc.ini or the environment */
  readonly clock?: Clock;
}

export interface DatabaseEvents {
  busyRetry(): void;
  databaseError(kind: 'busy' | 'failed'): void;
  /** statements sent: `read` outside a write transaction, `write` inside one (BEGIN and COMMIT included) */
  databaseStatements(kind: 'read' | 'write', count: number): void;
}

/** A database as a driver opens it; openDatabase adds the clock. */
type Opened = Omit<Database, 'now' | 'tokenEpoch'>;

const quiet: DatabaseEvents = { busyRetry() {}, databaseError() {}, databaseStatements() {} };

/** How long a write waits for another process's lock before answering busy. */
export const BUSY_WAIT_MS = 5000;

/** A database that cannot be opened, with what to fix. */
export class DatabaseOpenError extends Error {}

export async function openDatabase(url: string, authToken: string | null, options: OpenOptions = {}): Promise<Database> {
  const events = options.events ?? quiet;
  const opened =
    url.startsWith('file:') && !options.forceClient ? await openEmbedded(filePath(url), events) : await openClient(url, authToken, events);
  // A clock set by a test stands for both: svc then agrees with itself however far it was moved.
  const clock = options.clock;
  const timed: Database = clock
    ? { ...opened, now: clock, tokenEpoch: async () => clock() }
    : { ...opened, now: systemClock, tokenEpoch: databaseClock };
  // Each write transaction (its wait for the lock included) a span around its statements' (spans.ts).
  const database: Database = { ...timed, write: (fn, writeOptions) => transactionSpan(() => timed.write(fn, writeOptions)) };
  if (events === quiet) return database;
  return {
    ...database,
    write: (fn, writeOptions) =>
      database.write(fn, writeOptions).catch((e: unknown) => {
        // A refusal the change itself decided (a conflict, a bad value) is no failure of the database.
        if (e instanceof DatabaseBusy) events.databaseError('busy');
        else if (e instanceof DatabaseFailure || e instanceof DatabaseUnavailable || sqliteCode(e) !== '') events.databaseError('failed');
        throw e;
      }),
  };
}

/** One write at a time per process: writes queue here rather than contend for SQLite's lock. */
function serial(): <T>(fn: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (fn) => {
    const run = tail.then(fn);
    tail = run.catch(() => undefined);
    return run;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Calls `attempt` until it does not fail busy, backing off without blocking, until `deadline` (which counts from
 * when the caller asked, so writes queued behind a waiting one do not each wait in full).
 */
async function untilNotBusy<T>(attempt: () => T | Promise<T>, deadline: number, events: DatabaseEvents): Promise<T> {
  const start = Date.now();
  for (let delay = 2; ; delay = Math.min(delay * 2, 50)) {
    try {
      return await attempt();
    } catch (e) {
      if (!isBusy(e)) throw e;
      if (Date.now() >= deadline) throw new DatabaseBusy(Date.now() - start);
      events.busyRetry();
      await sleep(delay + Math.random() * delay);
    }
  }
}

function migrations(): Migration[] {
  return loadMigrations(migrationText);
}

type LibsqlDatabase = Parameters<typeof replacingConnection>[0] extends () => infer R ? R : never;

/** Creates a table inside a transaction that is then rolled back: proves the file can be written. */
const WRITE_PROBE = sql`CREATE TABLE svc_write_probe (x)`;
class ProbeRollback extends Error {}

async function openEmbedded(path: string, events: DatabaseEvents): Promise<Opened> {
  const { default: Sqlite } = await import('better-sqlite3');
  const { drizzle } = await import('drizzle-orm/better-sqlite3');
  const inMemory = path === ':memory:';
  if (!inMemory) prepareFolder(path);
  const opener = embeddedOpener(path, Sqlite);
  // synchronous = FULL: a commit is on disk before svc answers, power loss included.
  const writer = replacingConnection(
    opener('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10;'),
    // In memory the one connection also reads: counted as writes (only tests open one).
    { replaceOnFailure: false, sent: () => events.databaseStatements('write', 1) },
  );
  const writeDb = drizzle({ client: writer as never, schema });
  // No mmap: after every commit on the writer, SQLite unmaps and maps the file again at the reader's next read
  // (~30 µs, with its pages faulted in anew), and at a million tokens it read no faster (docs/performance.md).
  const reader = inMemory
    ? writer
    : replacingConnection(opener('PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 250; PRAGMA query_only = ON;'), {
        replaceOnFailure: true,
        sent: () => events.databaseStatements('read', 1),
      });
  const readDb = inMemory ? writeDb : drizzle({ client: reader as never, schema });
  const opened = inMemory ? null : fileIdentity(path);
  const transaction = embeddedTransactions(path, writer, writeDb as unknown as Tx, events);

  const database: Opened = {
    driver: 'embedded',
    location: path,
    db: readDb as unknown as Db,
    write: (fn, options = {}) => transaction(fn, options.waitMs ?? BUSY_WAIT_MS),
    migrate: () => transaction((tx) => applyMigrations(tx, migrations()), BUSY_WAIT_MS),
    async problems(options = {}) {
      if (opened) {
        const now = fileIdentity(path);
        if (now === null) return [`the database file ${path} was deleted while svc runs; changes would be lost at restart`];
        if (now !== opened) return [`${path} is no longer the file svc opened (it was replaced while svc runs)`];
      }
      return checkProblems(database.db, transaction, path, options);
    },
    close: () => {
      writer.close();
      if (reader !== writer) reader.close();
    },
  };
  return database;
}

/** Opens a connection to the file at `path` set up by `setup`, or says in one line what to fix. */
function embeddedOpener(path: string, Sqlite: new (path: string) => unknown): (setup: string) => () => LibsqlDatabase {
  return (setup) => () => {
    try {
      const raw = new Sqlite(path) as unknown as LibsqlDatabase;
      // The busy timeout first: switching to WAL needs a lock that a concurrent process may hold.
      raw.exec('PRAGMA busy_timeout = 5000');
      raw.exec(setup);
      return raw;
    } catch (e) {
      throw new DatabaseOpenError(explainOpenFailure(path, e));
    }
  };
}

/** Write transactions on the embedded writer connection, one at a time, each committed or left with nothing. */
function embeddedTransactions(path: string, writer: Connection, writeTx: Tx, events: DatabaseEvents): Transaction {
  const queue = serial();
  return async <T>(fn: (tx: Tx) => Promise<T>, waitMs: number): Promise<T> => {
    const deadline = Date.now() + waitMs;
    return queue(async () => {
      await untilNotBusy(() => writer.exec('BEGIN IMMEDIATE'), deadline, events).catch((e) => {
        throw explainFileFailure(path, e);
      });
      let committing = false;
      try {
        const result = await fn(writeTx);
        committing = true;
        writer.exec('COMMIT');
        if (writer.inTransaction) throw new Error('the database did not commit');
        // A statement left in progress (a failure, or run() of one that returns rows) may still hold a snapshot
        // that a committed transaction does not end: later writes would find it stale.
        if (writer.suspect) writer.replace();
        return result;
      } catch (e) {
        throw undoFailedWrite(path, writer, e, committing);
      }
    });
  };
}

/** Undoes a failed write transaction, and gives what to throw for it. */
function undoFailedWrite(path: string, writer: Connection, e: unknown, committing: boolean): unknown {
  // Nothing of a failed transaction stays. A connection that may hold a statement in progress cannot
  // commit again (libsql-js#237), so it is replaced rather than trusted with the next write.
  try {
    if (writer.inTransaction) writer.exec('ROLLBACK');
  } catch {
    // replaced below
  }
  if (committing || writer.suspect || writer.inTransaction) writer.replace();
  const explained = explainFileFailure(path, e);
  if (explained !== e) return explained;
  // A COMMIT refused for a statement in progress is not another process's lock: it is this change failing.
  if (committing) return new Error(`the change was not committed (${safeDatabaseMessage(e)}); nothing was changed`);
  if (isBusy(e)) return new DatabaseBusy();
  return e;
}

/** How long one request to a database server may take before svc gives up on it (reads, and each step of a write). */
export const REQUEST_TIMEOUT_MS = 5000;
/** The least time a write's requests get, even when it waited most of its budget in the queue. */
const MIN_WRITE_REQUEST_MS = 1000;
/**
 * sqld queues a BEGIN IMMEDIATE behind another client's write transaction and takes the lock from a transaction
 * that has held it for 5 s (which then fails TRANSACTION_TIMEOUT): a write's requests may need that long plus its own.
 */
const SERVER_LOCK_GRACE_MS = 3000;

/** fetch for @libsql/client with a time limit per request: a server that accepts and never answers cannot hang svc. */
function fetchWithin(limitMs: () => number): typeof fetch {
  return (input, init) => fetch(input, { ...init, signal: AbortSignal.timeout(limitMs()) });
}

type LibsqlClient = import('@libsql/client').Client;

/**
 * The same for a WebSocket client, whose requests share one connection and cannot be aborted one by one: a call
 * (or a call of one of its transactions) past the limit fails, and the connection is dropped so the next call opens
 * a new one instead of waiting behind a server that stopped answering.
 */
function callsWithin(client: LibsqlClient, limitMs: () => number): LibsqlClient {
  const timed = <T>(call: () => Promise<T>): Promise<T> =>
    answeredWithin(call(), limitMs(), () => {
      void Promise.resolve()
        .then(() => client.reconnect())
        .catch(() => undefined);
    });
  const limited = <O extends object>(
    target: O,
    names: readonly string[],
    after: (name: string, value: unknown) => unknown = (_, v) => v,
  ): O =>
    new Proxy(target, {
      get(object, key) {
        const value: unknown = Reflect.get(object, key);
        if (typeof value !== 'function') return value;
        if (typeof key === 'string' && names.includes(key)) {
          return (...args: unknown[]) =>
            timed(() => (value as (...a: unknown[]) => Promise<unknown>).apply(object, args)).then((result) => after(key, result));
        }
        return (value as (...a: unknown[]) => unknown).bind(object);
      },
    });
  const TX_CALLS = ['execute', 'batch', 'executeMultiple', 'commit', 'rollback'] as const;
  return limited(client, ['execute', 'batch', 'executeMultiple', 'migrate', 'transaction'], (name, result) =>
    name === 'transaction' ? limited(result as object, TX_CALLS) : result,
  );
}

/**
 * The client, telling `events` of each statement it sends: calls on the client itself are reads, and a transaction's
 * statements are writes, its BEGIN (sent with the first) and its COMMIT or ROLLBACK each counted as one.
 */
function countedStatements(client: LibsqlClient, events: DatabaseEvents): LibsqlClient {
  const counting = <O extends object>(target: O, kind: 'read' | 'write', wrap: (name: string, value: unknown) => unknown): O =>
    new Proxy(target, {
      get(object, key) {
        const value: unknown = Reflect.get(object, key);
        if (typeof value !== 'function') return value;
        const count = typeof key === 'string' ? STATEMENTS_OF.get(key) : undefined;
        if (count === undefined) return (value as (...a: unknown[]) => unknown).bind(object);
        return (...args: unknown[]) => {
          events.databaseStatements(key === 'transaction' ? 'write' : kind, count(args[0]));
          return wrap(String(key), (value as (...a: unknown[]) => unknown).apply(object, args));
        };
      },
    });
  return counting(client, 'read', (name, result) =>
    name === 'transaction' ? (result as Promise<object>).then((tx) => counting(tx, 'write', (_, v) => v)) : result,
  );
}

/** How many statements a client call sends, by its name; `transaction` stands for the BEGIN. */
const STATEMENTS_OF = new Map<string, (first: unknown) => number>([
  ['execute', () => 1],
  ['executeMultiple', () => 1],
  ['batch', (statements) => (Array.isArray(statements) ? statements.length : 1)],
  ['transaction', () => 1],
  ['commit', () => 1],
  ['rollback', () => 1],
]);

async function openClient(url: string, authToken: string | null, events: DatabaseEvents): Promise<Opened> {
  // Loaded here, not at start: @libsql/client brings native code, which the single executable unpacks only when a
  // database server is used.
  const { createClient } = await import('@libsql/client');
  const { drizzle } = await import('drizzle-orm/libsql');
  const { streamReads } = await import('./remote-reads.ts');
  const isFile = url.startsWith('file:');
  if (isFile) prepareFolder(filePath(url));
  // Over the network, reads and writes get a client each: a write's requests are limited by its own deadline.
  let writeDeadline = 0;
  const credentials = authToken ? { authToken } : {};
  const remote = (limit: () => number) =>
    /^wss?:/.test(url)
      ? callsWithin(createClient({ url, ...credentials }), limit)
      : createClient({ url, ...credentials, fetch: fetchWithin(limit) });
  const client = countedStatements(
    isFile ? createClient({ url }) : remote(() => Math.max(MIN_WRITE_REQUEST_MS, writeDeadline - Date.now())),
    events,
  );
  // Reads on a server go over a few long-lived streams (remote-reads.ts); a file is read through the one client.
  const readClient = isFile ? client : streamReads(url, authToken, REQUEST_TIMEOUT_MS, () => events.databaseStatements('read', 1));
  if (isFile) await client.executeMultiple('PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL;');
  const db = drizzle({ client, schema });
  const readDb = isFile ? db : drizzle({ client: readClient, schema });
  const queue = serial();
  const location = isFile ? filePath(url) : url.replace(/\?.*$/, '');
  // When the server stopped answering, writes that waited their whole budget behind the failed one fail at once.
  let unreachableAt = 0;
  const transaction = <T>(fn: (tx: Tx) => Promise<T>, waitMs: number): Promise<T> => {
    const asked = Date.now();
    const deadline = asked + waitMs;
    return queue(() => {
      if (unreachableAt >= asked && Date.now() >= deadline) {
        return Promise.reject(new DatabaseUnreachable(location, 'it did not answer the write before this one'));
      }
      writeDeadline = Math.max(deadline, Date.now()) + SERVER_LOCK_GRACE_MS;
      let started = false;
      let committing = false;
      return untilNotBusy(
        async () => {
          try {
            // @libsql/client's default transaction mode is "write": BEGIN IMMEDIATE.
            const result = await db.transaction(async (tx) => {
              started = true;
              const value = await fn(tx as unknown as Tx);
              committing = true;
              return value;
            });
            return result;
          } catch (e) {
            if (!isFile && isUnreachable(e)) {
              unreachableAt = Date.now();
              // Cut after the change was handed over for COMMIT: whether the server committed it is unknown.
              throw new DatabaseUnreachable(location, unreachableReason(e), committing);
            }
            // Retry only when the lock was never had; a failure later in the transaction is its answer.
            if (started && isBusy(e)) throw new DatabaseBusy();
            throw isBusy(e) ? e : explainFileFailure(location, e);
          }
        },
        deadline,
        events,
      );
    });
  };
  return {
    driver: 'client',
    location,
    db: readDb as unknown as Db,
    write: (fn, options = {}) => transaction(fn, options.waitMs ?? BUSY_WAIT_MS),
    migrate: () => transaction((tx) => applyMigrations(tx, migrations()), BUSY_WAIT_MS),
    problems: (options = {}) => checkProblems(readDb as unknown as Db, transaction, location, options),
    close: () => {
      client.close();
      if (readClient !== client) readClient.close();
    },
  };
}

type Transaction = <T>(fn: (tx: Tx) => Promise<T>, waitMs: number) => Promise<T>;

/**
 * The kind of a problem that problems() described, for answers to anonymous callers (/readyz): the description
 * names files and locks, which only operators should see.
 */
export function problemKind(problem: string): 'migrations_pending' | 'database_locked' | 'database_unavailable' {
  if (/^\d+ migration\(s\) not applied/.test(problem)) return 'migrations_pending';
  if (/^the database .* is locked by another process/.test(problem)) return 'database_locked';
  return 'database_unavailable';
}

/** A read, the migration state, and a write that is rolled back. */
async function checkProblems(
  db: Db,
  transaction: Transaction,
  location: string,
  options: { pendingIsProblem?: boolean; waitMs?: number },
): Promise<string[]> {
  try {
    const pending = await pendingMigrations(db, migrations());
    if (pending.length > 0 && options.pendingIsProblem !== false) {
      return [`${pending.length} migration(s) not applied (${pending.join(', ')}); run svc migrate`];
    }
  } catch (e) {
    return [
      `the database ${location} cannot be read: ${isUnreachable(e) ? `the server cannot be reached (${unreachableReason(e)})` : safeDatabaseMessage(e)}`,
    ];
  }
  try {
    await transaction(async (tx) => {
      await tx.run(WRITE_PROBE);
      throw new ProbeRollback();
    }, options.waitMs ?? BUSY_WAIT_MS);
  } catch (e) {
    if (e instanceof ProbeRollback) return [];
    if (e instanceof DatabaseBusy) return [`the database ${location} is locked by another process: ${e.message}`];
    if (e instanceof DatabaseUnreachable) return [e.message];
    const explained = explainFileFailure(location, e);
    return [
      explained instanceof DatabaseFailure ? explained.message : `the database ${location} cannot be written: ${safeDatabaseMessage(e)}`,
    ];
  }
  return [];
}

function fileIdentity(path: string): string | null {
  try {
    const s = statSync(path);
    return `${s.dev}:${s.ino}`;
  } catch {
    return null;
  }
}

function prepareFolder(path: string): void {
  if (path === ':memory:') return;
  try {
    mkdirSync(dirname(path), { recursive: true });
  } catch (e) {
    throw new DatabaseOpenError(
      `cannot create the folder ${dirname(path)} for the database: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
}

/** One line that says what to fix, instead of a driver's error code. */
function explainOpenFailure(path: string, e: unknown): string {
  const folder = dirname(path);
  const writable = (p: string) => {
    try {
      accessSync(p, fs.W_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (existsSync(path) && !writable(path))
    return `cannot open the database ${path}: the file is not writable by this user; check its owner and mode`;
  if (!writable(folder))
    return `cannot open the database ${path}: the folder ${folder} is not writable by this user (SQLite creates ${path}-wal and -shm beside it)`;
  const message = safeDatabaseMessage(e);
  if (/disk|full|SQLITE_FULL|ENOSPC/i.test(message)) return `cannot open the database ${path}: the disk is full`;
  return `cannot open the database ${path}: ${message}`;
}

/** file:relative/path, file:/abs/path and file:///abs/path; the config resolves relative paths against its folder. */
export function filePath(url: string): string {
  const rest = url.slice('file:'.length).replace(/\?.*$/, '');
  if (rest === ':memory:') return rest;
  return resolve(rest.startsWith('//') ? fileURLToPath(url.replace(/\?.*$/, '')) : rest);
}
