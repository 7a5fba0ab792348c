// `npm run bench`: measures side by side in one run and prints ratios (never a bare time as a verdict).
//   1. authenticated `tools/call whoami` on /mcp vs. the same handler without the auth core, with metrics on, without
//      the request log line, and vs. a bare server on each line of the MCP SDK answering `tools/call echo` (v1's in
//      2025 requests, v2's createMcpHandler in 2026-07-28 requests); svc's whoami in both eras (throughput, p99/p50);
//      and svc with tracing on (every request sampled, spans exported over OTLP/HTTP to a receiver the bench starts)
//      vs. off, in both eras, with the spans the receiver got
//   2. `search` over 100,000 generated items with the ACL filter vs. the bare FTS5 query (p50/p99 latency), and
//      beside 0 vs. 10,000 label sets the caller cannot see; then over 1,000,000 items (2b): a rare term, a common
//      term, the common term for a user who sees 1%, broad searches in slices vs. one statement, and empty answers
//      for a hidden word vs. a word in none; 2c: indexing what another writer wrote, svc's job vs. large batches
//   3. the bearer lookup with 1,000,000 tokens in the table vs. 1,000 (cost per lookup)
//   1b. svc serve --workers 2 vs. 1, with the load generator on the same machine
//   4. a token mint through svc's write path (queued BEGIN IMMEDIATE … COMMIT, commit check, synchronous=FULL) vs.
//      the same INSERT in autocommit on a plain connection with synchronous=NORMAL (what svc did before)
//   5. the single executable: cold start, resident memory idle and under load, its memory flags' throughput cost
//   6. a real sqld vs. the embedded file: the bearer lookup, /mcp whoami on one and on two instances
//      (scripts/bench/remote.ts)
//   7. an upstream tool call through svc vs. straight to the upstream, then (7b) a prompts/get and a resources/read
//      the same way (scripts/bench/upstream.ts)
//   8. the statements svc sends to its database per request, on the file and on sqld, beside the throughput: /mcp,
//      the token page and a mint from it, the OAuth token endpoint (scripts/bench/statements.ts)
//   9. the bytes svc allocates per request and the functions that allocate most, for /mcp whoami and an upstream
//      call (scripts/bench/allocations.ts)
// Options: --quick (smaller sizes and shorter runs, for a smoke check), --rounds N, --seconds S, --node-flags=… (part 1),
// --only mcp|workers|search|scale|backfill|lookup|writes|binary|remote|upstream|statements|allocations (one part).
import { spawn, spawnSync, execFileSync, type ChildProcess } from 'node:child_process';
import { closeSync, copyFileSync, mkdtempSync, openSync, readFileSync, rmSync, existsSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import Sqlite from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { openDatabase, type Database, type Db } from '../../src/db/open.ts';
import { createUser } from '../../src/store/users.ts';
import { createToken, checkToken } from '../../src/store/tokens.ts';
import { parseLabels } from '../../src/domain/labels.ts';
import { indexUnindexedItems } from '../../src/jobs/search-index.ts';
import { silentLogger } from '../../src/log.ts';
import { benchToken, benchUser } from './records.ts';
import { indexUnindexed, searchVisible, unindexedItems } from '../../src/store/search.ts';
import { queryTerms } from '../../src/domain/search-text.ts';
import type { Access } from '../../src/domain/visibility.ts';
import { storedHash } from '../../src/domain/secrets.ts';
import { benchRemote } from './remote.ts';
import { benchStatements } from './statements.ts';
import { benchUpstream } from './upstream.ts';
import { benchAllocations } from './allocations.ts';
import { median, percentile, timedLoad, type Timed } from './timed.ts';
import { runAll, runOnly } from './turns.ts';
import { SVC_NODE_FLAGS, svcCommand } from '../node-flags.ts';

const { values: opts } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    only: { type: 'string' },
    'scale-db': { type: 'string' },
    'node-flags': { type: 'string' },
  },
});
/** --node-flags=…: Node flags for every server part 1 starts, svc's and the bare one alike (say, a young generation's size). */
const NODE_FLAGS = (opts['node-flags'] ?? '').split(/\s+/).filter((f) => f !== '');
const QUICK = opts.quick ?? false;
const ROUNDS = Number(opts.rounds ?? (QUICK ? 1 : 3));
const SECONDS = Number(opts.seconds ?? (QUICK ? 2 : 5));
const ITEMS = QUICK ? 10_000 : 100_000;
const BIG_TOKENS = QUICK ? 100_000 : 1_000_000;
const pin = existsSync('/usr/bin/taskset');
const work = mkdtempSync(join(tmpdir(), 'svc-bench-'));
const say = (line = '') => process.stdout.write(`${line}\n`);
/** Who the bench's searches are for. */
const BENCH_CALLER = { user: 1, credential: 'bench' };

const fmt = (n: number, digits = 2) => n.toFixed(digits);
/** The machine's load over 1, 5 and 15 minutes: above ~2 on this 2-core machine, other work shared the cores. */
const loadAverage = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');

async function prepareDb(name: string): Promise<{ url: string; path: string; database: Database; db: Db; close(): void }> {
  const path = join(work, `${name}.db`);
  const url = `file:${path}`;
  const database = await openDatabase(url, null);
  await database.migrate();
  return { url, path, database, db: database.db, close: () => database.close() };
}

// ---------- 1. /mcp throughput, authenticated vs. not, in both protocol eras ----------

/**
 * The server processes part 1 starts: svc's app five ways (`traced`: `auth` with tracing on, traced.ts), and a bare
 * server on each line of the MCP SDK.
 */
type Mode = 'auth' | 'direct' | 'metrics' | 'nolog' | 'traced' | 'bare' | 'bare2';
/** The requests a row sends: 2025's (stateless, no initialize, no session) or 2026-07-28's (each carrying its revision). */
type Era = 'legacy' | 'modern';
/** One row of the part: a server and the requests it is loaded with. */
interface Row {
  readonly name: string;
  readonly mode: Mode;
  readonly era: Era;
}
/**
 * svc's authenticated server answers both eras from one process (as svc does): its two rows take their turns like the
 * others, and the order of the rounds alternates, so each era follows the other as often as it precedes it.
 */
