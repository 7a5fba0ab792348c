// Apps are code, so they are pinned (CONTRACT §6.3), through svc's real interfaces. Behind svc:
// - `basic`: the real MCP Apps example @modelcontextprotocol/server-basic-vanillajs (SDK v2) on stdio, labelled eng,
//   review = auto: its tool get-time names its app ui://get-time/mcp-app.html in _meta.ui;
// - `shifty`: an SDK v2 upstream written here whose app's bytes and _meta.ui change on demand, with a second app whose
//   _meta.ui hides a zero-width space, a plain resource, a tool `show` naming its app, and a tool `search`;
// - `twin`: an SDK v2 upstream labelled ops with a tool get-time of its own.
// Through /mcp with the legacy line's client (2025) and the stable line's pinned to 2026-07-28, for alice (eng), carol
// (eng, ops), bob (no labels) and alice's token restricted to finance:
// - discovery records each app by the SHA-256 of its bytes and its _meta.ui; a held app waits;
// - an approved app is read byte for byte by who may read it, listed to them alone, and read by nobody else: their
//   answer is a missing resource's;
// - a tool is listed with its _meta.ui (mapped) only while its app is approved and usable by the caller;
// - bytes (or a _meta.ui) the upstream serves other than approved are a missing resource's answer, and the app is
//   `changed` until an admin approves the new ones;
// - a tool called by its bare name is the one tool the caller may use of that name, never svc's own `search`;
// - /admin/tools shows an app's CSP and permissions and previews it sandboxed, for admins only, into a frame only.
// And (below, `tricky`) what a host renders is what was approved: a lone surrogate, the encoding, a blob's preview,
// a blob near the bound of an answer.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Client as StableLineClient, StreamableHTTPClientTransport as StableLineTransport } from '@modelcontextprotocol/client';
import type { User } from '../src/store/users.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { refusalOf } from './helpers/agents.ts';
import { DEFAULT_AUTH, ROOT } from './helpers/workspace.ts';
import { serveWeb, type Served } from './helpers/web-upstream.ts';
import { waitFor } from './helpers/wait.ts';
import { Browser } from './helpers/http.ts';

const VANILLA = join(ROOT, 'node_modules/@modelcontextprotocol/server-basic-vanillajs/dist');
const VANILLA_HTML = readFileSync(join(VANILLA, 'mcp-app.html'), 'utf8');
const APP_MIME = 'text/html;profile=mcp-app';
/** basic's app, as svc shows it */
const GET_TIME_APP = 'ui://basic+get-time/mcp-app.html';
/** shifty's apps and resource, as svc shows them */
const SHIFTY_APP = 'ui://shifty+shifty/app.html';
const SHIFTY_ODD = 'ui://shifty+shifty/odd.html';
const SHIFTY_NOTE = 'shifty+note://shifty';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

type Era = 'legacy' | 'modern';

interface Row {
  upstream: string;
  kind: string;
  name: string;
  state: string;
  fingerprint: string;
  approved_fingerprint: string | null;
  definition: Record<string, unknown>;
  held: string[] | null;
}

interface AuditRow {
  action: string;
  actor: string | null;
  via: string;
  target: string;
}

/** What shifty serves now: its app's version (its bytes) and the domain its _meta.ui lets it connect to. */
const shiftyState = { version: 1, domain: 'https://api.example.com' };
const shiftyHtml = () => `<!doctype html><title>shifty</title><p>version ${shiftyState.version}</p>`;
const shiftyUi = () => ({ csp: { connectDomains: [shiftyState.domain] }, permissions: { clipboardWrite: {} } });

function shifty(): McpServer {
  const server = new McpServer({ name: 'shifty', version: '1.0.0' });
  server.registerResource('app', 'ui://shifty/app.html', { mimeType: APP_MIME }, async () => ({
    contents: [{ uri: 'ui://shifty/app.html', mimeType: APP_MIME, text: shiftyHtml(), _meta: { ui: shiftyUi() } }],
  }));
  server.registerResource('odd', 'ui://shifty/odd.html', { mimeType: APP_MIME }, async () => ({
    contents: [
      {
        uri: 'ui://shifty/odd.html',
        mimeType: APP_MIME,
        text: '<p>odd</p>',
        _meta: { ui: { csp: { connectDomains: ['https://x.example\u200B'] } } },
      },
    ],
  }));
  server.registerResource('note', 'note://shifty', { mimeType: 'text/plain' }, async () => ({
    contents: [{ uri: 'note://shifty', mimeType: 'text/plain', text: 'a note' }],
  }));
  server.registerTool(
    'show',
    { description: 'Shows the app.', inputSchema: z.object({}), _meta: { ui: { resourceUri: 'ui://shifty/app.html' } } },
    async () => ({ content: [{ type: 'text', text: 'shown by shifty' }] }),
  );
  server.registerTool('search', { description: 'Searches shifty.', inputSchema: z.object({ query: z.string() }) }, async () => ({
    content: [{ type: 'text', text: 'shifty search' }],
  }));
  return server;
}

