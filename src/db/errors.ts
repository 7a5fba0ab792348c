// Failures of the database itself, told apart so callers can answer them well: a database that stays busy is a
// 503 with Retry-After (CLI: exit 1 with a message), never a 500, and never a half-done change.

/** The write lock stayed taken past svc's wait; nothing was changed. */
export class DatabaseBusy extends Error {
  /** seconds a client should wait before trying again */
  readonly retryAfter = 1;
  constructor(waitedMs?: number) {
    const waited = waitedMs ? ` for ${(waitedMs / 1000).toFixed(1)} s` : '';
    super(`the database is busy (locked by another process${waited}); nothing was changed, try again`);
  }
}

export function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  const text = String((e as { message?: unknown })?.message ?? '');
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || /SQLITE_BUSY|database is locked|database table is locked/.test(text) ||
    (typeof code === 'string' && code.startsWith('SQLITE_BUSY'));
}

/**
 * A database error's message without the statement's bound values: drivers put them into their messages, and
 * they can hold password hashes or token hashes. What remains names the failure (constraint, lock, disk).
 */
export function safeDatabaseMessage(e: unknown): string {
  const message = String((e as { message?: unknown })?.message ?? e);
  // @libsql/client: "… Failed query: <sql> params: <values>"; drizzle: "Failed query: <sql>\nparams: <values>".
  return message
    .replace(/\s*params:[\s\S]*$/i, '')
    .replace(/^Failed query:[\s\S]*$/i, 'a database query failed')
    .trim();
}
