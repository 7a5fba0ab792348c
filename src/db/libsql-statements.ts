// The embedded libsql binding (0.5.29) can leave a statement "in progress" after a failure: run() returns after
// a step that failed with SQLITE_BUSY without resetting the statement, get() and all() return on an error
// mid-way, and run() stops a statement that returns rows (INSERT … RETURNING) after its first row
// (tursodatabase/libsql-js#237, #238; tursodatabase/libsql-client-ts#352). A statement in progress keeps the
// connection's transaction open: on a writer, every later COMMIT fails with "SQL statements in progress" (even
// after ROLLBACK); on a reader, every later read sees the old snapshot. The binding has no reset(), and
// iterate() is no substitute: it steps the statement, re-running a write.
//
// So a connection whose statement failed is replaced: this wrapper opens a fresh connection and prepares
// statements again on it, transparently to drizzle and to statements prepared once (the bearer lookup). Readers
// are replaced at once; the writer when its transaction ends (see open.ts), since a statement that fails inside
// a transaction (a unique constraint) must not end it.
//
// Drizzle prepares every query it runs (its text is the same each time, the values are bound). Preparing costs
// SQLite a compile, ~10–40 µs for svc's statements, so each connection keeps the statements it prepared by their
// text, and a fresh connection starts with none. What makes sharing one safe:
// - The binding's run() and all() reset a statement before binding its values; its get() does not (it resets
//   only after it succeeded). A get() on a statement left by an all(), a run() or a failure would bind nothing
//   and answer for the last call's values, so such a get() prepares the statement anew (`ready` below).
// - run() stops a statement that returns rows after its first row, in progress: the connection is then treated
//   as after a failure (a reader replaced at once, the writer when its transaction ends).
// - Every query of a text binds all of its values (drizzle does): a value bound by an earlier call is not cleared.
// - Calls are synchronous and nothing here iterates, so no two queries use a statement at once.

import { statementSpan } from './spans.ts';

interface LibsqlStatement {
  /** whether it returns rows */
  readonly reader: boolean;
  raw(on?: boolean): LibsqlStatement;
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

interface LibsqlDatabase {
  prepare(sql: string): LibsqlStatement;
  exec(sql: string): void;
  close(): void;
  readonly inTransaction: boolean;
}

/** The connection as drizzle's better-sqlite3 driver sees it. */
export interface Connection {
  prepare(sql: string): unknown;
  exec(sql: string): void;
  readonly inTransaction: boolean;
  /** true when a statement failed in a way that may have left it in progress */
  readonly suspect: boolean;
  /** closes this connection and opens a fresh one */
  replace(): void;
  close(): void;
}

// A unique or check constraint ends its statement cleanly; anything else may not have.
const endsCleanly = (e: unknown) => String((e as { code?: unknown })?.code ?? '').startsWith('SQLITE_CONSTRAINT');

/** How many prepared statements a connection keeps (svc runs a few dozen distinct ones). */
const KEPT_STATEMENTS = 256;

/** A statement prepared on the connection, shared by every query of its text. */
interface Kept {
  readonly statement: LibsqlStatement;
  readonly returnsRows: boolean;
  /** the row mode it is in */
  raw: boolean;
  /** reset with nothing left of an earlier call: new, or after a get() that succeeded */
  ready: boolean;
}

/** What a connection is told when run() left a statement in progress. */
const LEFT_IN_PROGRESS = new Error('run() stopped a statement that returns rows after its first row');

class ReplacingConnection implements Connection {
  /** null after a replacement whose open failed: the next use opens it */
  private current: LibsqlDatabase | null;
  private closed = false;
  private kept = new Map<string, Kept>();
  generation = 0;
  suspect = false;

  constructor(
    private readonly open: () => LibsqlDatabase,
    private readonly replaceOnFailure: boolean,
    /** told of each statement run on this connection */
    readonly sent: () => void,
  ) {
    this.current = open();
  }

  private database(): LibsqlDatabase {
    if (this.closed) throw new Error('the database connection is closed');
    this.current ??= this.open();
    return this.current;
  }