function twin(): McpServer {
  const server = new McpServer({ name: 'twin', version: '1.0.0' });
  server.registerTool('get-time', { description: 'The time, as twin tells it.', inputSchema: z.object({}) }, async () => ({
    content: [{ type: 'text', text: 'twin time' }],
  }));
  return server;
}

async function serve(make: () => McpServer): Promise<Served> {
  const handler = createMcpHandler(make);
  const served = await serveWeb((request) => handler.fetch(request));
  return {
    url: served.url,
    async stop() {
      await handler.close();
      await served.stop();
    },
  };
}

async function agent(svc: TestServer, era: Era, token: string): Promise<Client> {
  const init = { requestInit: { headers: { Authorization: `Bearer ${token}` } } };
  if (era === 'legacy') {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), init));
    return client;
  }
  const client = new StableLineClient({ name: 'agent', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new StableLineTransport(new URL(`${svc.url}/mcp`), init));
  assert.equal(client.getProtocolEra(), 'modern');
  return client as unknown as Client;
}

/** Every page of a caller's resources/list. */
async function allResources(client: Client) {
  const all: Awaited<ReturnType<Client['listResources']>>['resources'] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 20; page++) {
    const listed = await client.listResources(cursor === undefined ? {} : { cursor });
    all.push(...listed.resources);
    cursor = listed.nextCursor;
    if (cursor === undefined) break;
  }
  return all;
}

const textOf = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

