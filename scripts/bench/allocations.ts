// `npm run bench -- --only allocations`: what svc allocates per request, and where. svc runs in this process on the
// embedded file; a load generator in a child process (on core 1 with taskset) sends /mcp tools/call whoami, then
// tools/call of an upstream tool (a bare MCP SDK server as [upstream bare], in a child process too), at 50
// connections. V8's sampling heap profiler runs over each load with the objects the garbage collector freed kept in
// the profile, so it counts what a request allocates (the work of the young generation's collections and svc's GC
// tail), not what stays. Printed: bytes allocated per request, and the functions that allocate most.
import { spawn, type ChildProcess } from 'node:child_process';
import { Session } from 'node:inspector/promises';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.ts';
import { startServer } from '../../src/server.ts';
import { createLogger } from '../../src/log.ts';

type Say = (line?: string) => void;
interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children?: readonly ProfileNode[];
}

const ROOT = join(import.meta.dirname, '../..');
const TOP = 12;

/** autocannon in a child process: the requests it sent in `seconds`. */
function loadFor(pin: boolean, url: string, headers: Record<string, string>, body: string, seconds: number): Promise<number> {
  const script = `require('autocannon')({url:${JSON.stringify(url)},method:'POST',connections:50,duration:${seconds},headers:${JSON.stringify(
    headers,
  )},body:${JSON.stringify(body)}}).then((r)=>console.log(r.non2xx > 0 || r.errors > 0 ? -1 : r.requests.total))`;
  const args = [process.execPath, '-e', script];
  const child = pin ? spawn('taskset', ['-c', '1', ...args], { cwd: ROOT }) : spawn(args[0]!, args.slice(1), { cwd: ROOT });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  return new Promise((resolve, reject) =>
    child.on('exit', () => {
      const n = Number(out.trim());
      if (!(n > 0)) reject(new Error(`the load failed: ${out}`));
      else resolve(n);
    }),
  );
}

/** Bytes allocated per request by each function, from a sampling heap profile. */
function perFunction(head: ProfileNode, requests: number): { total: number; top: [string, number][] } {
  const bytes = new Map<string, number>();
  let total = 0;
  const walk = (n: ProfileNode) => {
    const where = n.callFrame.url === '' ? '(generated code)' : n.callFrame.url.split('/').slice(-3).join('/');
    const key = `${n.callFrame.functionName || '(anonymous)'} ${where}:${n.callFrame.lineNumber + 1}`;
    if (n.selfSize > 0) bytes.set(key, (bytes.get(key) ?? 0) + n.selfSize);
    total += n.selfSize;
    for (const c of n.children ?? []) walk(c);
  };
  walk(head);
  const top = [...bytes].sort((a, b) => b[1] - a[1]).slice(0, TOP);
  return { total: total / requests, top: top.map(([k, v]) => [k, v / requests]) };
}

export async function benchAllocations(b: {
  say: Say;
  pin: boolean;
  work: string;
  seconds: number;
  userDb: (name: string, labels: string) => Promise<{ url: string; token: string }>;
}): Promise<void> {
  const { url: dbUrl, token } = await b.userDb('allocations', 'eng');
  const base = 40000 + Math.floor(Math.random() * 10000);
  const [upstreamPort, svcPort] = [base, base + 1];
  const log = openSync(join(b.work, 'allocations-upstream.log'), 'w');
  const args = [process.execPath, '--import', 'tsx', join(ROOT, 'scripts/bench/server.ts'), 'bare', '-', String(upstreamPort)];
  const upstream: ChildProcess = b.pin
    ? spawn('taskset', ['-c', '1', ...args], { stdio: ['ignore', log, log] })
    : spawn(args[0]!, args.slice(1), { stdio: ['ignore', log, log] });
  closeSync(log);
  const config = loadConfig(
    `[server]\nlisten = 127.0.0.1:${svcPort}\nbase_url = http://127.0.0.1:${svcPort}\ndatabase = ${dbUrl}\n[auth]\ntoken\n    enabled true\n` +
      `[upstream bare]\nurl = http://127.0.0.1:${upstreamPort}/mcp\nreview = auto\n`,
    {},
    { mode: 'serve' },
  );
  // svc logs as it does in production, a JSON line per request, here to nowhere.
  const running = await startServer(
    config,
    createLogger(() => {}, 'info'),
  );
  const session = new Session();
  session.connect();
  try {
    const url = `http://127.0.0.1:${svcPort}/mcp`;
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` };
    const call = (name: string, args: Record<string, unknown>) =>
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
    const cases = [
      { name: '/mcp whoami', body: call('whoami', {}) },
      { name: 'an upstream call (bare__echo)', body: call('bare__echo', { text: 'hi' }) },
    ];
    // Discovery approves the upstream's echo as found (review = auto): wait for it.
    for (let i = 0; i < 200; i++) {
      const r = await fetch(url, { method: 'POST', headers, body: cases[1]!.body }).catch(() => null);
      const text = r ? await r.text() : '';
      if (r?.status === 200 && text.includes('"text":"hi"') && !text.includes('"isError":true')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    b.say(`9. bytes allocated per request, ${b.seconds} s at 50 connections each (V8's sampling heap profiler, freed objects kept)`);
    for (const c of cases) {
      await loadFor(b.pin, url, headers, c.body, 2);
      await session.post('HeapProfiler.startSampling', {
        samplingInterval: 8192,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      } as never);
      const requests = await loadFor(b.pin, url, headers, c.body, b.seconds);
      const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: ProfileNode } };
      const { total, top } = perFunction(profile.head, requests);
      b.say(`   ${c.name}: ${(total / 1024).toFixed(1)} KiB a request (${requests} requests); most:`);
      for (const [where, n] of top) b.say(`     ${(n / 1024).toFixed(1).padStart(5)} KiB  ${where}`);
    }
  } finally {
    session.disconnect();
    await running.stop();
    upstream.kill('SIGKILL');
  }
}
