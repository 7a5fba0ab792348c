// Reads on a database server (sqld) over a few long-lived Hrana streams on one WebSocket. @libsql/client opens a
// stream for every execute(), and sqld builds a fresh SQLite connection for every stream, parsing svc's whole schema
// each time: most of sqld's CPU per statement (tursodatabase/libsql#653 calls that the design). A stream kept open
// keeps its connection, so a read costs sqld only the read. Each statement outside a transaction reads what was
// committed when it runs, so keeping a stream changes nothing about what a read sees.
//
// Only reads come here (drizzle's read-only `db`); writes and their transactions stay on @libsql/client.
import * as hrana from '@libsql/hrana-client';
import { LibsqlError, type Client, type InStatement, type ResultSet } from '@libsql/client';
import { answeredWithin } from './errors.ts';
import { statementSpan } from './spans.ts';

/** Streams kept open for reads on a database server: each holds one of sqld's connections. */
const READ_STREAMS = 4;

/** A read client that also offers the bearer lookup a connection of its own. */
export type ReadClient = Client & { executeLookup(statement: InStatement): Promise<ResultSet> };

/**
 * The read client for the database server at `url` (any scheme: reads go over its WebSocket), told of each
 * statement. Bearer lookups get a stream on a WebSocket of their own: a slow read (a search) can neither hold them
 * up behind it nor, when it times out and its connection is dropped, take them down with it.
 */
export function streamReads(url: string, authToken: string | null, timeoutMs: number, sent: () => void): ReadClient {
  const open = (streams: number) => new StreamReads(webSocketUrl(url), authToken ?? undefined, streams, timeoutMs, sent);
  const lookups = open(1);
  const reads = open(READ_STREAMS - 1);
  return Object.assign(
    reads.asClient(() => lookups.close()),
    { executeLookup: (s: InStatement) => lookups.execute(s) },
  );
}

interface Slot {
  readonly stream: hrana.WsStream;
  /** statements on their way on this stream */
  busy: number;
}

/** The WebSocket URL of a database URL: http → ws, https and libsql → wss (libsql with ?tls=0 → ws). */
function webSocketUrl(url: string): string {
  const u = new URL(url);
  const insecure = u.protocol === 'ws:' || u.protocol === 'http:' || (u.protocol === 'libsql:' && u.searchParams.get('tls') === '0');
  return `${insecure ? 'ws' : 'wss'}://${u.host}${u.pathname === '/' ? '' : u.pathname}`;
}

/**
 * A read-only client in the shape drizzle's libsql driver uses (execute), over `streams` long-lived streams: each
 * statement goes on the least busy one. A statement that gets no answer within `timeoutMs` fails, and the
 * WebSocket is dropped, so the next read opens a new one rather than wait behind a server that stopped answering;
 * a closed stream or connection is reopened at the next read.
 */
class StreamReads {
  private client: hrana.WsClient | null = null;
  private slots: Slot[] = [];
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly authToken: string | undefined,
    private readonly streams: number,
    private readonly timeoutMs: number,
    /** told of each statement sent */
    private readonly sent: () => void,
  ) {}

  async execute(statement: InStatement): Promise<ResultSet> {
    const slot = this.slot();
    slot.busy++;
    this.sent();
    try {
      const sql = typeof statement === 'string' ? statement : statement.sql;
      return resultSet(
        await statementSpan(sql, () => answeredWithin(slot.stream.query(toStmt(statement)), this.timeoutMs, () => this.drop())),
      );
    } catch (e) {
      // The stream (or the connection under it) is gone: the next read opens another.
      if (slot.stream.closed) this.forget(slot);
      throw toLibsqlError(e);
    } finally {
      slot.busy--;
    }
  }

  close(): void {
    this.closed = true;
    this.drop();
  }

  /** The least busy open stream; streams are opened up to `streams`, the connection first when there is none. */
  private slot(): Slot {
    if (this.closed) throw new LibsqlError('the database client is closed', 'CLIENT_CLOSED');
    if (this.client === null || this.client.closed) {
      this.drop();
      this.client = hrana.openWs(this.url, this.authToken);
    }
    this.slots = this.slots.filter((s) => !s.stream.closed);
    let best = this.slots[0];
    for (const s of this.slots) if (s.busy < best!.busy) best = s;
    if (best === undefined || (best.busy > 0 && this.slots.length < this.streams)) {
      const stream = this.client.openStream();
      stream.intMode = 'number';
      best = { stream, busy: 0 };
      this.slots.push(best);
    }
    return best;
  }

  private forget(slot: Slot): void {
    this.slots = this.slots.filter((s) => s !== slot);
  }

  /** Closes the connection and every stream on it; statements on their way fail. */
  private drop(): void {
    const client = this.client;
    this.client = null;
    this.slots = [];
    try {
      client?.close();
    } catch {
      // already closed
    }
  }

  /** This object as the libsql Client drizzle is given: reads only; `closing` also runs at close(). */
  asClient(closing: () => void = () => undefined): Client {
    const unsupported = (name: string) => () => {
      throw new Error(`svc's read-only database client has no ${name}: writes go through database.write`);
    };
    return {
      execute: (s: InStatement | string, args?: unknown) =>
        this.execute(typeof s === 'string' ? { sql: s, args: (args ?? []) as never } : s),
      batch: unsupported('batch'),
      migrate: unsupported('migrate'),
      transaction: unsupported('transaction'),
      executeMultiple: unsupported('executeMultiple'),
      sync: unsupported('sync'),
      reconnect: () => this.drop(),
      close: () => {
        this.close();
        closing();
      },
      get closed() {
        return false;
      },
      protocol: 'ws',
    } as unknown as Client;
  }
}

function toStmt(statement: InStatement): hrana.Stmt {
  const { sql, args } = typeof statement === 'string' ? { sql: statement, args: undefined } : statement;
  const stmt = new hrana.Stmt(sql);
  if (Array.isArray(args)) stmt.bindIndexes(args as hrana.InValue[]);
  else if (args) for (const [name, value] of Object.entries(args)) stmt.bindName(name, value as hrana.InValue);
  return stmt;
}

function resultSet(r: hrana.RowsResult): ResultSet {
  const columns = r.columnNames.map((c) => c ?? '');
  return {
    columns,
    columnTypes: r.columnDecltypes.map((c) => c ?? ''),
    rows: r.rows as unknown as ResultSet['rows'],
    rowsAffected: r.affectedRowCount,
    lastInsertRowid: r.lastInsertRowid,
    toJSON: () => ({ columns, rows: r.rows.map((row) => Array.from(row as ArrayLike<unknown>)) }),
  };
}

/** hrana's errors with the codes @libsql/client gives them, which db/errors.ts reads (SQLITE_…, HRANA_…). */
function toLibsqlError(e: unknown): unknown {
  if (!(e instanceof hrana.ClientError)) return e;
  return new LibsqlError(e.message, codeOf(e), undefined, undefined, e);
}

function codeOf(e: hrana.ClientError): string {
  if (e instanceof hrana.ResponseError && e.code !== undefined) return e.code;
  if (e instanceof hrana.ClosedError) return e.cause instanceof hrana.ClientError ? codeOf(e.cause) : 'HRANA_CLOSED_ERROR';
  if (e instanceof hrana.WebSocketError) return 'HRANA_WEBSOCKET_ERROR';
  if (e instanceof hrana.ProtoError) return 'HRANA_PROTO_ERROR';
  return 'UNKNOWN';
}