const ROWS: readonly Row[] = [
  { name: 'direct', mode: 'direct', era: 'legacy' },
  { name: 'auth', mode: 'auth', era: 'legacy' },
  { name: 'auth-2026', mode: 'auth', era: 'modern' },
  { name: 'traced', mode: 'traced', era: 'legacy' },
  { name: 'traced-2026', mode: 'traced', era: 'modern' },
  { name: 'metrics', mode: 'metrics', era: 'legacy' },
  { name: 'nolog', mode: 'nolog', era: 'legacy' },
  { name: 'bare', mode: 'bare', era: 'legacy' },
  { name: 'bare2', mode: 'bare2', era: 'modern' },
];
const MODES: readonly Mode[] = ['direct', 'auth', 'metrics', 'nolog', 'traced', 'bare', 'bare2'];

/**
 * `traced` runs server.ts's `auth` through traced.ts, which starts tracing from the environment first, as `svc serve`
 * does; `otlp` is then the receiver's endpoint, given as OTEL_EXPORTER_OTLP_ENDPOINT and nothing else of OTEL_* (so
 * every setting is svc's default: parentbased_always_on, every request sampled; the batch processor's 2,048 spans
 * queued, 512 a batch, 5 s delay). No other server starts tracing, whatever the bench's own environment holds.
 */
function startServer(mode: Mode, url: string, port: number, otlp?: string): Promise<ChildProcess> {
  // svc's servers run with the flags svc runs with from source (node-flags.ts); the bare ones with Node's defaults.
  const own = mode === 'bare' || mode === 'bare2' ? [] : SVC_NODE_FLAGS;
  const script = mode === 'traced' ? ['traced.ts', 'auth'] : ['server.ts', mode];
  const args = [
    process.execPath,
    ...own,
    ...NODE_FLAGS,
    '--import',
    'tsx',
    join(import.meta.dirname, script[0]!),
    script[1]!,
    url,
    String(port),
  ];
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  if (mode === 'traced') {
    if (otlp === undefined) throw new Error('svc with tracing on needs an OTLP endpoint');
    env.OTEL_EXPORTER_OTLP_ENDPOINT = otlp;
  }
  // The request log goes to a file, as to a log collector of its own, and is shown only if the server fails: were
  // it a pipe to this process, the load generator would read every request's line on its core, and svc's write
  // would wait whenever the load generator was too busy to read.
  const logFile = join(work, `mcp-${mode}.log`);
  const out = openSync(logFile, 'w');
  const child = pin
    ? spawn('taskset', ['-c', '0', ...args], { stdio: ['ignore', 'pipe', out], env })
    : spawn(args[0]!, args.slice(1), { stdio: ['ignore', 'pipe', out], env });
  closeSync(out);
  child.once('exit', (code) => code && process.stderr.write(readFileSync(logFile, 'utf8').slice(-4000)));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve(child));
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
  });
}

/** The revision a modern request names, in its body's `_meta` and its headers. */
const MODERN = '2026-07-28';

/**
 * A `tools/call` as a client of the era sends it. 2025: the stateless request the bench has always sent (no
 * initialize, no session, no version header). 2026-07-28: `params._meta` with the revision, the client's info and its
 * capabilities, and the headers MCP-Protocol-Version, Mcp-Method and Mcp-Name (test/mcp-eras.test.ts sends the same).
 */
export function toolsCall(era: Era, name: string, args: Record<string, unknown>): { body: string; headers: Record<string, string> } {
  const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (era === 'legacy')
    return { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }), headers: base };
  const _meta = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientInfo': { name: 'svc-bench', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  return {
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args, _meta } }),
    headers: { ...base, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': name },
  };
}

async function load(port: number, token: string, seconds: number, row: Row): Promise<Timed> {
  const bare = row.mode === 'bare' || row.mode === 'bare2';
  const { body, headers } = bare ? toolsCall(row.era, 'echo', { text: 'hi' }) : toolsCall(row.era, 'whoami', {});
  return timedLoad({
    url: `http://127.0.0.1:${port}/mcp`,
    method: 'POST',
    connections: 50,
    duration: seconds,
    headers: { authorization: `Bearer ${token}`, ...headers },
    body,
  });
}

/** A database holding the bench user and a token of theirs. */
async function benchUserDb(name: string, labels: string): Promise<{ url: string; token: string }> {
  const { url, database, close } = await prepareDb(name);
  const { token } = await database.write(async (tx) => {
    const user = await createUser(tx, benchUser(parseLabels(labels)));
    return createToken(tx, user.id, benchToken('bench'));
  });
  close();
  return { url, token };
}

/** One answer of each row, read: a wrong answer (an error result, the other era's refusal) must not pass as a rate. */
async function answersRight(port: number, token: string, row: Row): Promise<void> {
  const bare = row.mode === 'bare' || row.mode === 'bare2';
  const { body, headers } = bare ? toolsCall(row.era, 'echo', { text: 'hi' }) : toolsCall(row.era, 'whoami', {});
  const r = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, ...headers },
    body,
  });
  const text = await r.text();
  const ok =
    r.status === 200 &&
    text.includes('"result"') &&
    !text.includes('"isError":true') &&
    (bare ? text.includes('"hi"') : text.includes('bench'));
  if (!ok) throw new Error(`${row.name}: ${r.status} ${text.slice(0, 300)}`);
  if (row.era === 'modern' && !text.includes('io.modelcontextprotocol/serverInfo'))
    throw new Error(`${row.name}: not answered as 2026-07-28 (no serverInfo in _meta): ${text.slice(0, 300)}`);
}

/** What part 1's OTLP receiver (otlp-sink.ts) got so far. */
interface SinkCounts {
  readonly requests: number;
  readonly bytes: number;
  readonly spans: number;
  readonly malformed: number;
  readonly names: Readonly<Record<string, number>>;
  readonly cpuMs: number;
}

/**
 * The OTLP receiver for svc with tracing on, in a process of its own on core 1 (with the load generator, which is
 * this process): none of its CPU is counted in svc's process or taken from svc's core, but it shares the load
 * generator's core (its CPU time is printed).
 */
function startSink(port: number): Promise<ChildProcess> {
  const args = [process.execPath, '--import', 'tsx', join(import.meta.dirname, 'otlp-sink.ts'), String(port)];
  const child = pin
    ? spawn('taskset', ['-c', '1', ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn(args[0]!, args.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve(child));
    child.once('exit', (code) => reject(new Error(`OTLP receiver exited with ${code}`)));
  });
}

const sinkCounts = async (port: number): Promise<SinkCounts> =>
  (await (await fetch(`http://127.0.0.1:${port}/counts`)).json()) as SinkCounts;

