// What a hostile or noisy upstream cannot do to svc (CONTRACT §6.1, docs/upstreams.md), through `svc serve` as a
// process, HTTP, MCP through the SDK's client and the CLI as a process, with small stdio MCP servers written here:
// - a listing reads at most 20 pages of an upstream that pages forever, keeps at most 1,000 tools of one offering
//   5,000, and leaves out a name over 128 characters and a definition over 64 KiB; svc keeps answering meanwhile;
// - a flood of notifications/tools/list_changed (shared and isolation = user) is one listing now and one 10 s later,
//   not one per notification, and the audit trail grows by a handful of rows;
// - the Set labels form of /admin/tools refuses an empty field: the tool keeps its labels and stays closed to a user
//   without them.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { install, sourceRunner, type Installation, type Serving } from './helpers/installation.ts';
import { DEFAULT_AUTH, ROOT } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';
import { Browser } from './helpers/http.ts';

const SDK = join(ROOT, 'node_modules/@modelcontextprotocol/sdk/dist/esm');

/**
 * One stdio MCP server, hostile in the way MODE says. Every tools/list request it receives is a line in COUNT_FILE
 * (its process's id and the time), so the test counts what svc asked for.
 * - endless: one tool a page, and always a nextCursor;
 * - many: 5,000 tools, 500 a page;
 * - odd: names of 128, 129 and 200 characters, definitions of exactly 16 KiB, one character more, and 100 KiB;
 * - flood: `flood` sends notifications/tools/list_changed 1,000 times (50 bursts of 20, 50 ms apart) and then
 *   writes DONE_FILE; its list is `flood` and `gen-N`, N the number of listings so far, so every listing svc makes
 *   changes a tool (an audit row or two);
 * - plain: `secret` and `vault`, for the labels page.
 */
const HOSTILE_SERVER = `
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { Server } from '${SDK}/server/index.js';
import { StdioServerTransport } from '${SDK}/server/stdio.js';
import { ListToolsRequestSchema, CallToolRequestSchema } from '${SDK}/types.js';
const mode = process.env.MODE;
// Which process this is: pids repeat, as each child has a PID namespace of its own (svc's sandbox).
const self = Math.floor(Math.random() * 2 ** 48);
const object = { type: 'object' };
const server = new Server({ name: 'hostile-' + mode, version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
const counted = () => {
  appendFileSync(process.env.COUNT_FILE, JSON.stringify({ pid: self, at: Date.now() }) + '\\n');
  return readFileSync(process.env.COUNT_FILE, 'utf8').split('\\n').filter((l) => l !== '').length;
};
// A definition exactly n characters long as svc measures it: JSON of {description, inputSchema}.
const frame = JSON.stringify({ description: '', inputSchema: object }).length;
const sized = (name, n) => ({ name, description: 'x'.repeat(n - frame), inputSchema: object });
server.setRequestHandler(ListToolsRequestSchema, async (r) => {
  const n = counted();
  const cursor = r.params?.cursor;
  if (mode === 'endless') {
    const page = Number(cursor ?? 0);
    return { tools: [{ name: 'page-' + page, description: 'Page ' + page + '.', inputSchema: object }], nextCursor: String(page + 1) };
  }
  if (mode === 'many') {
    const start = Number(cursor ?? 0);
    const tools = [];
    for (let i = start; i < Math.min(start + 500, 5000); i++) tools.push({ name: 't' + String(i).padStart(4, '0'), inputSchema: object });
    return { tools, ...(start + 500 < 5000 ? { nextCursor: String(start + 500) } : {}) };
  }
  if (mode === 'odd') return { tools: [
    { name: 'fine', description: 'An ordinary tool.', inputSchema: object },
    { name: 'n'.repeat(128), description: 'A name of 128 characters.', inputSchema: object },
    { name: 'm'.repeat(129), description: 'A name of 129 characters.', inputSchema: object },
    { name: 'l'.repeat(200), description: 'A name of 200 characters.', inputSchema: object },
    sized('edge-16k', 16 * 1024),
    sized('over-16k', 16 * 1024 + 1),
    sized('huge-100k', 100 * 1024),
  ] };
  if (mode === 'flood') return { tools: [
    { name: 'flood', description: 'Says its tools changed, 1,000 times.', inputSchema: object },
    { name: 'gen-' + n, description: 'Listing ' + n + '.', inputSchema: object },
  ] };
  return { tools: [
    { name: 'secret', description: 'A secret.', inputSchema: object },
    { name: 'vault', description: 'A vault.', inputSchema: object },
  ] };
});
server.setRequestHandler(CallToolRequestSchema, async (r) => {
  if (r.params.name === 'flood') {
    void (async () => {
      for (let i = 0; i < 1000; i++) {
        await server.sendToolListChanged();
        if (i % 20 === 19) await new Promise((ok) => setTimeout(ok, 50));
      }
      writeFileSync(process.env.DONE_FILE, String(self));
    })();
    return { content: [{ type: 'text', text: 'flooding from ' + self }] };
  }
  return { content: [{ type: 'text', text: r.params.name + ' answered' }] };
});
await server.connect(new StdioServerTransport());
`;

