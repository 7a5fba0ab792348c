// 7. An upstream tool call through svc vs. the same call straight to the upstream (CONTRACT §6.1): a bare MCP SDK
// server (scripts/bench/server.ts bare) as the upstream, and svc serve with it as [upstream bare] (review = auto);
// `tools/call bare__echo` with a bearer token through svc against `tools/call echo` on the upstream itself, loaded
// in alternating rounds at 50 connections, then one call at a time. Through svc a call costs svc's whole path
// (auth, the tool row, the call on svc's one connection to the upstream, the audit row committed) on top of the
// upstream's. With taskset, svc runs alone on core 0, as a gateway on its own machine would; the upstream shares
// core 1 with the load generator (this process), so a call straight to it is measured on the very same core.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { median, timedLoad } from './timed.ts';
import { svcCommand } from '../node-flags.ts';

interface Bench {
  say: (line?: string) => void;
  /** true: the load generator runs on core 1, and servers are pinned with taskset */
  pin: boolean;
  work: string;
  seconds: number;
  rounds: number;
  /** a database with the bench user and a token of theirs */
  userDb: (name: string, labels: string) => Promise<{ url: string; token: string }>;
}

const ROOT = join(import.meta.dirname, '../..');

/**
 * A server started with its output (svc's request log) going to a file, as to a log collector of its own: were it a
 * pipe to this process, the load generator would read every request's log line on its core.
 */
function started(
  command: string,
  args: string[],
  ready: RegExp,
  logFile: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ChildProcess> {
  const out = openSync(logFile, 'w');
  const child = spawn(command, args, { stdio: ['ignore', out, out], env });
  closeSync(out);
  const seen = () => readFileSync(logFile, 'utf8').slice(-4000);
  return new Promise((resolve, reject) => {
    const exited = (code: number | null) => {
      clearInterval(look);
      reject(new Error(`${args.join(' ')} exited with ${code}: ${seen()}`));
    };
    const look = setInterval(() => {
      if (!ready.test(seen())) return;
      clearInterval(look);
      child.off('exit', exited);
      resolve(child);
    }, 50);
    child.once('exit', exited);
  });
}

const call = (name: string) => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: { text: 'hi' } } });
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