  get inTransaction(): boolean {
    return this.current?.inTransaction ?? false;
  }

  prepare(sql: string): unknown {
    return new Statement(this, sql);
  }

  /** The statement of this text on the current connection, prepared once, or prepared anew when `fresh`. */
  statement(sql: string, fresh = false): Kept {
    let kept = fresh ? undefined : this.kept.get(sql);
    if (kept === undefined) {
      const statement = this.database().prepare(sql);
      kept = { statement, returnsRows: statement.reader, raw: false, ready: true };
      this.kept.delete(sql);
      // The oldest goes first; a query that still holds it keeps it until the connection is replaced.
      if (this.kept.size >= KEPT_STATEMENTS) this.kept.delete(this.kept.keys().next().value as string);
      this.kept.set(sql, kept);
    }
    return kept;
  }

  exec(sql: string): void {
    // exec() finalizes what it runs, so it never leaves a statement behind.
    this.sent();
    statementSpan(sql, () => this.database().exec(sql));
  }

  failed(e: unknown): void {
    if (endsCleanly(e)) return;
    this.suspect = true;
    if (this.replaceOnFailure) this.replace();
  }

  /**
   * Drops the connection and every statement prepared on it, then opens a fresh one. Statements prepared on the old
   * one still answer after its close() (from the snapshot of one left in progress), so nothing may reach them again
   * even when the open fails: the connection is then opened at its next use, which fails until it can be.
   */
  replace(): void {
    const old = this.current;
    this.current = null;
    this.kept = new Map();
    this.generation++;
    this.suspect = false;
    try {
      old?.close();
    } catch {
      // it is dropped either way
    }
    try {
      this.current = this.open();
    } catch {
      // opened again at the next use, which then says why it cannot be
    }
  }

  close(): void {
    this.closed = true;
    this.current?.close();
  }
}

class Statement {
  private kept: Kept;
  private generation: number;
  private rawMode = false;

  constructor(
    private readonly connection: ReplacingConnection,
    private readonly sql: string,
  ) {
    this.kept = connection.statement(sql);
    this.generation = connection.generation;
  }

  /**
   * The statement on the current connection, in this query's mode (another query of its text may have changed it);
   * for a get(), one that is ready.
   */
  private current(forGet: boolean): Kept {
    if (this.generation !== this.connection.generation) {
      this.kept = this.connection.statement(this.sql);
      this.generation = this.connection.generation;
    }
    if (forGet && !this.kept.ready) this.kept = this.connection.statement(this.sql, true);
    if (this.kept.raw !== this.rawMode) {
      this.kept.statement.raw(this.rawMode);
      this.kept.raw = this.rawMode;
    }
    // Not ready until a get() has succeeded on it: whatever follows (a result, an error) leaves it unreset.
    this.kept.ready = false;
    return this.kept;
  }

  raw(on?: boolean): this {
    this.rawMode = on ?? true;
    return this;
  }

  run(...params: unknown[]): unknown {
    const kept = this.current(false);
    const result = this.guard(() => kept.statement.run(...params));
    if (kept.returnsRows) this.connection.failed(LEFT_IN_PROGRESS);
    return result;
  }

  get(...params: unknown[]): unknown {
    const kept = this.current(true);
    const row = this.guard(() => kept.statement.get(...params));
    kept.ready = true;
    return row;
  }

  all(...params: unknown[]): unknown[] {
    const kept = this.current(false);
    return this.guard(() => kept.statement.all(...params));
  }

  private guard<T>(call: () => T): T {
    this.connection.sent();
    try {
      return statementSpan(this.sql, call);
    } catch (e) {
      this.connection.failed(e);
      throw e;
    }
  }
}

/** A connection that replaces itself after a failed statement (readers) or marks itself suspect (the writer). */
export function replacingConnection(open: () => LibsqlDatabase, options: { replaceOnFailure: boolean; sent?: () => void }): Connection {
  return new ReplacingConnection(open, options.replaceOnFailure, options.sent ?? (() => undefined));
}
