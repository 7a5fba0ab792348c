// One JSON line per event on stderr. Callers pass only what is safe to keep: never a secret, token, cookie
// or password, and never a query string (OIDC callbacks carry codes there).

export type Fields = Record<string, string | number | boolean | null | undefined>;

export interface Logger {
  /** written only at log_level debug: routine events a test or an operator tracing a problem can wait on */
  debug?(event: string, fields?: Fields): void;
  info(event: string, fields?: Fields): void;
  warn(event: string, fields?: Fields): void;
  error(event: string, fields?: Fields): void;
}

const RANK = { debug: 0, info: 1, warn: 2, error: 3 } as const;

/**
 * Writes to stderr once per turn of the event loop, however many lines came: under load, one write per request was
 * a measurable share of the time. What is pending at exit is written before the process ends.
 */
function stderrLines(): (line: string) => void {
  let pending: string[] = [];
  const flush = () => {
    if (pending.length === 0) return;
    const text = pending.join('');
    pending = [];
    process.stderr.write(text);
  };
  process.once('exit', flush);
  return (line) => {
    if (pending.push(`${line}\n`) === 1) setImmediate(flush);
  };
}

/** Lines below `level` are not written (log_level in [server]). */
export function createLogger(write: (line: string) => void = stderrLines(), level: keyof typeof RANK = 'info'): Logger {
  const emit = (at: keyof typeof RANK, event: string, fields: Fields = {}) => {
    if (RANK[at] >= RANK[level]) write(JSON.stringify({ time: new Date().toISOString(), level: at, event, ...fields }));
  };
  return {
    debug: (event, fields) => emit('debug', event, fields),
    info: (event, fields) => emit('info', event, fields),
    warn: (event, fields) => emit('warn', event, fields),
    error: (event, fields) => emit('error', event, fields),
  };
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