interface ToolRow {
  upstream: string;
  name: string;
  state: string;
  labels: string[] | null;
  own_labels: boolean;
  fingerprint: string;
}

interface UpstreamRow {
  name: string;
  state: string;
  tools: Record<string, number>;
}

const MODES = ['endless', 'many', 'odd', 'flooder', 'floodu', 'locked'] as const;
const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

describe('upstream limits: hostile listings, list_changed floods, empty labels on the page', () => {
  let dir: string;
  let inst: Installation;
  let serving: Serving;
  let adminToken: string;
  let aliceToken: string;
  let bobToken: string;
  const countFile = (upstream: string) => join(dir, `${upstream}.count`);
  const doneFile = (upstream: string) => join(dir, `${upstream}.done`);
  /** the tools/list requests an upstream's processes received, oldest first */
  const listings = (upstream: string): { pid: number; at: number }[] =>
    existsSync(countFile(upstream))
      ? readFileSync(countFile(upstream), 'utf8')
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as { pid: number; at: number })
      : [];

  /** svc's log line saying how many tools of this upstream it left out */
  const leftOutLogged = (upstream: string) =>
    serving
      .log()
      .split('\n')
      .filter((l) => l.includes('"event":"upstream_tools_left_out"'))
      .map((l) => JSON.parse(l) as { upstream: string; left_out: number; max_tools: number })
      .find((l) => l.upstream === upstream);
  const cli = async (args: string[], stdin?: string) => {
    const r = await inst.cli(args, stdin);
    assert.equal(r.code, 0, `svc ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const adminApi = (path: string, init: RequestInit = {}) =>
    fetch(`${inst.url}/admin/api/tools${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
    });
  /** Every tool of the upstream, page after page as the API's Link header names them. */
  const toolRows = async (upstream: string): Promise<ToolRow[]> => {
    const rows: ToolRow[] = [];
    let next: string | null = `${inst.url}/admin/api/tools?upstream=${upstream}`;
    while (next !== null) {
      const r: Response = await fetch(next, { headers: { Authorization: `Bearer ${adminToken}` } });
      assert.equal(r.status, 200);
      const page = (await r.json()) as ToolRow[];
      assert.ok(page.length <= 50, 'a page holds 50 tools at most');
      rows.push(...page);
      next = /<([^>]+)>; rel="next"/.exec(r.headers.get('link') ?? '')?.[1] ?? null;
    }
    assert.ok(rows.every((t) => t.upstream === upstream));
    return rows;
  };
  const auditLength = async () => (JSON.parse(await cli(['audit', 'list', '--json'])) as unknown[]).length;
  const agent = async (token: string) => {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${inst.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
    );
    return client;
  };
  /** svc's own whoami answers this caller: svc keeps serving whatever its upstreams do */
  const whoamiAnswers = async (token: string, uid: string) => {
    const client = await agent(token);
    try {
      assert.match(text(await client.callTool({ name: 'whoami' })), new RegExp(`"uid":"${uid}"`));
    } finally {
      await client.close();
    }
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-upstream-limits-'));
    const script = join(dir, 'hostile.mjs');
    writeFileSync(script, HOSTILE_SERVER);
    const section = (name: (typeof MODES)[number], mode: string, extra = '') => `
[upstream ${name}]
command = "${process.execPath}" "${script}"
env.MODE = ${mode}
env.COUNT_FILE = ${countFile(name)}
env.DONE_FILE = ${doneFile(name)}
writable = ${dir}
refresh = 1h
${extra}`;
    inst = await install(sourceRunner, {
      auth: [
        DEFAULT_AUTH,
        section('endless', 'endless'),
        section('many', 'many'),
        section('odd', 'odd'),
        section('flooder', 'flood', 'review = auto'),
        section('floodu', 'flood', 'review = auto\nisolation = user'),
        section('locked', 'plain', 'review = auto\nlabels = eng'),
      ].join(''),
    });
    serving = await inst.serve();
    await cli(['user', 'add', 'root', '--email', 'root@example.com', '--admin', '--password-stdin'], 'root password 1\n');
    await cli(['user', 'add', 'alice', '--email', 'alice@example.com', '--labels', 'eng']);
    await cli(['user', 'add', 'bob', '--email', 'bob@example.com']);
    adminToken = (await cli(['token', 'create', 'root', '--name', 'admin', '--scopes', 'admin'])).trim();
    aliceToken = (await cli(['token', 'create', 'alice', '--name', 'agent'])).trim();
    bobToken = (await cli(['token', 'create', 'bob', '--name', 'agent'])).trim();
    // Every upstream listed once (endless and many never end on their own: svc must stop reading them).
    await waitFor(
      'every upstream listed',
      async () => {
        const rows = JSON.parse(await cli(['upstream', 'list', '--json'])) as UpstreamRow[];
        return rows.length === MODES.length && rows.every((u) => u.state === 'up');
      },
      { everyMs: 300, timeoutMs: 60_000 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}; tools/list requests: ${MODES.map((m) => `${m}=${listings(m).length}`).join(' ')}\n${serving.log()}`);
    });
  });

  after(async () => {
    if (serving && serving.child.exitCode === null) {
      serving.child.kill('SIGTERM');
      await serving.exited;
    }
    inst?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('an upstream that pages forever is asked for 20 pages, no more; svc keeps answering', async () => {
    const rows = await toolRows('endless');
    assert.deepEqual(
      rows.map((t) => t.name).sort(),
      Array.from({ length: 20 }, (_, i) => `page-${i}`).sort(),
      'the tools of the 20 pages read',
    );
    assert.equal(listings('endless').length, 20, 'one listing of 20 pages');
    const listed = (JSON.parse(await cli(['upstream', 'list', '--json'])) as UpstreamRow[]).find((u) => u.name === 'endless')!;
    assert.equal(listed.state, 'up');
    assert.equal(listed.tools.pending, 20);
    await whoamiAnswers(aliceToken, 'alice');
    assert.equal((await fetch(`${inst.url}/readyz`)).status, 200);
  });

  test('of 5,000 tools offered, the first 1,000 are kept (svc reads only the pages it needs) and the log says some were left out', async (t) => {
    const rows = await toolRows('many');
    assert.equal(rows.length, 1000);
    assert.deepEqual(
      rows.map((row) => row.name).sort(),
      Array.from({ length: 1000 }, (_, i) => `t${String(i).padStart(4, '0')}`),
    );
    assert.ok(
      rows.every((row) => row.state === 'pending'),
      'review = admin',
    );
    // 1,001 tools are enough to know there are more: 3 pages of 500, not 10.
    assert.ok(listings('many').length <= 3, `pages read: ${listings('many').length}`);
    const listed = (JSON.parse(await cli(['upstream', 'list', '--json'])) as UpstreamRow[]).find((u) => u.name === 'many')!;
    assert.deepEqual([listed.state, listed.tools.pending], ['up', 1000], 'up, with 1,000 tools');
    // The log counts what svc read and left out (the 1,001st), not all the upstream offered.
    const many = leftOutLogged('many');
    assert.ok(many && many.left_out >= 1 && many.max_tools === 1000, serving.log());
    t.diagnostic(`many: ${listings('many').length} pages read; logged left_out ${many.left_out}`);
    await whoamiAnswers(bobToken, 'bob');
  });

  test('a name over 128 characters is left out; a definition over 16 KiB is held (not kept, never approvable); 128 and exactly 16 KiB are ordinary', async () => {
    const rows = await toolRows('odd');
    assert.deepEqual(rows.map((t) => t.name).sort(), ['edge-16k', 'fine', 'huge-100k', 'n'.repeat(128), 'over-16k'].sort());
    const held = Object.fromEntries(rows.map((t) => [t.name, (t as ToolRow & { held: string[] | null }).held]));
    assert.equal(held['edge-16k'], null);
    assert.equal(held.fine, null);
    assert.match(held['over-16k']?.join() ?? '', /its definition is 17 KiB, over 16 KiB/);
    assert.match(held['huge-100k']?.join() ?? '', /its definition is 100 KiB, over 16 KiB/);
    // Not kept: svc's database holds the reason, not the 100 KiB.
    const huge = (await (await adminApi('/odd/huge-100k')).json()) as { definition: unknown };
    assert.ok(JSON.stringify(huge.definition).length < 100, JSON.stringify(huge.definition));
    const refused = await adminApi('/odd/over-16k', { method: 'PATCH', body: JSON.stringify({ state: 'approved' }) });
    assert.equal(refused.status, 409);
    assert.match(((await refused.json()) as { message: string }).message, /held and cannot be approved as it is/);
    assert.equal(((await (await adminApi('/odd/over-16k')).json()) as ToolRow).state, 'pending', 'nothing approved');
    const approved = await adminApi('/odd/edge-16k', { method: 'PATCH', body: JSON.stringify({ state: 'approved' }) });
    assert.equal(approved.status, 200, 'exactly 16 KiB is approvable');
    assert.equal(leftOutLogged('odd')?.left_out, 2, 'the log counts the two names left out');
  });

  test('1,000 list_changed notifications are one listing now and one 10 s later, shared and isolation = user; the audit trail grows by a handful', async (t) => {
    // Each upstream's startup listing is done: gen-1 is recorded.
    for (const u of ['flooder', 'floodu']) {
      await waitFor(
        `${u}'s first listing recorded`,
        async () => (await toolRows(u)).some((row) => row.name === 'gen-1' && row.state === 'approved'),
        {
          everyMs: 200,
        },
      );
    }
    const before = { flooder: listings('flooder').length, floodu: listings('floodu').length };
    const auditBefore = await auditLength();
    const client = await agent(aliceToken);
    try {
      assert.match(text(await client.callTool({ name: 'flooder__flood' })), /^flooding from \d+$/);
      assert.match(text(await client.callTool({ name: 'floodu__flood' })), /^flooding from \d+$/);
    } finally {
      await client.close();
    }
    await waitFor('both floods sent', () => existsSync(doneFile('flooder')) && existsSync(doneFile('floodu')), { everyMs: 100 });
    // The first notification lists at once; the 999 after it wait for the 10 s to pass and are then one more listing.
    for (const u of ['flooder', 'floodu'] as const) {
      await waitFor(`${u} listed after the flood`, () => listings(u).length >= before[u] + 2, { everyMs: 200, timeoutMs: 40_000 }).catch(
        (e: Error) => {
          throw new Error(`${e.message}: ${listings(u).length - before[u]} listings after the flood`);
        },
      );
    }
    for (const u of ['flooder', 'floodu'] as const) {
      const after = listings(u).slice(before[u]);
      assert.equal(after.length, 2, `${u}: ${after.length} listings for 1,000 notifications`);
      assert.ok(after[1]!.at - after[0]!.at >= 5000, `${u}: the second listing waited (${after[1]!.at - after[0]!.at} ms)`);
      t.diagnostic(`${u}: ${after.length} listings for 1,000 notifications, ${after[1]!.at - after[0]!.at} ms apart`);
    }
    // isolation = user: the notifications came from alice's own process, the listings from svc's own one.
    const floodPid = Number(readFileSync(doneFile('floodu'), 'utf8'));
    assert.ok(
      listings('floodu').every((l) => l.pid !== floodPid),
      "alice's process sent the flood; svc lists with its own",
    );
    // Per upstream: the call's upstream.call row, and per listing gen-N pending and gen-(N-1) gone.
    const grown = (await auditLength()) - auditBefore;
    assert.ok(grown <= 2 * (1 + 2 * 2), `the audit trail grew by ${grown} rows`);
    t.diagnostic(`the audit trail grew by ${grown} rows`);
    // review = auto approves only the first listing's tools: each gen-N that appeared later waits for an admin.
    const flooder = await toolRows('flooder');
    assert.deepEqual(
      flooder.filter((row) => row.state === 'approved').map((row) => row.name),
      ['flood'],
    );
    assert.equal(flooder.find((row) => row.name === `gen-${before.flooder + 2}`)?.state, 'pending', 'the last listing is recorded');
    await whoamiAnswers(aliceToken, 'alice');
  });

  test('Set labels on /admin/tools refuses an empty field: the tool keeps its labels and stays closed to a user without them', async () => {
    // vault gets own labels (ops); secret keeps its upstream's (eng).
    const own = await adminApi('/locked/vault', { method: 'PATCH', body: JSON.stringify({ labels: ['ops'] }) });
    assert.equal(own.status, 200);
    const browser = new Browser(inst.url);
    assert.equal((await browser.login('root', 'root password 1')).status, 303);
    const page = await browser.request('/admin/tools');
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.ok(html.includes('action="/admin/tools/locked/secret"'), 'the page has the forms posted below');
    const tool = async (name: string) => (await (await adminApi(`/locked/${name}`)).json()) as ToolRow;
    const before = { secret: await tool('secret'), vault: await tool('vault') };
    assert.deepEqual([before.secret.labels, before.secret.own_labels, before.secret.state], [['eng'], false, 'approved']);
    assert.deepEqual([before.vault.labels, before.vault.own_labels, before.vault.state], [['ops'], true, 'approved']);

    for (const name of ['secret', 'vault']) {
      for (const labels of ['', '   ']) {
        const refused = await browser.request(`/admin/tools/locked/${name}`, { form: { action: 'label', labels } });
        assert.equal(refused.status, 400, `${name} with labels ${JSON.stringify(labels)}`);
        assert.match(await refused.text(), /give the tool(&#39;|&#x27;|')s own labels, or use its upstream(&#39;|&#x27;|')s/);
      }
      const missing = await browser.request(`/admin/tools/locked/${name}`, { form: { action: 'label' } });
      assert.equal(missing.status, 400, `${name} without a labels field`);
      assert.deepEqual(await tool(name), before[name as 'secret' | 'vault'], `${name} unchanged`);
    }

    // bob holds no label: neither tool is listed to him nor callable, exactly like a tool that does not exist.
    const bobs = await agent(bobToken);
    try {
      const names = (await bobs.listTools()).tools.map((t) => t.name);
      assert.ok(!names.some((n) => n.startsWith('locked__')), JSON.stringify(names));
      const nothing = await bobs.callTool({ name: 'locked__nothing' });
      for (const name of ['secret', 'vault']) {
        const refused = await bobs.callTool({ name: `locked__${name}` });
        assert.equal(refused.isError, true);
        assert.equal(text(refused).replace(`locked__${name}`, 'NAME'), text(nothing).replace('locked__nothing', 'NAME'));
      }
    } finally {
      await bobs.close();
    }
    // alice holds eng: secret is approved and usable, so bob's refusal above is the labels, not the state.
    const alices = await agent(aliceToken);
    try {
      assert.equal(text(await alices.callTool({ name: 'locked__secret' })), 'secret answered');
    } finally {
      await alices.close();
    }

    // The same form with labels is taken: the refusal above is the empty field, not the form.
    const taken = await browser.request('/admin/tools/locked/secret', { form: { action: 'label', labels: 'eng ops' } });
    assert.equal(taken.status, 303);
    const after = await tool('secret');
    assert.deepEqual([after.labels, after.own_labels], [['eng', 'ops'], true]);
  });
});