/**
 * The receiver's counts once svc's batch processor has sent what it held: unchanged for 6 s, longer than its 5 s
 * schedule (at most 30 s).
 */
async function settledCounts(port: number): Promise<SinkCounts> {
  let last = await sinkCounts(port);
  let still = 0;
  for (let i = 0; i < 30 && still < 6; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = await sinkCounts(port);
    still = now.spans === last.spans && now.requests === last.requests ? still + 1 : 0;
    last = now;
  }
  return last;
}

/** The CPU time a process has used so far, in ms (from /proc: its own threads, the collector's and the JIT's included); NaN without /proc. */
const PROC = existsSync('/proc/self/stat');
const TICK_MS = PROC ? 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) : Number.NaN;
function cpuMsOf(pid: number): number {
  if (!PROC) return Number.NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** The lines of `file` that hold `text` (a server's log can be hundreds of MB: grep reads it, not this process). */
function linesWith(file: string, text: string): string[] {
  const found = spawnSync('grep', ['-F', text, file], { encoding: 'utf8', maxBuffer: 2 ** 26 });
  return found.stdout.split('\n').filter((l) => l !== '');
}

async function benchMcp(): Promise<void> {
  const { url, token } = await benchUserDb('mcp', 'eng, finance');
  // One server of each kind for the whole part, all on core 0, loaded one at a time and running only in their turns
  // (turns.ts): each stays warm, and short alternating rounds (ABBA) spread drift over all instead of favouring
  // whichever ran first.
  const base = 20000 + Math.floor(Math.random() * 10000);
  const ports = Object.fromEntries(MODES.map((m, i) => [m, base + i])) as Record<Mode, number>;
  const sinkPort = base + MODES.length;
  const sink = await startSink(sinkPort);
  const servers: ChildProcess[] = [];
  const rates: Record<string, number[]> = {};
  const p99: Record<string, number[]> = {};
  const p50: Record<string, number[]> = {};
  /**
   * each round's CPU time of the server per request answered, in µs: other work taking turns on core 0 lowers a rate
   * by the time it takes, and this only by what it costs the server in caches and batching
   */
  const cpu: Record<string, number[]> = {};
  for (const row of ROWS) [rates[row.name], p99[row.name], p50[row.name], cpu[row.name]] = [[], [], [], []];
  const server = (mode: Mode) => servers[MODES.indexOf(mode)]!;
  /** svc with tracing on: the spans one request makes in each era, and the requests sent to it (each was sampled) */
  const perRequest: Partial<Record<Era, number>> = {};
  const served: Record<Era, number> = { legacy: 0, modern: 0 };
  let exported: SinkCounts;
  try {
    for (const mode of MODES) servers.push(await startServer(mode, url, ports[mode], `http://127.0.0.1:${sinkPort}`));
    // What one request exports, measured one at a time before any load: 20 requests of each era, then what the
    // batch processor sends within its schedule.
    runOnly(servers, [server('traced')]);
    for (const era of ['legacy', 'modern'] as const) {
      const before = await sinkCounts(sinkPort);
      const row = ROWS.find((r) => r.mode === 'traced' && r.era === era)!;
      for (let i = 0; i < 20; i++) await answersRight(ports.traced, token, row);
      served[era] += 20;
      perRequest[era] = ((await settledCounts(sinkPort)).spans - before.spans) / 20;
      if (perRequest[era] === 0) throw new Error(`svc with tracing on exported no span for 20 ${era} requests`);
    }
    for (const row of ROWS) {
      runOnly(servers, [server(row.mode)]);
      await answersRight(ports[row.mode], token, row);
      const { result: w } = await load(ports[row.mode], token, QUICK ? 2 : 5, row); // warm-up
      if (row.mode === 'traced') served[row.era] += 1 + w.requests.sent;
    }
    for (let round = 0; round < ROUNDS * 2; round++) {
      const order = round % 2 === 0 ? ROWS : [...ROWS].reverse();
      for (const row of order) {
        runOnly(servers, [server(row.mode)]);
        const pid = server(row.mode).pid!; // taskset runs the server in its own process (exec)
        const before = cpuMsOf(pid);
        const { result: r, pct: at } = await load(ports[row.mode], token, SECONDS, row);
        cpu[row.name]!.push(((cpuMsOf(pid) - before) * 1000) / r['2xx']);
        if (r.non2xx > 0 || r.errors > 0) throw new Error(`${row.name}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
        rates[row.name]!.push(r.requests.average);
        p99[row.name]!.push(at(99));
        p50[row.name]!.push(at(50));
        if (row.mode === 'traced') served[row.era] += r.requests.sent; // with those in flight at the end, which svc answers too
      }
    }
    // The spans svc still held at the last round's end go out within its batch processor's schedule.
    runOnly(servers, [server('traced')]);
    exported = await settledCounts(sinkPort);
  } finally {
    runAll(servers);
    for (const s of servers) s.kill('SIGKILL');
    sink.kill('SIGKILL');
  }
  const rate = (name: string) => median(rates[name]!);
  const [auth, modern, direct, withMetrics, quiet, bare, bare2, traced, traced2026] = [
    'auth',
    'auth-2026',
    'direct',
    'metrics',
    'nolog',
    'bare',
    'bare2',
    'traced',
    'traced-2026',
  ].map(rate) as [number, number, number, number, number, number, number, number, number];
  const fastest = Math.max(bare, bare2);
  say(
    `1. /mcp tools/call, 50 connections, median of ${ROUNDS * 2} alternating rounds of ${SECONDS}s${pin ? ' (servers on core 0, each running only in its turns)' : ' (each server running only in its turns)'}; svc with ${SVC_NODE_FLAGS.join(' ')}${NODE_FLAGS.length > 0 ? `, every server with ${NODE_FLAGS.join(' ')}` : ''}`,
  );
  const line = (label: string, name: string) =>
    say(
      `   ${label.padEnd(40)} ${fmt(rate(name), 0)} req/s, p50 ${fmt(median(p50[name]!), 2)} ms, p99 ${fmt(median(p99[name]!), 2)} ms, CPU ${fmt(median(cpu[name]!), 0)} µs a request`,
    );
  line('svc, authenticated whoami, 2025:', 'auth');
  line('svc, authenticated whoami, 2026-07-28:', 'auth-2026');
  line('svc, tracing on, whoami, 2025:', 'traced');
  line('svc, tracing on, whoami, 2026-07-28:', 'traced-2026');
  line('svc without auth, whoami, 2025:', 'direct');
  line('svc with metrics on, whoami, 2025:', 'metrics');
  line('svc without request log, 2025:', 'nolog');
  line('bare SDK v1 server, echo, 2025:', 'bare');
  line('bare SDK v2 server, echo, 2026-07-28:', 'bare2');
  say(`   ratio authenticated / without auth: ${fmt(auth / direct)}   (target >= 0.90)`);
  say(`   ratio bare v2 (2026-07-28) / bare v1 (2025): ${fmt(bare2 / bare)}`);
  say(`   ratio svc 2025 / the faster bare server (${bare >= bare2 ? 'v1' : 'v2'}): ${fmt(auth / fastest)}   (target >= 1.0)`);
  say(`   ratio svc 2026-07-28 / the faster bare server: ${fmt(modern / fastest)}   (target >= 1.0)`);
  say(`   ratio svc 2026-07-28 / svc 2025: ${fmt(modern / auth)}   (target >= 0.90)`);
  say(
    `   svc p99 / p50, 2025: ${fmt(median(p99.auth!) / median(p50.auth!))}   (target <= 3); 2026-07-28: ${fmt(median(p99['auth-2026']!) / median(p50['auth-2026']!))}`,
  );
  say(`   svc p99 / p50 by round, 2025: ${p99.auth!.map((x, i) => fmt(x / p50.auth![i]!)).join(', ')}`);
  say(`   ratio metrics on / off: ${fmt(withMetrics / auth)}   (target >= 0.97)`);
  say(`   ratio with / without the request log line: ${fmt(auth / quiet)}`);
  say(
    `   ratio tracing on (every request sampled) / off, 2025: ${fmt(traced / auth)}; 2026-07-28: ${fmt(traced2026 / modern)}   (target >= 0.85)`,
  );
  // The same quotient from the CPU each spent a request, which other work on the machine moves less than the rates.
  const cpuOf = (name: string) => median(cpu[name]!);
  say(
    `   the same from svc's CPU per request (off / on; other work on the machine moves it less): 2025: ${fmt(cpuOf('auth') / cpuOf('traced'))}; 2026-07-28: ${fmt(cpuOf('auth-2026') / cpuOf('traced-2026'))}`,
  );
  // The "on" figure is a tracer that exported: what the receiver got, against the requests sent to svc with tracing on
  // (each sampled, each with one HTTP span; under load the bearer lookups go in batches, one SELECT span each).
  const sent = served.legacy + served.modern;
  const roots = exported.names['POST /mcp'] ?? 0;
  // svc logs an exporter's failure at most once a minute, so a count here is a floor, and its words say what failed. A
  // timeout can be the bench's own doing: svc is stopped for its neighbours' turns (~40 s), longer than the exporter's
  // 10 s, and an export under way at a stop times out when svc runs again.
  const failed = linesWith(join(work, 'mcp-traced.log'), '"tracing_export_failed"').map(
    (l) => (JSON.parse(l) as { error?: string }).error ?? '?',
  );
  const failures = `${failed.length}${failed.length > 0 ? ` (at most one a minute is logged: ${[...new Set(failed)].join('; ')})` : ''}`;
  say(
    `   tracing on, exported: ${exported.requests} export requests, ${fmt(exported.bytes / 2 ** 20, 1)} MiB, ${exported.spans} spans; the HTTP span of ${roots} of the ${sent} requests sent (${fmt(roots / sent, 3)}; the rest dropped at the batch processor's full queue, or in a batch whose export failed); one at a time before the rounds a request made ${fmt(perRequest.legacy!, 2)} spans in 2025, ${fmt(perRequest.modern!, 2)} in 2026-07-28; export failures in svc's log: ${failures}; the receiver's CPU (core 1, with the load generator): ${fmt(exported.cpuMs / 1000, 1)} s`,
  );
  say(
    `   spans by name: ${Object.entries(exported.names)
      .sort((a, b) => b[1] - a[1])
      .map(([name, n]) => `${name} ${n}`)
      .join(', ')}`,
  );
  if (exported.requests === 0 || exported.malformed > 0 || linesWith(join(work, 'mcp-traced.log'), '"event":"tracing"').length === 0)
    throw new Error(
      `svc with tracing on: ${exported.requests} export requests (${exported.malformed} malformed); its log begins: ${spawnSync('head', ['-c', '1000', join(work, 'mcp-traced.log')], { encoding: 'utf8' }).stdout}`,
    );
}

// ---------- 1b. svc serve --workers 2 vs. 1 ----------

/**
 * The shipped CLI serving with one worker and with two, loaded in turns from a load generator on the same two-core
 * machine. Every process here may use both cores (the bench itself is pinned to core 1; children are not).
 */
async function benchWorkers(): Promise<void> {
  const { url, token } = await benchUserDb('workers', 'eng');
  const both = (args: string[]) => (pin ? ['taskset', ['-c', '0,1', ...args]] : [args[0]!, args.slice(1)]) as [string, string[]];
  const servers: ChildProcess[] = [];
  const ports: Record<1 | 2, number> = { 1: 30000 + Math.floor(Math.random() * 10000), 2: 0 };
  ports[2] = ports[1] + 1;
  try {
    for (const n of [1, 2] as const) {
      const config = join(work, `workers-${n}.ini`);
      writeFileSync(
        config,
        `[server]\nlisten = 127.0.0.1:${ports[n]}\ndatabase = ${url}\nlog_level = info\n[auth]\ntoken\n    enabled true\n`,
      );
      const [file, args] = both(svcCommand('serve', '--workers', String(n), '--config', config));
      const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      child.stderr!.on('data', () => undefined); // the request log, drained
      servers.push(child);
      for (let i = 0; i < 400; i++) {
        if (
          await fetch(`http://127.0.0.1:${ports[n]}/healthz`).then(
            (r) => r.ok,
            () => false,
          )
        )
          break;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const load = (n: 1 | 2, seconds: number): Promise<{ rate: number; bad: number }> =>
      new Promise((resolve, reject) => {
        const [file, args] = both([
          process.execPath,
          '--import',
          'tsx',
          join(import.meta.dirname, 'load.ts'),
          `http://127.0.0.1:${ports[n]}/mcp`,
          token,
          String(seconds),
        ]);
        let out = '';
        const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'inherit'] });
        child.stdout!.on('data', (d: Buffer) => (out += d));
        child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load exited ${code}`))));
      });
    await load(1, 3);
    await load(2, 3);
    const rates: Record<1 | 2, number[]> = { 1: [], 2: [] };
    for (const n of [1, 2, 2, 1, 1, 2] as const) {
      const r = await load(n, SECONDS);
      if (r.bad > 0) throw new Error(`--workers ${n}: ${r.bad} failed requests`);
      rates[n].push(r.rate);
    }
    const [one, two] = [median(rates[1]), median(rates[2])];
    say(
      `1b. svc serve --workers 2 vs. 1, /mcp whoami, 50 connections, the load generator on the same 2 cores, median of 3 rounds of ${SECONDS}s`,
    );
    say(`   1 worker: ${fmt(one, 0)} req/s; 2 workers: ${fmt(two, 0)} req/s; ratio 2 / 1: ${fmt(two / one)}`);
  } finally {
    for (const s of servers) s.kill('SIGTERM');
  }
}

// ---------- 2. search with the ACL vs. bare FTS5 ----------

/** A deterministic generator, so every run searches the same corpus. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const LABEL_SETS = [
  ...Array(8).fill(''),
  'eng',
  'eng',
  'finance',
  'hr',
  'legal',
  'sales',
  'sales',
  'eng,oncall',
  'eng,finance',
  'finance,legal',
  'hr,legal',
  'eng,finance,leadership',
  'board,finance,legal',
];

/** Indexes for search the items the bench wrote straight into the database, as svc does at start. */
/**
 * Indexes what the bench wrote straight into the table. svc's own job takes batches of ~80 ms so that it never holds
 * the event loop long; here nothing else runs, and batches of 2,000 items index three times faster (their postings
 * share the index's pages), so the setup takes minutes instead of an hour at a million items.
 */
async function indexAll(database: Database): Promise<void> {
  for (let after: number | null = 0; after !== null; ) {
    const found = await unindexedItems(database.db, after, 2000, 2000 * 4096);
    after = found.last;
    if (found.seqs.length > 0) await database.write((tx) => indexUnindexed(tx, found.seqs));
  }
}

async function benchSearch(): Promise<void> {
  const { path, database, db, close } = await prepareDb('search');
  const rand = prng(42);
  const vocabulary = Array.from({ length: 5000 }, (_, i) => `w${i.toString(36)}${'aeiou'[i % 5]}`);
  const word = () => vocabulary[Math.floor(vocabulary.length * rand() ** 3)]!; // skewed: low ranks are common
  const raw = new Sqlite(path);
  const insert = raw.prepare('INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
  const started = performance.now();
  raw.exec('BEGIN');
  for (let i = 0; i < ITEMS; i++) {
    const words = Array.from({ length: 150 }, word); // ~1 KB of text
    const labels = LABEL_SETS[Math.floor(rand() * LABEL_SETS.length)]!;
    insert.run(`doc/${i}`, `${word()} ${word()} ${word()}`, words.join(' '), labels, i, i);
  }
  raw.exec('COMMIT');
  // The baseline: a plain FTS5 index of the same items, made for the bench (svc itself keeps no FTS5 table).
  raw.exec(`CREATE VIRTUAL TABLE bench_fts USING fts5(title, text, content='items', content_rowid='seq', tokenize='unicode61 remove_diacritics 2');
    INSERT INTO bench_fts (bench_fts) VALUES ('rebuild')`);
  raw.close();
  await indexAll(database);
  const built = (performance.now() - started) / 1000;

  const user = ['eng', 'finance'];
  const queries = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? `${word()} ${word()}` : word()));
  const bare = (q: string) =>
    db.all(sql`SELECT i.id AS id, i.title AS title, snippet(bench_fts, 1, '', '', '…', 24) AS snippet
      FROM bench_fts JOIN items i ON i.seq = bench_fts.rowid
      WHERE bench_fts MATCH ${queryTerms(q)
        .map((t) => `"${t}"`)
        .join(' ')} ORDER BY bench_fts.rank LIMIT 10`);
  const acl = (q: string) => searchVisible(db, q, { labels: user, restriction: null }, 10, BENCH_CALLER);
  for (const q of queries.slice(0, 20)) {
    await bare(q);
    await acl(q);
  }
  const times: Record<'acl' | 'bare', number[]> = { acl: [], bare: [] };
  for (let pass = 0; pass < 3; pass++) {
    for (const q of queries) {
      // Interleaved, so both see the same cache state and machine load.
      let t = performance.now();
      await bare(q);
      times.bare.push(performance.now() - t);
      t = performance.now();
      await acl(q);
      times.acl.push(performance.now() - t);
    }
  }
  close();
  say(
    `2. search over ${ITEMS.toLocaleString('en')} items of ~1 KB (built in ${fmt(built, 1)} s), user with labels eng+finance, ${times.acl.length} queries`,
  );
  say(`   with ACL filter: p50 ${fmt(percentile(times.acl, 50), 3)} ms, p99 ${fmt(percentile(times.acl, 99), 3)} ms`);
  say(`   bare FTS5:       p50 ${fmt(percentile(times.bare, 50), 3)} ms, p99 ${fmt(percentile(times.bare, 99), 3)} ms`);
  say(
    `   ratio ACL / bare: p50 ${fmt(percentile(times.acl, 50) / percentile(times.bare, 50))}, p99 ${fmt(percentile(times.acl, 99) / percentile(times.bare, 99))}   (target <= 1.5)`,
  );
  await hiddenSetsTiming();
}

/**
 * Whether a search's time tells how many label sets its caller may not see: two databases with the same 200 visible
 * items, one with 10,000 hidden label sets (an item each) besides; the same searches on both, alternating.
 */
async function hiddenSetsTiming(): Promise<void> {
  const HIDDEN_SETS = 10_000;
  const made = await Promise.all(
    [0, HIDDEN_SETS].map(async (hidden) => {
      const { path, database, db, close } = await prepareDb(`sets-${hidden}`);
      const raw = new Sqlite(path);
      const insert = raw.prepare('INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
      raw.exec('BEGIN');
      for (let i = 0; i < 200; i++) insert.run(`open/${i}`, `memo ${i}`, `quarterly figures ${i % 10}`, '', i, i);
      for (let i = 0; i < hidden; i++) insert.run(`hidden/${i}`, `memo ${i}`, 'quarterly figures', `vault,x${i}`, i, i);
      raw.exec('COMMIT');
      raw.close();
      await indexAll(database);
      return { db, close };
    }),
  );
  const access = { labels: [], restriction: null };
  const times: number[][] = [[], []];
  for (let round = 0; round < 2200; round++) {
    for (const k of [0, 1]) {
      const at = performance.now();
      const hits = await searchVisible(made[k]!.db, 'quarterly figures', access, 10, BENCH_CALLER);
      if (round >= 200) times[k]!.push(performance.now() - at);
      if (hits.length !== 10 || hits.some((h) => !h.id.startsWith('open/'))) throw new Error('wrong hits');
    }
  }
  for (const m of made) m.close();
  const [none, many] = [percentile(times[0]!, 50), percentile(times[1]!, 50)];
  say(
    `   a search by a caller who sees 1 label set, beside 0 vs. ${HIDDEN_SETS.toLocaleString('en')} label sets it cannot see: p50 ${fmt(none, 3)} vs. ${fmt(many, 3)} ms, ratio ${fmt(many / none)}   (target <= 1.2)`,
  );
}

/**
 * The longest the event loop went without a turn, from start to stop: a timer of its own that asks for the next turn
 * each time it runs, and the time since its last run when stopped (a loop held throughout never ran it).
 */
function holdMeter(): { stop(): number } {
  let last = performance.now();
  let longest = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    timer = setTimeout(tick, 0);
  };
  timer = setTimeout(tick, 0);
  return {
    stop() {
      clearTimeout(timer);
      return Math.max(longest, performance.now() - last);
    },
  };
}

// ---------- 2c. indexing what another writer wrote, in the background ----------

/**
 * 10,000 items of ~1 KB written straight into the table, as an older svc wrote them, indexed twice from copies of
 * one file: by svc's job (batches of ~80 ms, the event loop turning between two) and in batches of 2,000 items; each
 * with its rate and the longest the event loop was held.
 */
async function benchBackfill(): Promise<void> {
  const count = QUICK ? 2_000 : 10_000;
  const { path, close } = await prepareDb('backfill');
  close();
  const rand = prng(5);
  const vocabulary = Array.from({ length: 20_000 }, (_, i) => `v${i.toString(36)}${'aeiou'[i % 5]}`);
  const word = () => vocabulary[Math.floor(vocabulary.length * rand() ** 2.5)]!;
  const raw = new Sqlite(path);
  const insert = raw.prepare('INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
  const sets = ['', 'eng', 'hr', 'eng,hr', 'finance', 'finance,hr', 'ops'];
  raw.exec('BEGIN');
  for (let i = 0; i < count; i++)
    insert.run(`doc/${i}`, `${word()} ${word()}`, Array.from({ length: 140 }, word).join(' '), sets[i % sets.length]!, i, i);
  raw.exec('COMMIT');
  raw.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  raw.close();
  const run = async (how: 'job' | 'batches') => {
    const copy = join(work, `backfill-${how}.db`);
    copyFileSync(path, copy);
    const database = await openDatabase(`file:${copy}`, null);
    const held = holdMeter();
    const at = performance.now();
    if (how === 'job') await indexUnindexedItems(database, silentLogger);
    else await indexAll(database);
    const seconds = (performance.now() - at) / 1000;
    const longest = held.stop();
    database.close();
    return { rate: count / seconds, held: longest };
  };
  const job = await run('job');
  const batches = await run('batches');
  say(`2c. indexing ${count.toLocaleString('en')} items another writer wrote (~1 KB each)`);
  say(`   svc's job, batches of ~80 ms: ${fmt(job.rate, 0)} items/s, event loop held at most ${fmt(job.held, 0)} ms`);
  say(`   batches of 2,000 items:       ${fmt(batches.rate, 0)} items/s, event loop held at most ${fmt(batches.held, 0)} ms`);
  say(`   rate ratio job / 2,000-item batches: ${fmt(job.rate / batches.rate)}`);
}

// ---------- 2b. search at scale: 1,000,000 items ----------

/**
 * A million items of ~1 KB with a realistic label mix: 0.5% public, 0.5% labelled for one small team, the rest spread
 * over departments and their combinations. Ten rare terms (in ~20 items each) and ten common ones (in ~10% each).
 * Three cases, each over all ten terms: a rare term and a common term for a user who sees everything, and the common
 * term for the small team's member, who sees 1%.
 */
async function benchScale(): Promise<void> {
  const count = QUICK ? 100_000 : 1_000_000;
  // --scale-db PATH keeps the generated database there and uses it again on the next run (it takes minutes to make).
  const kept = opts['scale-db'];
  const reuse = kept !== undefined && existsSync(kept);
  const { path, database, db, close } =
    kept === undefined
      ? await prepareDb('scale')
      : await (async () => {
          const database = await openDatabase(`file:${kept}`, null);
          await database.migrate();
          return { path: kept, database, db: database.db, close: () => database.close() };
        })();
  const rand = prng(7);
  const vocabulary = Array.from({ length: 20_000 }, (_, i) => `v${i.toString(36)}${'aeiou'[i % 5]}`);
  const word = () => vocabulary[Math.floor(vocabulary.length * rand() ** 2.5)]!;
  const departments = ['eng', 'finance', 'hr', 'legal', 'sales', 'ops', 'support', 'marketing', 'board', 'security'];
  const rare = Array.from({ length: 10 }, (_, i) => `rareterm${i}`);
  const common = Array.from({ length: 10 }, (_, i) => `commonterm${i}`);
  const labelsFor = (): string => {
    const r = rand();
    if (r < 0.005) return '';
    if (r < 0.01) return 'tiger-team';
    const first = departments[Math.floor(rand() * departments.length)]!;
    if (rand() < 0.6) return first;
    const second = departments[Math.floor(rand() * departments.length)]!;
    return [...new Set([first, second, ...(rand() < 0.2 ? ['confidential'] : [])])].sort().join(',');
  };
  const started = performance.now();
  if (!reuse) {
    const raw = new Sqlite(path);
    raw.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF');
    const insert = raw.prepare('INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
    const rareAt = new Map<number, string>();
    for (const term of rare) for (let k = 0; k < 20; k++) rareAt.set(Math.floor(rand() * count), term);
    raw.exec('BEGIN');
    for (let i = 0; i < count; i++) {
      const words = Array.from({ length: 140 }, word);
      for (const term of common) if (rand() < 0.1) words[Math.floor(rand() * words.length)] = term;
      const r = rareAt.get(i);
      if (r) words[0] = r;
      insert.run(`doc/${i}`, `${word()} ${word()} ${word()}`, words.join(' '), labelsFor(), i, i);
      if (i % 100_000 === 99_999) {
        raw.exec('COMMIT');
        raw.exec('BEGIN');
      }
    }
    raw.exec('COMMIT');
    raw.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    raw.close();
  }
  await indexAll(database);
  const built = (performance.now() - started) / 1000;
  const everyone = { labels: ['confidential', 'tiger-team', ...departments].sort(), restriction: null };
  const team = { labels: ['tiger-team'], restriction: null };
  const visibleShare = (await db.get<{ n: number }>(sql`SELECT count(*) AS n FROM items WHERE labels IN ('', 'tiger-team')`)).n / count;
  const cases = [
    { name: 'rare term, sees everything', terms: rare, access: everyone },
    { name: 'common term (~10%), sees everything', terms: common, access: everyone },
    { name: `common term (~10%), sees ${fmt(visibleShare * 100, 1)}%`, terms: common, access: team },
  ];
  say(
    `2b. search over ${count.toLocaleString('en')} items of ~1 KB (${reuse ? `kept in ${kept}` : `built in ${fmt(built, 0)} s`}), 10 terms per case, limit 10`,
  );
  for (const c of cases) {
    for (const t of c.terms) await searchVisible(db, t, c.access, 10, BENCH_CALLER); // warm
    const times: number[] = [];
    for (let pass = 0; pass < 5; pass++) {
      for (const t of c.terms) {
        const at = performance.now();
        const hits = await searchVisible(db, t, c.access, 10, BENCH_CALLER);
        times.push(performance.now() - at);
        if (hits.length === 0) throw new Error(`no hits for ${t}`);
      }
    }
    say(
      `   ${c.name.padEnd(38)} p50 ${fmt(percentile(times, 50), 1)} ms, p99 ${fmt(percentile(times, 99), 1)} ms   (targets p50 <= 50, p99 <= 150)`,
    );
  }
  await broadSearches(db, everyone);
  const hidden = await hiddenWordTiming(path, database, everyone);
  say(
    `   empty answers, a word in ${HIDDEN.toLocaleString('en')} items the caller cannot see vs. a word in none: p50 ${fmt(hidden.hidden, 3)} vs. ${fmt(hidden.nowhere, 3)} ms, ratio ${fmt(hidden.hidden / hidden.nowhere)}   (target <= 1.2)`,
  );
  close();
}

/**
 * Broad searches: the vocabulary's first word is in ~93% of the items and its second in ~57%. Each query is ranked a
 * slice at a time, taking turns (as svc runs it), against the same ranking in one statement; printed: the time of
 * each, and the longest the event loop was held meanwhile (what every other request waits at most).
 */
async function broadSearches(db: Db, access: Access): Promise<void> {
  const whole = { limits: { slice: 1e12, slices: 1e12 } };
  const queries = ['v0a', 'v0a v1e', 'v0a v1e v2i v3o'];
  const run = async (query: string, options: Parameters<typeof searchVisible>[5]) => {
    const held = holdMeter();
    const at = performance.now();
    const hits = await searchVisible(db, query, access, 10, BENCH_CALLER, options);
    const took = performance.now() - at;
    const longest = held.stop();
    if (hits.length === 0) throw new Error(`no hits for ${query}`);
    return { took, held: longest, hits: hits.map((h) => h.id).join() };
  };
  say('   broad searches, sees everything: ranked in slices taking turns vs. in one statement (median of 3)');
  for (const query of queries) {
    const sliced: { took: number; held: number }[] = [];
    const one: { took: number; held: number }[] = [];
    for (let round = 0; round < 3; round++) {
      const a = await run(query, {});
      const b = await run(query, whole);
      if (a.hits !== b.hits) throw new Error(`${query}: the sliced ranking differs from the whole one`);
      sliced.push(a);
      one.push(b);
    }
    const m = (xs: { took: number; held: number }[], k: 'took' | 'held') => median(xs.map((x) => x[k]));
    say(
      `   "${query}"`.padEnd(24) +
        `sliced ${fmt(m(sliced, 'took'), 0)} ms (event loop held at most ${fmt(m(sliced, 'held'), 0)} ms), one statement ${fmt(m(one, 'took'), 0)} ms (held ${fmt(m(one, 'held'), 0)} ms): time ratio ${fmt(m(sliced, 'took') / m(one, 'took'))}`,
    );
  }
}

/** How many items hold the word the caller may not see. */
const HIDDEN = 3000;

/**
 * Whether a search's time tells a caller what documents it cannot see contain: the p50 of empty answers for a word
 * in HIDDEN items labelled `vault` (which `access` lacks), against a word in no item, alternating. The items are
 * added to the database once.
 */
async function hiddenWordTiming(path: string, database: Database, access: Access): Promise<{ hidden: number; nowhere: number }> {
  const raw = new Sqlite(path);
  const { n } = raw.prepare(`SELECT count(*) AS n FROM items WHERE labels = 'vault'`).get() as { n: number };
  if (n < HIDDEN) {
    const insert = raw.prepare('INSERT INTO items (id, title, text, labels, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
    const rand = prng(11);
    raw.exec('BEGIN');
    for (let i = n; i < HIDDEN; i++) {
      const words = Array.from({ length: 140 }, () => `filler${Math.floor(rand() * 5000).toString(36)}`);
      words[Math.floor(rand() * words.length)] = 'vaultword';
      insert.run(`vault/${i}`, `memo ${i}`, words.join(' '), 'vault', i, i);
    }
    raw.exec('COMMIT');
  }
  raw.close();
  await indexAll(database);
  if (access.labels.includes('vault')) throw new Error('the caller must not see the vault');
  const times = { hidden: [] as number[], nowhere: [] as number[] };
  const words = { hidden: 'vaultword', nowhere: 'nowhereword' } as const;
  for (let round = 0; round < 440; round++) {
    for (const kind of ['hidden', 'nowhere'] as const) {
      const at = performance.now();
      const hits = await searchVisible(database.db, words[kind], access, 10, BENCH_CALLER);
      if (round >= 40) times[kind].push(performance.now() - at);
      if (hits.length > 0) throw new Error(`the caller found ${words[kind]}`);
    }
  }
  return { hidden: percentile(times.hidden, 50), nowhere: percentile(times.nowhere, 50) };
}

// ---------- 3. bearer lookup, 1,000,000 tokens vs. 1,000 ----------

/** A database with `count` tokens and 100 real ones; returns a function timing one batch of lookups (µs each). */
async function tokenTable(count: number): Promise<{ batch(): Promise<number>; close(): void }> {
  const { path, database, close } = await prepareDb(`tokens-${count}`);
  // The filler tokens belong to a user of their own: one user may hold at most ACTIVE_TOKENS_MAX active tokens.
  const filler = await database.write((tx) => createUser(tx, { ...benchUser(['eng']), uid: 'filler', email: 'filler@example.com' }));
  const user = await database.write((tx) => createUser(tx, benchUser(['eng'])));
  const raw = new Sqlite(path);
  const insert = raw.prepare('INSERT INTO tokens (id, hash, user_id, name, created_at) VALUES (?, ?, ?, ?, ?)');
  raw.exec('BEGIN');
  for (let i = 0; i < count - 100; i++) insert.run(`tok_filler${i}`, storedHash(randomBytes(20).toString('hex')), filler.id, 'filler', i);
  raw.exec('COMMIT');
  raw.close();
  const real: string[] = [];
  for (let i = 0; i < 100; i++) real.push((await database.write((tx) => createToken(tx, user.id, benchToken(`real${i}`)))).token);
  for (const t of real) await checkToken(database, t); // warm-up (the lookup writes nothing: the token channel stamps last_used_at)
  await new Promise((r) => setTimeout(r, 50));
  return {
    async batch() {
      const t = performance.now();
      for (let i = 0; i < 2000; i++) {
        const r = await checkToken(database, real[i % 100]!);
        if (!r.ok) throw new Error('a valid token was refused');
      }
      return ((performance.now() - t) * 1000) / 2000;
    },
    close,
  };
}

async function benchLookup(): Promise<void> {
  const small = await tokenTable(1_000);
  const big = await tokenTable(BIG_TOKENS);
  const times: { small: number[]; big: number[] } = { small: [], big: [] };
  // Interleaved batches, so both tables see the same machine state.
  for (let i = 0; i < 40; i++) {
    times.small.push(await small.batch());
    times.big.push(await big.batch());
  }
  small.close();
  big.close();
  const [s, b] = [median(times.small), median(times.big)];
  say(`3. bearer lookup (format check + SHA-256 + one indexed lookup and join), median of 40 interleaved batches of 2,000`);
  say(`   1,000 tokens:     ${fmt(s)} µs per lookup`);
  say(`   ${BIG_TOKENS.toLocaleString('en')} tokens: ${fmt(b)} µs per lookup`);
  say(`   ratio ${BIG_TOKENS.toLocaleString('en')} / 1,000: ${fmt(b / s)}   (target <= 1.2)`);
}

// ---------- 4. the write path: what durability costs per write ----------

async function benchWrites(): Promise<void> {
  const { path, database, close } = await prepareDb('writes');
  // One user may hold at most ACTIVE_TOKENS_MAX active tokens: the mints go to a new user every 100, and the plain
  // inserts to a user of their own.
  const users: number[] = [];
  for (let i = 0; i <= 4; i++) {
    const made = await database.write((tx) => createUser(tx, { ...benchUser([]), uid: `writer${i}`, email: `writer${i}@example.com` }));
    users.push(made.id);
  }
  const plain = new Sqlite(path);
  plain.exec('PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL;');
  const insert = plain.prepare('INSERT INTO tokens (id, hash, user_id, name, created_at) VALUES (?, ?, ?, ?, ?)');
  const n = QUICK ? 100 : 400;
  const times: { svc: number[]; plain: number[] } = { svc: [], plain: [] };
  for (let i = 0; i < n; i++) {
    // Interleaved, so both see the same disk and machine state.
    let t = performance.now();
    await database.write((tx) => createToken(tx, users[1 + Math.floor(i / 100)]!, benchToken(`svc${i}`)));
    times.svc.push(performance.now() - t);
    t = performance.now();
    insert.run(`tok_plain${i}`, storedHash(randomBytes(20).toString('hex')), users[0]!, `plain${i}`, Date.now());
    times.plain.push(performance.now() - t);
  }
  plain.close();
  close();
  const [a, b] = [median(times.svc), median(times.plain)];
  say(`4. one token mint, ${n} interleaved pairs, median (the disk's fsync dominates both; writes are rare next to reads)`);
  say(`   svc write path (queue, BEGIN IMMEDIATE … COMMIT, commit check, synchronous=FULL): ${fmt(a, 3)} ms`);
  say(`   plain autocommit INSERT, synchronous=NORMAL:                                       ${fmt(b, 3)} ms`);
  say(`   ratio svc / plain: ${fmt(a / b)}`);
}

// ---------- 5. the single executable: start, memory, and the cost of its memory flags ----------

/** Builds dist/svc from this checkout and runs scripts/bench/binary.ts on it (its own output). */
async function benchBinary(): Promise<void> {
  const tsx = ['--import', 'tsx'];
  execFileSync(process.execPath, [...tsx, join(import.meta.dirname, '../build-binary.ts')], { stdio: ['ignore', 'ignore', 'inherit'] });
  say('5. the single executable (dist/svc, built from this checkout)');
  const out = execFileSync(process.execPath, [...tsx, join(import.meta.dirname, 'binary.ts')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  for (const line of out.trim().split('\n')) say(`   ${line}`);
}

try {
  if (pin) execFileSync('taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });
  say(`svc benchmark${QUICK ? ' (--quick: smaller sizes, not the reported figures)' : ''}, node ${process.version}`);
  say(`load average at the start: ${loadAverage()}`);
  say();
  const parts = {
    mcp: benchMcp,
    workers: benchWorkers,
    search: benchSearch,
    scale: benchScale,
    backfill: benchBackfill,
    lookup: benchLookup,
    writes: benchWrites,
    binary: benchBinary,
    remote: () => benchRemote(say, work, SECONDS, QUICK),
    upstream: () => benchUpstream({ say, pin, work, seconds: SECONDS, rounds: ROUNDS, userDb: benchUserDb }),
    statements: () => benchStatements(say, work, SECONDS, QUICK),
    allocations: () => benchAllocations({ say, pin, work, seconds: SECONDS, userDb: benchUserDb }),
  };
  for (const [name, run] of Object.entries(parts)) {
    if (opts.only !== undefined && opts.only !== name) continue;
    await run();
    say(`   (load average after this part: ${loadAverage()})`);
    say();
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