describe('upstream apps: pinned by their bytes', () => {
  let svc: TestServer;
  let shiftyServer: Served;
  let twinServer: Served;
  let root: User;
  const tokens = { alice: '', carol: '', bob: '', restricted: '' };

  const cli = async (args: string[]) => {
    const r = await svc.ws.svc(args);
    return { ...r, out: r.stdout + r.stderr };
  };
  const apps = async (): Promise<Row[]> => JSON.parse((await cli(['app', 'list', '--json'])).stdout) as Row[];
  const app = async (upstream: string, name: string) => (await apps()).find((a) => a.upstream === upstream && a.name === name)!;
  const audit = async () => JSON.parse((await cli(['audit', 'list', '--json'])).stdout) as AuditRow[];

  before(async () => {
    shiftyServer = await serve(shifty);
    twinServer = await serve(twin);
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream basic]
command = "${process.execPath}" "${join(VANILLA, 'index.js')}" --stdio
labels = eng
review = auto
timeout = 20s

[upstream shifty]
url = ${shiftyServer.url}
labels = eng
review = auto
refresh = 1h

[upstream twin]
url = ${twinServer.url}
labels = ops
review = auto
`,
    });
    const alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: 'eng, finance', password: 'alice password 1' });
    const carol = await svc.addUser({ uid: 'carol', email: 'carol@example.com', labels: 'eng, ops' });
    const bob = await svc.addUser({ uid: 'bob', email: 'bob@example.com', labels: '' });
    root = await svc.addUser({ uid: 'root', email: 'root@example.com', labels: '', admin: true, password: 'root password 1' });
    tokens.alice = await svc.tokenFor(alice);
    tokens.carol = await svc.tokenFor(carol);
    tokens.bob = await svc.tokenFor(bob);
    const made = await cli(['token', 'create', 'alice', '--name', 'finance only', '--labels', 'finance']);
    assert.equal(made.code, 0, made.out);
    tokens.restricted = made.stdout.trim();
    await waitFor(
      'the apps of basic and shifty, and the tools of all three, recorded',
      async () => {
        const tools = JSON.parse((await cli(['tool', 'list', '--json'])).stdout) as Row[];
        return (await apps()).length === 3 && new Set(tools.map((t) => t.upstream)).size === 3;
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
  });

  after(async () => {
    await svc?.stop();
    await shiftyServer?.stop();
    await twinServer?.stop();
  });

  test('discovery records each app by the SHA-256 of its bytes and its _meta.ui; review = auto approves them, a held one waits', async () => {
    const basic = await app('basic', 'ui://get-time/mcp-app.html');
    assert.equal(basic.state, 'approved');
    assert.deepEqual(basic.definition, {
      mimeType: APP_MIME,
      contents_sha256: sha256(VANILLA_HTML),
      size: Buffer.byteLength(VANILLA_HTML),
    });
    assert.equal(basic.approved_fingerprint, basic.fingerprint);
    const shiftyApp = await app('shifty', 'ui://shifty/app.html');
    assert.equal(shiftyApp.state, 'approved');
    assert.deepEqual(shiftyApp.definition, {
      mimeType: APP_MIME,
      contents_sha256: sha256(shiftyHtml()),
      ui: shiftyUi(),
      size: Buffer.byteLength(shiftyHtml()),
    });
    const odd = await app('shifty', 'ui://shifty/odd.html');
    assert.equal(odd.state, 'pending', 'held: review = auto does not approve it');
    assert.deepEqual(odd.held, ['it holds characters a reader cannot see: ui.csp.connectDomains.[0]: U+200B']);
    assert.equal((await apps()).filter((a) => a.upstream === 'twin').length, 0, 'twin serves no app');
    const trail = (await audit()).filter((e) => e.via === 'upstream');
    assert.ok(trail.some((e) => e.action === 'app.approved' && e.target === 'basic/ui://get-time/mcp-app.html'));
    assert.ok(trail.some((e) => e.action === 'app.pending' && e.target === 'shifty/ui://shifty/odd.html'));
    // A tool keeps its _meta.ui (nothing else of its _meta: the example also sets the older flat key).
    const tools = JSON.parse((await cli(['tool', 'list', '--json'])).stdout) as Row[];
    const getTime = tools.find((t) => t.upstream === 'basic' && t.name === 'get-time')!;
    assert.deepEqual(getTime.definition._meta, { ui: { resourceUri: 'ui://get-time/mcp-app.html' } });
    const twinTime = tools.find((t) => t.upstream === 'twin' && t.name === 'get-time')!;
    assert.equal(twinTime.definition._meta, undefined, 'a tool without _meta.ui has none');
  });

  for (const era of ['legacy', 'modern'] as const) {
    test(`${era}: an approved app is read byte for byte by who may read it and listed to them alone; anyone else gets a missing resource's answer`, async () => {
      const alice = await agent(svc, era, tokens.alice);
      const bob = await agent(svc, era, tokens.bob);
      const restricted = await agent(svc, era, tokens.restricted);
      try {
        const read = await alice.readResource({ uri: GET_TIME_APP });
        assert.equal(read.contents.length, 1);
        const content = read.contents[0] as { uri: string; mimeType?: string; text?: string; _meta?: unknown };
        assert.equal(content.uri, GET_TIME_APP);
        assert.equal(content.mimeType, APP_MIME);
        assert.equal(content.text, VANILLA_HTML, 'the same bytes');
        const shiftyRead = (await alice.readResource({ uri: SHIFTY_APP })).contents[0] as { text?: string; _meta?: unknown };
        assert.equal(shiftyRead.text, shiftyHtml());
        assert.deepEqual(shiftyRead._meta, { ui: shiftyUi() }, 'the approved _meta.ui');

        const listed = await allResources(alice);
        const uris = listed.map((r) => r.uri);
        assert.ok(uris.includes(GET_TIME_APP) && uris.includes(SHIFTY_APP) && uris.includes(SHIFTY_NOTE), JSON.stringify(uris));
        assert.ok(!uris.includes(SHIFTY_ODD), 'a held app is not listed');
        assert.ok(!uris.some((u) => u.startsWith('ui://') && !u.startsWith('ui://basic+') && !u.startsWith('ui://shifty+')));
        const listedApp = listed.find((r) => r.uri === SHIFTY_APP)!;
        assert.deepEqual([listedApp.mimeType, listedApp._meta], [APP_MIME, { ui: shiftyUi() }], 'listed as approved');

        const missing = await refusalOf(alice.readResource({ uri: 'ui://basic+no-such-app.html' }));
        assert.notEqual(missing, 'ok');
        for (const [who, uri] of [
          [bob, GET_TIME_APP],
          [restricted, GET_TIME_APP],
          [bob, SHIFTY_APP],
          [alice, SHIFTY_ODD],
        ] as const)
          assert.deepEqual(await refusalOf(who.readResource({ uri })), missing, uri);
        for (const other of [bob, restricted])
          assert.deepEqual(
            (await allResources(other)).filter((r) => !r.uri.startsWith('svc://')),
            [],
            'no upstream resource, no app',
          );
      } finally {
        await Promise.all([alice.close(), bob.close(), restricted.close()]);
      }
    });
  }

  test('a tool is listed with its _meta.ui, mapped, only while its app is approved and the caller may use it; else it is a plain tool', async () => {
    const alice = await agent(svc, 'legacy', tokens.alice);
    const metaOf = async (name: string) => (await alice.listTools()).tools.find((t) => t.name === name)?._meta;
    try {
      assert.deepEqual(await metaOf('basic__get-time'), { ui: { resourceUri: GET_TIME_APP } });
      assert.deepEqual(await metaOf('shifty__show'), { ui: { resourceUri: SHIFTY_APP } });
      assert.equal(await metaOf('shifty__search'), undefined);

      assert.equal((await cli(['app', 'disable', 'basic', 'ui://get-time/mcp-app.html'])).code, 0);
      const plain = (await alice.listTools()).tools.find((t) => t.name === 'basic__get-time');
      assert.ok(plain, 'still listed');
      assert.equal(plain._meta, undefined, 'without its app');
      assert.match(textOf(await alice.callTool({ name: 'basic__get-time', arguments: {} })), /^\d{4}-\d\d-\d\dT/);
      assert.notEqual(await refusalOf(alice.readResource({ uri: GET_TIME_APP })), 'ok');

      assert.equal((await cli(['app', 'approve', 'basic', 'ui://get-time/mcp-app.html'])).code, 0);
      assert.deepEqual(await metaOf('basic__get-time'), { ui: { resourceUri: GET_TIME_APP } });
      // An app labelled so that alice may not use it: her tool is plain again, and she cannot read it.
      assert.equal((await cli(['app', 'label', 'basic', 'ui://get-time/mcp-app.html', '--labels', 'ops'])).code, 0);
      assert.equal(await metaOf('basic__get-time'), undefined);
      assert.notEqual(await refusalOf(alice.readResource({ uri: GET_TIME_APP })), 'ok');
      const carol = await agent(svc, 'legacy', tokens.carol);
      try {
        const theirs = (await carol.listTools()).tools.find((t) => t.name === 'basic__get-time');
        assert.deepEqual(theirs?._meta, { ui: { resourceUri: GET_TIME_APP } }, 'carol (eng, ops) may');
      } finally {
        await carol.close();
      }
      assert.equal((await cli(['app', 'label', 'basic', 'ui://get-time/mcp-app.html', '--inherit'])).code, 0);
      assert.deepEqual(await metaOf('basic__get-time'), { ui: { resourceUri: GET_TIME_APP } });
    } finally {
      await alice.close();
    }
  });

  test('other bytes, or another _meta.ui, read like a missing resource and make the app changed until an admin approves them', async () => {
    const alice = await agent(svc, 'legacy', tokens.alice);
    const textRead = async () => ((await alice.readResource({ uri: SHIFTY_APP })).contents[0] as { text?: string }).text;
    try {
      const missing = await refusalOf(alice.readResource({ uri: 'ui://shifty+no-such-app.html' }));
      assert.equal(await textRead(), shiftyHtml());
      const approved = await app('shifty', 'ui://shifty/app.html');

      shiftyState.version = 2;
      assert.deepEqual(await refusalOf(alice.readResource({ uri: SHIFTY_APP })), missing, 'other bytes: missing');
      const changed = await app('shifty', 'ui://shifty/app.html');
      assert.equal(changed.state, 'changed');
      assert.equal(changed.approved_fingerprint, approved.fingerprint, 'the approval stays pinned');
      assert.equal(changed.definition.contents_sha256, sha256(shiftyHtml()), 'what the upstream serves now');
      assert.ok(
        (await audit()).some((e) => e.via === 'upstream' && e.action === 'app.changed' && e.target === 'shifty/ui://shifty/app.html'),
      );
      assert.deepEqual(await refusalOf(alice.readResource({ uri: SHIFTY_APP })), missing, 'still missing');
      assert.equal((await alice.listTools()).tools.find((t) => t.name === 'shifty__show')!._meta, undefined, 'its tool is plain');
      assert.ok(!(await allResources(alice)).some((r) => r.uri === SHIFTY_APP), 'not listed');

      const stale = await cli(['app', 'approve', 'shifty', 'ui://shifty/app.html', '--fingerprint', approved.fingerprint]);
      assert.notEqual(stale.code, 0, 'the old fingerprint approves nothing');
      const approve = await cli(['app', 'approve', 'shifty', 'ui://shifty/app.html', '--fingerprint', changed.fingerprint]);
      assert.equal(approve.code, 0, approve.out);
      assert.equal(await textRead(), shiftyHtml(), 'the new bytes, approved');
      assert.match(shiftyHtml(), /version 2/);

      // The same bytes with another _meta.ui: missing too, and changed.
      shiftyState.domain = 'https://elsewhere.example';
      assert.deepEqual(await refusalOf(alice.readResource({ uri: SHIFTY_APP })), missing, 'another _meta.ui: missing');
      const recsp = await app('shifty', 'ui://shifty/app.html');
      assert.equal(recsp.state, 'changed');
      assert.deepEqual(recsp.definition.ui, shiftyUi());
      assert.equal((await cli(['app', 'approve', 'shifty', 'ui://shifty/app.html', '--fingerprint', recsp.fingerprint])).code, 0);
      const served = (await alice.readResource({ uri: SHIFTY_APP })).contents[0] as { _meta?: unknown };
      assert.deepEqual(served._meta, { ui: shiftyUi() });
    } finally {
      await alice.close();
    }
  });

  for (const era of ['legacy', 'modern'] as const) {
    test(`${era}: a bare name is the one tool the caller may use of that name; two, none, or svc's own search are not`, async () => {
      const alice = await agent(svc, era, tokens.alice);
      const carol = await agent(svc, era, tokens.carol);
      const bob = await agent(svc, era, tokens.bob);
      const call = (who: Client, name: string, args: Record<string, unknown> = {}) => who.callTool({ name, arguments: args });
      try {
        const before = (await audit()).length;
        assert.equal(textOf(await call(alice, 'show')), 'shown by shifty');
        assert.match(textOf(await call(alice, 'get-time')), /^\d{4}-\d\d-\d\dT/, "alice may use basic's get-time alone");
        assert.equal(textOf(await call(carol, 'show')), 'shown by shifty');
        const trail = await audit();
        const calls = trail.slice(before).filter((e) => e.action === 'upstream.call');
        assert.deepEqual(calls.map((e) => `${e.actor} ${e.target}`).sort(), [
          'alice basic/get-time',
          'alice shifty/show',
          'carol shifty/show',
        ]);

        const unknown = await refusalOf(call(alice, 'no-such-tool'));
        const unknownAs = async (who: Client, name: string) => {
          const answer = await refusalOf(call(who, name));
          if (answer === 'ok') return 'ok';
          return { ...answer, message: answer.message.replace(name, 'no-such-tool') };
        };
        // An Unknown tool may be an error or an isError result, by era: either way the same as a missing name's.
        const unknownResult = unknown === 'ok' ? textOf(await call(alice, 'no-such-tool')) : null;
        for (const [who, name] of [
          [carol, 'get-time'],
          [bob, 'show'],
          [bob, 'get-time'],
          [alice, 'twin__get-time'],
        ] as const) {
          if (unknownResult === null) assert.deepEqual(await unknownAs(who, name), unknown, `${name}`);
          else assert.equal(textOf(await call(who, name)).replace(name, 'no-such-tool'), unknownResult, `${name}`);
        }

        // svc's own search is never shadowed by an upstream's tool of that name.
        const mark = (await audit()).length;
        const own = await call(alice, 'search', { query: 'anything' });
        assert.notEqual(textOf(own), 'shifty search');
        const later = await audit();
        const after = later.slice(mark);
        assert.ok(!after.some((e) => e.target === 'shifty/search'), 'shifty was not called');
        assert.equal(textOf(await call(alice, 'shifty__search', { query: 'anything' })), 'shifty search', 'by its merged name it is');
      } finally {
        await Promise.all([alice.close(), carol.close(), bob.close()]);
      }
    });
  }

  test("/admin/tools shows an app's CSP and permissions and previews its bytes sandboxed, for admins alone", async () => {
    const browser = new Browser(svc.url);
    assert.equal((await browser.login('root', 'root password 1')).status, 303);
    const page = await browser.request('/admin/tools?kind=app');
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-security-policy')!, /frame-src 'self'/);
    const html = await page.text();
    const basic = await app('basic', 'ui://get-time/mcp-app.html');
    const shiftyApp = await app('shifty', 'ui://shifty/app.html');
    const section = (name: string) =>
      html.slice(html.indexOf(`data-app="${name}"`), html.indexOf('</section>', html.indexOf(`data-app="${name}"`)));
    const shiftySection = section('shifty/ui://shifty/app.html');
    assert.match(shiftySection, /<dd data-fact="csp">[\s\S]*connectDomains[\s\S]*https:\/\/elsewhere\.example/);
    assert.match(shiftySection, /<dd data-fact="permissions">[\s\S]*clipboardWrite/);
    assert.match(section('shifty/ui://shifty/odd.html'), /<dd data-fact="csp">[\s\S]*<mark class="hidden-char">U\+200B<\/mark>/);
    assert.doesNotMatch(html, /\u200B/, 'the hidden character is shown as its escape');
    const src = `/admin/tools/basic/${encodeURIComponent('ui://get-time/mcp-app.html')}/preview?fingerprint=${basic.fingerprint}`;
    assert.ok(section('basic/ui://get-time/mcp-app.html').includes(`<iframe class="app-preview" sandbox="allow-scripts"`));
    assert.ok(html.includes(`src="${src.replaceAll('&', '&amp;')}"`), 'the frame shows the bytes its fingerprint pins');
    assert.ok(shiftySection.includes(`fingerprint=${shiftyApp.fingerprint}`));

    // What a browser says of a frame's request: the preview is served into a frame alone (below: what a page is told).
    const framed = { headers: { 'Sec-Fetch-Dest': 'iframe' } };
    const preview = await browser.request(src, framed);
    assert.equal(preview.status, 200);
    assert.equal(await preview.text(), VANILLA_HTML, 'the approved bytes');
    const policy = preview.headers.get('content-security-policy')!;
    assert.match(policy, /^sandbox allow-scripts;/);
    assert.doesNotMatch(policy, /allow-same-origin/);
    assert.match(policy, /default-src 'none'/);
    assert.match(policy, /frame-ancestors 'self'/);
    assert.equal(preview.headers.get('x-frame-options'), 'SAMEORIGIN');
    assert.match(preview.headers.get('content-type')!, /^text\/html/);

    const other = await browser.request(src.replace(basic.fingerprint, shiftyApp.fingerprint), framed);
    assert.equal(other.status, 409, 'another fingerprint previews nothing');
    assert.doesNotMatch(await other.text(), /<script/);
    // Not for anyone else: a signed-in person who is no admin, a bearer token, nobody; nor for the admin outside a frame.
    const alice = new Browser(svc.url);
    assert.equal((await alice.login('alice', 'alice password 1')).status, 303);
    for (const answer of [
      await alice.request(src, framed),
      await fetch(`${svc.url}${src}`, {
        headers: { Authorization: `Bearer ${await svc.tokenFor(root, undefined, 'admin')}`, 'Sec-Fetch-Dest': 'iframe' },
        redirect: 'manual',
      }),
      await fetch(`${svc.url}${src}`, { headers: framed.headers, redirect: 'manual' }),
      await browser.request(src),
    ]) {
      assert.notEqual(answer.status, 200);
      assert.ok(!(await answer.text()).includes(VANILLA_HTML.slice(0, 200)), 'no byte of the app');
    }
  });
});