async function answersOk(url: string, token: string, name: string): Promise<boolean> {
  const r = await fetch(url, { method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${token}` }, body: call(name) }).catch(
    () => null,
  );
  const body = r ? await r.text() : '';
  return r?.status === 200 && body.includes('"text":"hi"') && !body.includes('"isError":true');
}

export async function benchUpstream(b: Bench): Promise<void> {
  const { url: dbUrl, token } = await b.userDb('upstream', 'eng');
  const base = 30000 + Math.floor(Math.random() * 10000);
  const [upstreamPort, svcPort] = [base, base + 1];
  const config = join(b.work, 'upstream.ini');
  writeFileSync(
    config,
    `[server]\nlisten = 127.0.0.1:${svcPort}\nbase_url = http://127.0.0.1:${svcPort}\ndatabase = ${dbUrl}\n` +
      `[auth]\ntoken\n    enabled true\n[upstream bare]\nurl = http://127.0.0.1:${upstreamPort}/mcp\nreview = auto\n`,
  );
  const children: ChildProcess[] = [];
  try {
    const on = (core: string, args: string[]): [string, string[]] =>
      b.pin ? ['taskset', ['-c', core, ...args]] : [args[0]!, args.slice(1)];
    children.push(
      await started(
        ...on('1', [process.execPath, '--import', 'tsx', join(ROOT, 'scripts/bench/server.ts'), 'bare', '-', String(upstreamPort)]),
        /ready/,
        join(b.work, 'upstream-bare.log'),
      ),
    );
    children.push(await started(...on('0', svcCommand('serve', '--config', config)), /listening/, join(b.work, 'upstream-svc.log')));
    const direct = `http://127.0.0.1:${upstreamPort}/mcp`;
    const through = `http://127.0.0.1:${svcPort}/mcp`;
    // Discovery approves bare's echo as found (review = auto): wait for it.
    for (let i = 0; i < 200 && !(await answersOk(through, token, 'bare__echo')); i++) await new Promise((r) => setTimeout(r, 100));
    if (!(await answersOk(through, token, 'bare__echo'))) throw new Error('bare__echo does not answer through svc');
    const load = (url: string, name: string, seconds: number, connections = 50) =>
      timedLoad({
        url,
        method: 'POST',
        connections,
        duration: seconds,
        headers: { ...HEADERS, authorization: `Bearer ${token}` },
        body: call(name),
      });
    await load(direct, 'echo', 2);
    await load(through, 'bare__echo', 2);
    const rates = { direct: [] as number[], through: [] as number[] };
    const p50 = { direct: [] as number[], through: [] as number[] };
    for (let round = 0; round < b.rounds * 2; round++) {
      const order = round % 2 === 0 ? (['direct', 'through'] as const) : (['through', 'direct'] as const);
      for (const which of order) {
        const { result: r, pct } =
          which === 'direct' ? await load(direct, 'echo', b.seconds) : await load(through, 'bare__echo', b.seconds);
        if (r.non2xx > 0 || r.errors > 0) throw new Error(`${which}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
        rates[which].push(r.requests.average);
        p50[which].push(pct(50));
      }
    }
    // One call at a time, in alternating rounds too: the p50 of each call's own time, and the time a call takes on
    // average (1 / the rate); the difference is what svc adds to each call.
    const single = { direct: [] as number[], through: [] as number[] };
    const single50 = { direct: [] as number[], through: [] as number[] };
    for (let round = 0; round < b.rounds * 2; round++) {
      const order = round % 2 === 0 ? (['direct', 'through'] as const) : (['through', 'direct'] as const);
      for (const which of order) {
        const { result: r, pct } =
          which === 'direct' ? await load(direct, 'echo', b.seconds, 1) : await load(through, 'bare__echo', b.seconds, 1);
        if (r.non2xx > 0 || r.errors > 0) throw new Error(`${which}, one at a time: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
        single[which].push(r.requests.average);
        single50[which].push(pct(50));
      }
    }
    if (!(await answersOk(through, token, 'bare__echo'))) throw new Error('bare__echo stopped answering through svc');
    const [d, t] = [median(rates.direct), median(rates.through)];
    const [d1, t1] = [median(single.direct), median(single.through)];
    const [d50, t50] = [median(single50.direct), median(single50.through)];
    const where = b.pin ? 'svc alone on core 0; the upstream and the load generator on core 1' : 'no CPU pinning';
    b.say(`7. upstream tools/call, median of ${b.rounds * 2} alternating rounds of ${b.seconds}s (${where})`);
    b.say(`   50 connections, straight to the upstream, echo:  ${d.toFixed(0)} req/s, p50 ${median(p50.direct).toFixed(2)} ms`);
    b.say(`   50 connections, through svc, bare__echo:         ${t.toFixed(0)} req/s, p50 ${median(p50.through).toFixed(2)} ms`);
    b.say(`   ratio through svc / straight: ${(t / d).toFixed(2)}   (target >= 0.95)`);
    b.say(`   svc's added p50 at 50 connections: ${(median(p50.through) - median(p50.direct)).toFixed(2)} ms`);
    b.say(`   one call at a time, p50: straight ${d50.toFixed(3)} ms, through svc ${t50.toFixed(3)} ms`);
    b.say(`   svc's added p50, one at a time: ${(t50 - d50).toFixed(3)} ms   (target <= 0.3)`);
    b.say(`   one call at a time, mean (1 / rate): straight ${(1000 / d1).toFixed(3)} ms, through svc ${(1000 / t1).toFixed(3)} ms`);
    b.say(`   svc's added time per call, one at a time (mean): ${(1000 / t1 - 1000 / d1).toFixed(3)} ms`);
  } finally {
    for (const c of children) c.kill('SIGKILL');
  }
}
