// Failures of the database itself, told apart so callers can answer them well: a database that stays busy is a
// 503 with Retry-After (CLI: exit 1 with a message), never a 500, and never a half-done change. Drivers' errors
// arrive wrapped (drizzle's "Failed to run the query" with the SQLite error as its cause), so every test here
// looks through the chain of causes.

/**
 * The database cannot serve now, and may soon: answered 503 with Retry-After (CLI: exit 1), never 500. `message` is
 * for the log and the operator (it may name the database server); `publicMessage` is what a caller is told.
 */
export abstract class DatabaseUnavailable extends Error {
  /** seconds a client should wait before trying again */
  abstract readonly retryAfter: number;
  get publicMessage(): string {
    return this.message;
  }
}

/** The write lock stayed taken past svc's wait; nothing was changed. */
export class DatabaseBusy extends DatabaseUnavailable {
  readonly retryAfter = 1;
  constructor(waitedMs?: number) {
    const waited = waitedMs ? ` for ${(waitedMs / 1000).toFixed(1)} s` : '';
    super(`the database is busy (locked by another process${waited}); nothing was changed, try again`);
  }
}

/**
 * A database server (sqld, Turso) refused the connection, broke it, or did not answer in time. When that happened
 * while COMMIT was on its way, the change may or may not have been committed: svc cannot know, so it says so.
 */
export class DatabaseUnreachable extends DatabaseUnavailable {
  readonly retryAfter = 2;
  constructor(
    location: string,
    why: string,
    readonly outcomeUnknown = false,
  ) {
    super(
      outcomeUnknown
        ? `the database server ${location} stopped answering while the change was being committed (${why}); it may or may not have been saved: check before repeating it`
        : `the database server ${location} cannot be reached (${why}); nothing was changed, try again`,
    );
  }

  /** Without the server's address and the cause: those are the log's and the operator's. */
  override get publicMessage(): string {
    return this.outcomeUnknown
      ? 'the database stopped answering while the change was being committed; it may or may not have been saved: check before repeating it'
      : 'the database cannot be reached; nothing was changed, try again';
  }
}

/**
 * `call`'s answer, or, once `ms` passed without one, a TimeoutError (which isUnreachable reads as the server not
 * answering); `expired` runs then, to drop the connection the call waits on.
 */
export function answeredWithin<T>(call: Promise<T>, ms: number, expired: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      expired();
      reject(Object.assign(new Error('the database server did not answer in time'), { name: 'TimeoutError' }));
    }, ms);
  });
  return Promise.race([call, late]).finally(() => clearTimeout(timer));
}

/** The database file or its disk failed: the message names the file and what to do. */
export class DatabaseFailure extends Error {}

type Link = { code?: unknown; message?: unknown; name?: unknown; status?: unknown };

function chain(e: unknown): Link[] {
  const out: Link[] = [];
  for (let c = e as { cause?: unknown } | undefined; c && typeof c === 'object' && out.length < 5; c = c.cause as typeof c) {
    out.push(c as { code?: unknown; message?: unknown });
  }
  return out;
}

/** The SQLite result code (SQLITE_BUSY, SQLITE_CONSTRAINT_UNIQUE, …) anywhere in the error's causes, else ''. */
export function sqliteCode(e: unknown): string {
  for (const c of chain(e)) if (typeof c.code === 'string' && c.code.startsWith('SQLITE_')) return c.code;
  return '';
}

export function isBusy(e: unknown): boolean {
  const code = sqliteCode(e);
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return true;
  // sqld took the lock from a write transaction that held it too long, and rolled it back.
  if (chain(e).some((c) => c.code === 'TRANSACTION_TIMEOUT')) return true;
  return chain(e).some((c) => /database is locked|database table is locked/.test(String(c.message ?? '')));
}

/** Socket and HTTP failures of a networked database (Node's and undici's codes, and @libsql/client's). */
const NETWORK_CODES =
  /^(ECONNREFUSED|ECONNRESET|ECONNABORTED|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|UND_ERR_\w+|SERVER_ERROR|HRANA_CLOSED_ERROR|HRANA_WEBSOCKET_ERROR|STREAM_EXPIRED)$/;

