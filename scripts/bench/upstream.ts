// 7. An upstream tool call through svc vs. the same call straight to the upstream (CONTRACT §6.1): a bare MCP SDK
// server (scripts/bench/server.ts bare) as the upstream, and svc serve with it as [upstream bare] (review = auto);
// `tools/call bare__echo` with a bearer token through svc against `tools/call echo` on the upstream itself, loaded
// in alternating rounds at 50 connections, then one call at a time. Through svc a call costs svc's whole path
// (auth, the tool row, the call on svc's one connection to the upstream, the audit row committed) on top of the
// upstream's. With taskset, svc runs alone on core 0, as a gateway on its own machine would; the upstream shares
// core 1 with the load generator (this process), so a call straight to it is measured on the very same core.
// 7b. Then a `prompts/get` and a `resources/read` the same way (CONTRACT §6.3): the upstream's prompt `greet` as
// `bare__greet` and its resource `bench://note` as `bare+bench://note` through svc, against the same request straight
// to the upstream, the four taking turns in alternating rounds. Through svc each is svc's whole path as for a tool
// (auth, the prompt's reviewed row or the upstream's labels, the request on the person's connection, the URIs in the
// answer mapped, the audit row committed). The upstream is bare with offers (server.ts): a tools/call there costs
// what it did before the prompt and the resource were added, so part 7's figures measure the same thing.
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

const request = (method: string, params: Record<string, unknown>) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
const call = (name: string) => request('tools/call', { name, arguments: { text: 'hi' } });
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** The upstream's prompt and resource, and what svc offers them as. */
const PROMPT = { straight: 'greet', through: 'bare__greet' } as const;
const RESOURCE = { straight: 'bench://note', through: 'bare+bench://note' } as const;

async function answer(url: string, token: string, body: string): Promise<{ status: number; text: string } | null> {
  const r = await fetch(url, { method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${token}` }, body }).catch(() => null);
  return r === null ? null : { status: r.status, text: await r.text() };
}

/** A 200 whose body holds every one of `expected` and is neither an error nor an error result. */
async function answersWith(url: string, token: string, body: string, expected: readonly string[]): Promise<boolean> {
  const a = await answer(url, token, body);
  return (
    a?.status === 200 && expected.every((e) => a.text.includes(e)) && !a.text.includes('"isError":true') && !a.text.includes('"error":')
  );
}

const answersOk = (url: string, token: string, name: string) => answersWith(url, token, call(name), ['"text":"hi"']);

/** One kind of request, as sent straight to the upstream and through svc, with what a right answer holds. */
interface Pair {
  readonly name: string;
  readonly straight: { readonly body: string; readonly expected: readonly string[] };
  readonly through: { readonly body: string; readonly expected: readonly string[] };
}
const PAIRS: readonly Pair[] = [
  {
    name: 'prompts/get',
    straight: {
      body: request('prompts/get', { name: PROMPT.straight, arguments: { text: 'hi' } }),
      expected: ['"messages"', '"text":"hi"'],
    },
    through: { body: request('prompts/get', { name: PROMPT.through, arguments: { text: 'hi' } }), expected: ['"messages"', '"text":"hi"'] },
  },
  {
    name: 'resources/read',
    straight: {
      body: request('resources/read', { uri: RESOURCE.straight }),
      expected: [`"uri":"${RESOURCE.straight}"`, '"text":"hi"'],
    },
    through: { body: request('resources/read', { uri: RESOURCE.through }), expected: [`"uri":"${RESOURCE.through}"`, '"text":"hi"'] },
  },
];

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
        ...on('1', [
          process.execPath,
          '--import',
          'tsx',
          join(ROOT, 'scripts/bench/server.ts'),
          'bare',
          '-',
          String(upstreamPort),
          'offers',
        ]),
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
    const send = (url: string, body: string, seconds: number, connections = 50) =>
      timedLoad({
        url,
        method: 'POST',
        connections,
        duration: seconds,
        headers: { ...HEADERS, authorization: `Bearer ${token}` },
        body,
      });
    const load = (url: string, name: string, seconds: number, connections = 50) => send(url, call(name), seconds, connections);
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

    // 7b. Prompts are approved when discovery first lists them (review = auto), after the tools: wait until svc
    // offers the prompt, then check every request of both kinds answers right both ways before any is timed.
    const listed = async () => (await answer(through, token, request('prompts/list', {})))?.text.includes(`"${PROMPT.through}"`) === true;
    for (let i = 0; i < 200 && !(await listed()); i++) await new Promise((r) => setTimeout(r, 100));
    if (!(await listed())) throw new Error(`prompts/list through svc does not offer ${PROMPT.through}`);
    const checkAll = async (when: string) => {
      for (const p of PAIRS)
        for (const [which, url] of [
          ['straight', direct],
          ['through', through],
        ] as const)
          if (!(await answersWith(url, token, p[which].body, p[which].expected))) {
            const got = await answer(url, token, p[which].body);
            throw new Error(`${p.name} ${which} ${when}: ${got?.status} ${got?.text.slice(0, 300)}`);
          }
    };
    await checkAll('before the rounds');
    const rows = PAIRS.flatMap((p) =>
      (['straight', 'through'] as const).map((which) => ({
        key: `${p.name} ${which}`,
        url: which === 'straight' ? direct : through,
        body: p[which].body,
      })),
    );
    for (const row of rows) await send(row.url, row.body, 2); // warm-up
    /** Each row's rates and p50s over alternating rounds: in a round every row takes its turn, the order reversed every other round. */
    const rounds = async (connections: number) => {
      const rate = new Map<string, number[]>(rows.map((r) => [r.key, []]));
      const p50s = new Map<string, number[]>(rows.map((r) => [r.key, []]));
      for (let round = 0; round < b.rounds * 2; round++) {
        for (const row of round % 2 === 0 ? rows : [...rows].reverse()) {
          const { result: r, pct } = await send(row.url, row.body, b.seconds, connections);
          if (r.non2xx > 0 || r.errors > 0)
            throw new Error(`${row.key}, ${connections} connections: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
          rate.get(row.key)!.push(r.requests.average);
          p50s.get(row.key)!.push(pct(50));
        }
      }
      return { rate: (key: string) => median(rate.get(key)!), p50: (key: string) => median(p50s.get(key)!) };
    };
    const many = await rounds(50);
    const one = await rounds(1);
    await checkAll('after the rounds');
    b.say();
    b.say(`7b. upstream prompts/get and resources/read, the same way: median of ${b.rounds * 2} alternating rounds of ${b.seconds}s`);
    b.say(
      `   (prompts/get ${PROMPT.straight} vs. ${PROMPT.through}, resources/read ${RESOURCE.straight} vs. ${RESOURCE.through}; ${where})`,
    );
    for (const p of PAIRS) {
      const [s, t] = [`${p.name} straight`, `${p.name} through`];
      b.say(
        `   ${p.name.padEnd(15)} 50 connections: straight ${many.rate(s).toFixed(0)} req/s, through svc ${many.rate(t).toFixed(0)} req/s: ratio ${(many.rate(t) / many.rate(s)).toFixed(2)}`,
      );
      b.say(
        `   ${p.name.padEnd(15)} one at a time, p50: straight ${one.p50(s).toFixed(3)} ms, through svc ${one.p50(t).toFixed(3)} ms: ratio ${(one.p50(t) / one.p50(s)).toFixed(2)}, svc adds ${(one.p50(t) - one.p50(s)).toFixed(3)} ms`,
      );
    }
  } finally {
    for (const c of children) c.kill('SIGKILL');
  }
}