// What a host renders is what was approved. Behind svc, `tricky` (an SDK v2 upstream, review = auto) serves apps a
// byte count cannot tell apart from others: text with a lone surrogate (UTF-8 has none: it encodes as U+FFFD's bytes),
// the same bytes as a base64 blob or as text (a host decodes a blob otherwise: the MCP Apps reference host with atob,
// each byte one character), a blob that is not base64 as svc sends it, and a blob just under the 10 MiB bound of an
// answer (too long for a backtracking check of its base64).
/** shade's text as approved, and as tricky serves it on demand: a lone surrogate in place of U+FFFD, the same UTF-8 */
const SHADE_SEEN = '<!doctype html><p>\uFFFD</p>';
const SHADE_LONE = '<!doctype html><p>\uD800</p>';
/** blob.html's bytes: UTF-8 with characters over U+007F, which a host decoding a blob with atob shows otherwise */
const BLOB_HTML = '<!doctype html><meta charset="utf-8"><p>café ☕</p>';
const BLOB_BASE64 = Buffer.from(BLOB_HTML, 'utf8').toString('base64');
/** Base64 without its padding (of 8 bytes, `PHA+MTwvcD4=`): atob takes it, svc does not send it. */
const UNPADDED = 'PHA+MTwvcD4';
/** A blob of base64 whose answer is just under the 10 MiB svc reads of an answer. */
const HUGE_BLOB = 'A'.repeat(10 * 1024 * 1024 - 64 * 1024);
const trickyState = { shadeLone: false, blobAsText: false };