/** The error says the database server could not be reached or did not answer in time, rather than refusing the statement. */
export function isUnreachable(e: unknown): boolean {
  if (e instanceof DatabaseUnreachable) return true;
  return chain(e).some(
    (c) =>
      (typeof c.code === 'string' && NETWORK_CODES.test(c.code)) ||
      c.name === 'TimeoutError' ||
      c.name === 'AbortError' ||
      // The last: a WebSocket connection svc dropped because the server stopped answering, under calls still on it.
      /^fetch failed$|stream (has )?expired|socket hang up|^Client was manually closed$/i.test(String(c.message ?? '')),
  );
}

/** The short reason a networked database failed: the socket code or the driver's words, never a statement. */
export function unreachableReason(e: unknown): string {
  return networkCode(e) ?? 'the connection failed';
}

function networkCode(e: unknown): string | null {
  for (const c of chain(e)) {
    if (c.name === 'TimeoutError') return 'no answer in time';
    if (c.name === 'HttpServerError' && typeof c.status === 'number') {
      return c.status === 401 || c.status === 403
        ? `HTTP ${c.status}: it refused svc's credentials; check the token named by database_token_env`
        : `HTTP ${c.status}`;
    }
    if (typeof c.code === 'string' && /^(E[A-Z]+|UND_ERR_\w+)$/.test(c.code)) return c.code;
  }
  return null;
}

/** The insert failed because the uid is taken or reserved (the unique index, or the reservation trigger). */
export function uidTaken(e: unknown): boolean {
  return chain(e).some((c) => /svc: uid reserved|UNIQUE constraint failed: (users\.uid|uids\.uid)/.test(String(c.message ?? '')));
}

/** A failure that should be answered 503 + Retry-After, whichever layer let it through; else null. */
export function asUnavailable(e: unknown, location: string): DatabaseUnavailable | null {
  if (e instanceof DatabaseUnavailable) return e;
  if (isBusy(e)) return new DatabaseBusy();
  if (isUnreachable(e)) return new DatabaseUnreachable(location, unreachableReason(e));
  return null;
}

const WRAPPER = /^(Failed to run the query|Failed query)/;

/**
 * A database error's message without the statement or its bound values: drivers put both into their messages,
 * and values can be password hashes or token hashes. What remains names the failure (constraint, lock, disk).
 */
export function safeDatabaseMessage(e: unknown): string {
  if (!(e instanceof DatabaseUnavailable) && isUnreachable(e))
    return `the database server cannot be reached (${unreachableReason(e)}); try again`;
  const messages = chain(e)
    .map((c) => String(c.message ?? ''))
    .filter((m) => m !== '');
  const own = messages.find((m) => !WRAPPER.test(m));
  if (own !== undefined) return own.replace(/\s*params:[\s\S]*$/i, '').trim();
  const code = sqliteCode(e);
  return code ? `a database query failed (${code})` : messages.length > 0 ? 'a database query failed' : String(e);
}

/**
 * Failures of the file rather than of the statement, told in words an operator can act on; anything else is
 * returned as it is (callers test for constraint errors).
 */
export function explainFileFailure(location: string, e: unknown): unknown {
  if (e instanceof DatabaseUnavailable || e instanceof DatabaseFailure) return e;
  const code = sqliteCode(e);
  const message = safeDatabaseMessage(e);
  if (code.startsWith('SQLITE_FULL') || /database or disk is full/.test(message)) {
    return new DatabaseFailure(`the disk holding the database ${location} is full; nothing was changed; free some space and try again`);
  }
  if (code.startsWith('SQLITE_READONLY') || /readonly database/.test(message)) {
    return new DatabaseFailure(
      `the database ${location} is read-only for this user; svc needs write access to the file and its folder (check their owner and mode)`,
    );
  }
  if (
    code.startsWith('SQLITE_IOERR') ||
    code.startsWith('SQLITE_CORRUPT') ||
    code.startsWith('SQLITE_NOTADB') ||
    code.startsWith('SQLITE_CANTOPEN')
  ) {
    return new DatabaseFailure(`the database ${location} could not be used (${message}); check the disk and the file`);
  }
  return e;
}