function tricky(): McpServer {
  const server = new McpServer({ name: 'tricky', version: '1.0.0' });
  server.registerTool('noop', { description: 'Does nothing.', inputSchema: z.object({}) }, async () => ({
    content: [{ type: 'text', text: 'nothing' }],
  }));
  const app = (name: string, content: () => { text: string } | { blob: string }) =>
    server.registerResource(name, `ui://tricky/${name}.html`, { mimeType: APP_MIME }, async () => ({
      contents: [{ uri: `ui://tricky/${name}.html`, mimeType: APP_MIME, ...content() }],
    }));
  app('lone', () => ({ text: '<!doctype html><p>lone \uDC00 half</p>' }));
  app('shade', () => ({ text: trickyState.shadeLone ? SHADE_LONE : SHADE_SEEN }));
  app('blob', () => (trickyState.blobAsText ? { text: BLOB_HTML } : { blob: BLOB_BASE64 }));
  app('unpadded', () => ({ blob: UNPADDED }));
  app('huge', () => ({ blob: HUGE_BLOB }));
  return server;
}

describe('upstream apps: what a host renders is what was approved', () => {
  let svc: TestServer;
  let trickyServer: Served;
  let aliceToken = '';

  const cli = async (args: string[]) => {
    const r = await svc.ws.svc(args);
    return { ...r, out: r.stdout + r.stderr };
  };
  const apps = async (): Promise<Row[]> => JSON.parse((await cli(['app', 'list', '--json'])).stdout) as Row[];
  const app = async (name: string) => (await apps()).find((a) => a.upstream === 'tricky' && a.name === `ui://tricky/${name}.html`)!;
  const mapped = (name: string) => `ui://tricky+tricky/${name}.html`;

  before(async () => {
    trickyServer = await serve(tricky);
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream tricky]
url = ${trickyServer.url}
labels = eng
review = auto
refresh = 1h
timeout = 60s
`,
    });
    aliceToken = await svc.tokenFor(await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: 'eng' }));
    await svc.addUser({ uid: 'root', email: 'root@example.com', labels: '', admin: true, password: 'root password 1' });
    await waitFor('the apps of tricky recorded', async () => (await apps()).length === 5, { everyMs: 300, timeoutMs: 60_000 });
  });

  after(async () => {
    await svc?.stop();
    await trickyServer?.stop();
  });

  test('discovery holds text with a lone surrogate, a blob not base64 as svc sends it, and a blob near the bound of an answer; it records the rest', async () => {
    const states = (await apps()).map((a) => [a.name, a.state, a.held]);
    assert.deepEqual(states, [
      ['ui://tricky/blob.html', 'approved', null],
      ['ui://tricky/huge.html', 'pending', [`its blob is ${HUGE_BLOB.length} characters of base64, over 2 MiB of contents`]],
      ['ui://tricky/lone.html', 'pending', ['its text is not well-formed: it holds a lone surrogate, which no UTF-8 encodes']],
      ['ui://tricky/shade.html', 'approved', null],
      ['ui://tricky/unpadded.html', 'pending', ['its blob is not base64 (the standard alphabet, padded, nothing else)']],
    ]);
    // A blob's definition says so: the same bytes as text are another app.
    assert.deepEqual((await app('blob')).definition, {
      mimeType: APP_MIME,
      contents_sha256: sha256(BLOB_HTML),
      encoding: 'blob',
      size: Buffer.byteLength(BLOB_HTML),
    });
    assert.deepEqual((await app('shade')).definition, {
      mimeType: APP_MIME,
      contents_sha256: sha256(SHADE_SEEN),
      size: Buffer.byteLength(SHADE_SEEN),
    });
    const lone = await app('lone');
    assert.notEqual((await cli(['app', 'approve', 'tricky', 'ui://tricky/lone.html', '--fingerprint', lone.fingerprint])).code, 0);
    const alice = await agent(svc, 'legacy', aliceToken);
    try {
      const missing = await refusalOf(alice.readResource({ uri: 'ui://tricky+no-such-app.html' }));
      for (const name of ['lone', 'huge', 'unpadded'])
        assert.deepEqual(await refusalOf(alice.readResource({ uri: mapped(name) })), missing, name);
    } finally {
      await alice.close();
    }
  });

  test('text the upstream serves with a lone surrogate where the approved text had U+FFFD (the same UTF-8) reads as missing, and the app is held', async () => {
    const alice = await agent(svc, 'legacy', aliceToken);
    try {
      const missing = await refusalOf(alice.readResource({ uri: 'ui://tricky+no-such-app.html' }));
      const read = (await alice.readResource({ uri: mapped('shade') })).contents[0] as { text?: string };
      assert.equal(read.text, SHADE_SEEN);
      const approved = await app('shade');
      trickyState.shadeLone = true;
      assert.deepEqual(await refusalOf(alice.readResource({ uri: mapped('shade') })), missing, 'not the approved text: missing');
      const held = await app('shade');
      assert.equal(held.definition.contents_sha256, approved.definition.contents_sha256, 'its UTF-8 hashes as the approved');
      assert.deepEqual(held.held, ['its text is not well-formed: it holds a lone surrogate, which no UTF-8 encodes']);
      assert.ok(!(await allResources(alice)).some((r) => r.uri === mapped('shade')), 'not listed');
      assert.deepEqual(await refusalOf(alice.readResource({ uri: mapped('shade') })), missing, 'still missing');
    } finally {
      trickyState.shadeLone = false;
      await alice.close();
    }
  });

  test("a blob's preview is decoded as the MCP Apps reference host decodes it (atob), and the page says so; a preview is served only into a frame", async () => {
    const browser = new Browser(svc.url);
    assert.equal((await browser.login('root', 'root password 1')).status, 303);
    const html = await (await browser.request('/admin/tools?kind=app')).text();
    const section = (name: string) => {
      const at = html.indexOf(`data-app="tricky/ui://tricky/${name}.html"`);
      return html.slice(at, html.indexOf('</section>', at));
    };
    assert.match(
      section('blob'),
      /<dd data-fact="encoding">a base64 blob\. Hosts decode a blob in their own ways: the preview decodes it as the MCP Apps reference host does \(atob/,
    );
    assert.match(section('shade'), /<dd data-fact="encoding">text<\/dd>/);
    const blob = await app('blob');
    const src = `/admin/tools/tricky/${encodeURIComponent(blob.name)}/preview?fingerprint=${blob.fingerprint}`;
    const framed = { headers: { 'Sec-Fetch-Dest': 'iframe' } };
    const preview = await browser.request(src, framed);
    assert.equal(preview.status, 200);
    assert.equal(await preview.text(), atob(BLOB_BASE64), 'each byte one character, as the reference host renders it');
    assert.notEqual(atob(BLOB_BASE64), BLOB_HTML);
    assert.match(preview.headers.get('content-type')!, /^text\/html; charset=utf-8/);
    const shade = await app('shade');
    const shadePreview = await browser.request(
      `/admin/tools/tricky/${encodeURIComponent(shade.name)}/preview?fingerprint=${shade.fingerprint}`,
      framed,
    );
    assert.equal(shadePreview.status, 200);
    assert.equal(await shadePreview.text(), SHADE_SEEN, 'text as served');

    // Opened as a page (a link: a top-level navigation carries the session), or by anything that says not where it
    // goes, it is refused, and HEAD alike.
    for (const dest of [undefined, 'document', 'frame', 'embed']) {
      const answer = await browser.request(src, dest === undefined ? {} : { headers: { 'Sec-Fetch-Dest': dest } });
      assert.equal(answer.status, 403, String(dest));
      const body = await answer.text();
      assert.equal(body, "An app's preview is shown only in its frame on /admin/tools: open the page, and its preview there.");
      assert.match(answer.headers.get('content-type')!, /^text\/plain/);
    }
    const head = await browser.request(src, { method: 'HEAD' });
    assert.equal(head.status, 403);
    const headFramed = await browser.request(src, { method: 'HEAD', headers: { 'Sec-Fetch-Dest': 'iframe' } });
    assert.equal(headFramed.status, 200);
    assert.equal(await headFramed.text(), '');
    assert.match(headFramed.headers.get('content-security-policy')!, /^sandbox allow-scripts;/);
  });

  test('the encoding is part of an app: the same bytes as text read as missing and make the app changed, and back again', async () => {
    const alice = await agent(svc, 'modern', aliceToken);
    try {
      const missing = await refusalOf(alice.readResource({ uri: 'ui://tricky+no-such-app.html' }));
      const read = (await alice.readResource({ uri: mapped('blob') })).contents[0] as { blob?: string; text?: string };
      assert.deepEqual([read.blob, read.text], [BLOB_BASE64, undefined], 'the approved blob');
      const asBlob = await app('blob');

      trickyState.blobAsText = true;
      assert.deepEqual(await refusalOf(alice.readResource({ uri: mapped('blob') })), missing, 'as text: missing');
      const asText = await app('blob');
      assert.equal(asText.state, 'changed');
      assert.equal(asText.approved_fingerprint, asBlob.fingerprint);
      assert.deepEqual(asText.definition, {
        mimeType: APP_MIME,
        contents_sha256: sha256(BLOB_HTML),
        size: Buffer.byteLength(BLOB_HTML),
      });
      const approved = await cli(['app', 'approve', 'tricky', 'ui://tricky/blob.html', '--fingerprint', asText.fingerprint]);
      assert.equal(approved.code, 0, approved.out);
      const text = (await alice.readResource({ uri: mapped('blob') })).contents[0] as { blob?: string; text?: string };
      assert.deepEqual([text.blob, text.text], [undefined, BLOB_HTML], 'the approved text');

      trickyState.blobAsText = false;
      assert.deepEqual(await refusalOf(alice.readResource({ uri: mapped('blob') })), missing, 'as a blob again: missing');
      const back = await app('blob');
      assert.equal(back.state, 'changed');
      assert.equal(back.fingerprint, asBlob.fingerprint);
    } finally {
      trickyState.blobAsText = false;
      await alice.close();
    }
  });
});
