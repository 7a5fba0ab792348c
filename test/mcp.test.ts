import { test, describe, before, after } from 'node:test';
import { createHash, createHmac } from 'node:crypto';
import { encodeBase32LowerCaseNoPadding } from '@oslojs/encoding';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { putItem } from '../src/store/items.ts';
import { updateUser, type User } from '../src/store/users.ts';
import { visible } from '../src/domain/visibility.ts';
import { createLogger } from '../src/log.ts';
import { sql } from 'drizzle-orm';
import { itemRecord, changeRecord } from './helpers/records.ts';

async function connectAs(
  url: string,
  headers: Record<string, string>,
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } });
  const client = new Client({ name: 'svc-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

type ToolResult = { isError?: boolean; structuredContent?: Record<string, unknown>; content: { type: string; text: string }[] };

async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

const ITEMS: Record<string, string[]> = {
  open: [],
  eng: ['eng'],
  finance: ['finance'],
  both: ['eng', 'finance'],
  board: ['board', 'eng', 'finance'],
};
/** The ids of the items a user with these labels may see, by the one access rule. */
const visibleIds = (labels: string[]) =>
  Object.keys(ITEMS)
    .filter((id) => visible(ITEMS[id]!, labels))
    .sort();

const USERS: Record<string, string[]> = {
  nolabels: [],
  enguser: ['eng'],
  finuser: ['finance'],
  bothuser: ['eng', 'finance'],
  alllabels: ['board', 'eng', 'finance', 'other'],
};

function post(url: string, headers: Record<string, string>, body: string): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });
}

describe('/mcp', () => {
  let s: TestServer;
  const users: Record<string, User> = {};
  const tokens: Record<string, string> = {};
  before(async () => {
    s = await startTestServer();
    for (const [id, labels] of Object.entries(ITEMS)) {
      await s.database.write((tx) =>
        putItem(
          tx,
          id,
          itemRecord({
            title: `Quarterly report ${id}`,
            text: `The quarterly report for ${id}. Revenue grew; see ${id} appendix.`,
            labels,
          }),
        ),
      );
    }
    for (const [uid, labels] of Object.entries(USERS)) {
      users[uid] = await s.addUser({ uid, email: `${uid}@example.com`, name: `User ${uid}`, labels, password: `password for ${uid}` });
      tokens[uid] = await s.tokenFor(users[uid]!);
    }
  });
  after(() => s.stop());

  test('anonymous: 401 with a Bearer challenge; a bad token: invalid_token; never served', async () => {
    const anon = await post(s.url, {}, '{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
    assert.equal(anon.status, 401);
    assert.equal(anon.headers.get('www-authenticate'), 'Bearer realm="svc"');
    const bad = await post(s.url, bearer(`svc_${'a'.repeat(48)}`), '{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
    assert.equal(bad.status, 401);
    assert.match(bad.headers.get('www-authenticate')!, /^Bearer realm="svc", error="invalid_token"/);
    for (const method of ['GET', 'DELETE']) {
      assert.equal((await fetch(`${s.url}/mcp`, { method })).status, 401, method);
    }
  });

  test('no OAuth protected-resource metadata is advertised', async () => {
    for (const path of [
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-authorization-server',
    ]) {
      assert.equal((await fetch(s.url + path)).status, 404, path);
    }
    const anon = await post(s.url, {}, '{}');
    assert.doesNotMatch(anon.headers.get('www-authenticate')!, /resource_metadata/);
  });

  test('initialize, list tools with schemas, whoami', async () => {
    const { client } = await connectAs(s.url, bearer(tokens.bothuser!));
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['fetch', 'search', 'whoami']);
    // The stateless endpoint never sends a notification, so it announces none.
    const capabilities = client.getServerCapabilities()!;
    assert.notEqual(capabilities.tools?.listChanged, true, 'tools.listChanged');
    assert.notEqual(capabilities.resources?.listChanged, true, 'resources.listChanged');
    assert.ok(capabilities.tools && capabilities.resources);
    for (const t of tools) {
      assert.ok(t.description && t.description.length > 30, `${t.name} has a useful description`);
      assert.ok(t.outputSchema, `${t.name} has an output schema`);
    }
    const who = await call(client, 'whoami');
    assert.deepEqual(who.structuredContent, {
      uid: 'bothuser',
      name: 'User bothuser',
      email: 'bothuser@example.com',
      labels: ['eng', 'finance'],
      admin: false,
      via: 'token',
      restriction: null,
      scopes: ['mcp'],
    });
    assert.deepEqual(JSON.parse(who.content[0]!.text), who.structuredContent);
    await client.close();
  });

  test('every user/item pair, both ways: search, fetch and resources agree with the rule', async () => {
    for (const [uid, labels] of Object.entries(USERS)) {
      const { client } = await connectAs(s.url, bearer(tokens[uid]!));
      const expected = visibleIds(labels);
      const search = await call(client, 'search', { query: 'quarterly report', limit: 50 });
      const results = (search.structuredContent as { results: { id: string; title: string; snippet: string }[] }).results;
      assert.deepEqual(results.map((r) => r.id).sort(), expected, `search as ${uid}`);
      assert.deepEqual(JSON.parse(search.content[0]!.text), results);
      for (const r of results) assert.match(r.snippet, /quarterly/i);
      for (const id of Object.keys(ITEMS)) {
        const fetched = await call(client, 'fetch', { id });
        if (expected.includes(id)) {
          assert.equal(fetched.isError, undefined, `${uid} fetches ${id}`);
          assert.deepEqual(fetched.structuredContent, {
            id,
            title: `Quarterly report ${id}`,
            text: `The quarterly report for ${id}. Revenue grew; see ${id} appendix.`,
            labels: ITEMS[id],
          });
        } else {
          assert.equal(fetched.isError, true, `${uid} must not fetch ${id}`);
          assert.equal(fetched.content[0]!.text, `not found: no document "${id}"`);
          assert.equal(fetched.structuredContent, undefined);
        }
      }
      const missing = await call(client, 'fetch', { id: 'does-not-exist' });
      assert.equal(missing.content[0]!.text, 'not found: no document "does-not-exist"', 'missing reads like invisible');
      const listed = await client.listResources();
      assert.deepEqual(
        listed.resources.map((r) => r.uri).sort(),
        expected.map((id) => `svc://items/${id}`),
        `resources as ${uid}`,
      );
      for (const id of Object.keys(ITEMS)) {
        const read = client.readResource({ uri: `svc://items/${id}` });
        if (expected.includes(id)) assert.match(((await read).contents[0] as { text: string }).text, new RegExp(`report for ${id}`));
        else await assert.rejects(read, /Resource not found/, `${uid} reads ${id}`);
      }
      await client.close();
    }
  });

  test('every user at once, calls interleaved on the reused MCP servers: each answer is its own caller', async () => {
    const rpc = async (uid: string, method: string, params: Record<string, unknown>) => {
      const r = await post(s.url, bearer(tokens[uid]!), JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }));
      assert.equal(r.status, 200, `${method} as ${uid}`);
      return ((await r.json()) as { result: Record<string, unknown> }).result;
    };
    // Rounds of 40 calls at once: one address may hold at most 100 connections.
    for (let round = 0; round < 6; round++) {
      const calls: Promise<void>[] = [];
      for (const [uid, labels] of Object.entries(USERS)) {
        const expected = visibleIds(labels);
        calls.push(
          (async () => {
            const who = await rpc(uid, 'tools/call', { name: 'whoami', arguments: {} });
            assert.equal((who.structuredContent as { uid: string }).uid, uid);
          })(),
          (async () => {
            const found = await rpc(uid, 'tools/call', { name: 'search', arguments: { query: 'quarterly report', limit: 50 } });
            const ids = (found.structuredContent as { results: { id: string }[] }).results.map((r) => r.id).sort();
            assert.deepEqual(ids, expected, `search as ${uid}`);
          })(),
          (async () => {
            const listed = await rpc(uid, 'resources/list', {});
            const uris = (listed.resources as { uri: string }[]).map((r) => r.uri).sort();
            assert.deepEqual(
              uris,
              expected.map((id) => `svc://items/${id}`),
              `resources as ${uid}`,
            );
          })(),
          ...Object.keys(ITEMS).map(async (id) => {
            const fetched = await rpc(uid, 'tools/call', { name: 'fetch', arguments: { id } });
            assert.equal(fetched.isError === true, !expected.includes(id), `${uid} fetches ${id}`);
          }),
        );
      }
      await Promise.all(calls);
    }
  });

  test('a label granted is visible on the next call; a label removed is gone', async () => {
    const { client } = await connectAs(s.url, bearer(tokens.nolabels!));
    assert.equal((await call(client, 'fetch', { id: 'eng' })).isError, true);
    await s.database.write((tx) => updateUser(tx, 'nolabels', changeRecord({ labels: 'eng' })));
    assert.equal((await call(client, 'fetch', { id: 'eng' })).isError, undefined);
    assert.deepEqual((await call(client, 'whoami')).structuredContent!.labels, ['eng']);
    await s.database.write((tx) => updateUser(tx, 'nolabels', changeRecord({ labels: '' })));
    assert.equal((await call(client, 'fetch', { id: 'eng' })).isError, true);
    await client.close();
  });

  test('a token revoked mid-session: the next call is 401', async () => {
    const b = new Browser(s.url);
    await b.login('finuser', 'password for finuser');
    const { id, token } = await (await b.request('/auth/tokens', { form: { name: 'agent' } })).json();
    const { client } = await connectAs(s.url, bearer(token));
    assert.equal((await call(client, 'whoami')).structuredContent!.uid, 'finuser');
    assert.equal((await b.request(`/auth/tokens/${id}/revoke`, { method: 'POST' })).status, 200);
    await assert.rejects(call(client, 'whoami'), /401|Unauthorized|invalid_token/i);
  });

  test("an MCP session id is bound to its user: another user's credentials with it are refused", async () => {
    const { client, transport } = await connectAs(s.url, bearer(tokens.enguser!));
    const sessionId = transport.sessionId;
    assert.match(sessionId ?? '', /^[a-z2-7]{24}\.[a-z2-7]{24}$/);
    const mine = await post(
      s.url,
      { ...bearer(tokens.enguser!), 'mcp-session-id': sessionId! },
      '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
    );
    assert.equal(mine.status, 200);
    const theirs = await post(
      s.url,
      { ...bearer(tokens.finuser!), 'mcp-session-id': sessionId! },
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fetch","arguments":{"id":"eng"}}}',
    );
    assert.equal(theirs.status, 403);
    const text = await theirs.text();
    assert.doesNotMatch(text, /quarterly report/i);
    const malformed = await post(
      s.url,
      { ...bearer(tokens.finuser!), 'mcp-session-id': 'not-a-session' },
      '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
    );
    assert.equal(malformed.status, 404);
    // Anyone can compute an unkeyed hash of a nonce and a user id; such an id is refused.
    const nonce = sessionId!.split('.')[0]!;
    for (const made of [
      createHash('sha256').update(`${nonce}:${users.finuser!.id}`).digest(),
      createHash('sha256').update(`svc-mcp-session:${nonce}:${users.finuser!.id}`).digest(),
      createHmac('sha256', '').update(`${nonce}:${users.finuser!.id}`).digest(),
    ]) {
      const forged = `${nonce}.${encodeBase32LowerCaseNoPadding(made.subarray(0, 15))}`;
      assert.equal(
        (await post(s.url, { ...bearer(tokens.finuser!), 'mcp-session-id': forged }, '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'))
          .status,
        403,
      );
    }
    // A session cannot be ended (its id is signed, not stored): DELETE is 405, another user's id still 403 first.
    const end = (token: string) => fetch(`${s.url}/mcp`, { method: 'DELETE', headers: { ...bearer(token), 'mcp-session-id': sessionId! } });
    const ended = await end(tokens.enguser!);
    assert.equal(ended.status, 405);
    assert.equal(ended.headers.get('allow'), 'POST');
    assert.equal((await end(tokens.finuser!)).status, 403);
    await client.close();
  });

  test('session ids reveal no user id: without the key, no user id can be tried against them', async () => {
    const a = (await connectAs(s.url, bearer(tokens.enguser!))).transport.sessionId!;
    const b = (await connectAs(s.url, bearer(tokens.enguser!))).transport.sessionId!;
    assert.notEqual(a.split('.')[1], b.split('.')[1]);
    const [nonce, tagged] = a.split('.') as [string, string];
    for (let id = 0; id <= 1000; id++) {
      for (const guess of [`${nonce}:${id}`, `svc-mcp-session:${nonce}:${id}`]) {
        assert.notEqual(encodeBase32LowerCaseNoPadding(createHash('sha256').update(guess).digest().subarray(0, 15)), tagged);
      }
    }
  });

  test('a browser session can use /mcp too (via session)', async () => {
    const b = new Browser(s.url);
    await b.login('enguser', 'password for enguser');
    const { client } = await connectAs(s.url, { cookie: `svc_session=${b.cookies.get('svc_session')}` });
    assert.equal((await call(client, 'whoami')).structuredContent!.via, 'session');
    await client.close();
  });

  test('bad input: proper JSON-RPC or tool errors, never a crash or a stack trace', async () => {
    const h = bearer(tokens.alllabels!);
    const rpc = (body: string, extra: Record<string, string> = {}) => post(s.url, { ...h, ...extra }, body);
    const parse = await rpc('{not json');
    assert.equal(parse.status, 400);
    assert.equal((await parse.json()).error.code, -32700);
    const wrongType = await fetch(`${s.url}/mcp`, {
      method: 'POST',
      headers: { ...h, 'content-type': 'text/plain', accept: 'application/json, text/event-stream' },
      body: '{}',
    });
    assert.equal(wrongType.status, 415);
    const noAccept = await fetch(`${s.url}/mcp`, {
      method: 'POST',
      headers: { ...h, 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    assert.equal(noAccept.status, 406);
    const huge = await rpc(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(5 * 1024 * 1024) } }));
    assert.equal(huge.status, 413);
    // Chunked bodies carry no length: they are counted as they arrive, and refused past the limit.
    const chunked = (text: string) =>
      fetch(`${s.url}/mcp`, {
        method: 'POST',
        headers: { ...h, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: new ReadableStream({
          start(c) {
            for (let i = 0; i < text.length; i += 65536) c.enqueue(new TextEncoder().encode(text.slice(i, i + 65536)));
            c.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
    assert.equal(
      (await chunked(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(5 * 1024 * 1024) } }))).status,
      413,
    );
    const small = await chunked('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
    assert.equal(small.status, 200);
    assert.ok(((await small.json()) as { result: { tools: unknown[] } }).result.tools.length === 3);
    const get = await fetch(`${s.url}/mcp`, { headers: { ...h, accept: 'text/event-stream' } });
    assert.equal(get.status, 405);

    const { client } = await connectAs(s.url, h);
    const unknown = await client.callTool({ name: 'nope', arguments: {} }).then(
      (r) => JSON.stringify((r as ToolResult).isError ? r : { unexpected: r }),
      (e: Error) => e.message,
    );
    assert.match(unknown, /nope/, 'an unknown tool is a tool or protocol error naming it');
    assert.doesNotMatch(unknown, /unexpected/);
    const badArgs: Record<string, unknown>[] = [
      { query: 'x', limit: 0 },
      { query: 'x', limit: 10000 },
      { query: '' },
      { query: 'x'.repeat(100 * 1024) },
      { query: 42 },
      {},
    ];
    for (const args of badArgs) {
      const r = await client
        .callTool({ name: 'search', arguments: args })
        .catch((e: Error) => ({ isError: true, content: [{ type: 'text', text: e.message }] }));
      assert.equal((r as ToolResult).isError, true, JSON.stringify(args).slice(0, 60));
      assert.doesNotMatch(JSON.stringify(r), /at .*\.ts:\d+/, 'no stack trace');
    }
    for (const query of ['"', '*', 'NEAR(a b)', '(((', 'a OR', 'title:x', 'AND', '-', "'; DROP TABLE items; --", 'report"', 'quarterly*']) {
      const r = await call(client, 'search', { query });
      assert.equal(r.isError, undefined, query);
      assert.ok(Array.isArray((r.structuredContent as { results: unknown[] }).results), query);
    }
    assert.ok(((await call(client, 'search', { query: 'report"' })).structuredContent as { results: unknown[] }).results.length > 0);
    assert.equal(Array.isArray((await call(client, 'search', { query: 'report', limit: 2 })).structuredContent!.results), true);
    assert.equal(
      ((await call(client, 'search', { query: 'report', limit: 2 })).structuredContent as { results: unknown[] }).results.length,
      2,
    );
    await client.close();
  });

  test('resources/list pages with a cursor, opaque and bound to the caller', async () => {
    for (let i = 0; i < 230; i++)
      await s.database.write((tx) =>
        putItem(tx, `bulk/${String(i).padStart(3, '0')}`, itemRecord({ title: `bulk ${i}`, text: 'bulk', labels: i % 2 ? 'eng' : '' })),
      );
    const { client } = await connectAs(s.url, bearer(tokens.finuser!));
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await client.listResources(cursor ? { cursor } : {});
      seen.push(...page.resources.map((r) => r.uri));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    const bulk = seen.filter((u) => u.startsWith('svc://items/bulk/'));
    assert.equal(bulk.length, 115, 'only the unlabelled half');
    assert.equal(new Set(seen).size, seen.length, 'no duplicates across pages');
    assert.ok(pages >= 2);
    await assert.rejects(client.listResources({ cursor: '!!' }), /cursor/);
    await client.close();

    // A cursor is bound to the caller and carries an id it was shown, never a position in the whole store (which
    // would tell how many documents it cannot see).
    const fin = (await connectAs(s.url, bearer(tokens.finuser!))).client;
    const eng = (await connectAs(s.url, bearer(tokens.enguser!))).client;
    try {
      const first = await fin.listResources({});
      const cursor = first.nextCursor!;
      assert.ok(cursor, 'there is a next page');
      const carried = Buffer.from(cursor.split('.')[0]!, 'base64url').toString('utf8');
      assert.equal(`svc://items/${carried}`, first.resources.at(-1)!.uri, 'the cursor carries the last id on the page');
      const next = await fin.listResources({ cursor });
      assert.ok(next.resources.every((r) => r.uri > first.resources.at(-1)!.uri));
      // Another user's cursor, an altered one, and numbers (what a sequence cursor would take) are refused.
      await assert.rejects(eng.listResources({ cursor }), /invalid cursor/);
      const altered = `${Buffer.from('bulk/000', 'utf8').toString('base64url')}.${cursor.split('.')[1]}`;
      for (const forged of [altered, '0', '1', 'zz', `${cursor}x`])
        await assert.rejects(fin.listResources({ cursor: forged }), /invalid cursor/);
    } finally {
      await fin.close();
      await eng.close();
    }
  });

  test('JSON-RPC batches: only under protocol 2025-03-26, at most 10 messages, each checked as if sent alone', async () => {
    const message = (id: number, method: string, params: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, method, params });
    const search = (id: number, limit = 5) => message(id, 'tools/call', { name: 'search', arguments: { query: 'quarterly', limit } });
    const send = (body: unknown, version?: string) =>
      post(s.url, { ...bearer(tokens.enguser!), ...(version ? { 'mcp-protocol-version': version } : {}) }, JSON.stringify(body));
    const refused = async (res: Response, pattern: RegExp) => {
      assert.equal(res.status, 400);
      const body = (await res.json()) as { error: { code: number; message: string } };
      assert.equal(body.error.code, -32600);
      assert.match(body.error.message, pattern);
    };

    // The batch of a hundred calls the transport would run at once.
    await refused(await send(Array.from({ length: 100 }, (_, i) => search(i))), /at most 10 messages/);
    await refused(
      await send(
        Array.from({ length: 11 }, (_, i) => search(i)),
        '2025-03-26',
      ),
      /at most 10 messages/,
    );
    for (const version of ['2025-06-18', '2025-11-25', '2024-11-05']) {
      await refused(await send([search(1), search(2)], version), new RegExp(`not part of MCP protocol version ${version}`));
    }
    await refused(
      await send([message(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } })]),
      /2025-06-18/,
    );
    await refused(await send([]), /empty batch/);
    // A repeated id would end the request while a call under it still runs; a batch cancelling its own call would
    // never be answered.
    await refused(await send([search(1), message(1, 'tools/call', { name: 'whoami', arguments: {} })]), /id 1 is used twice/);
    await refused(
      await send([search(7), { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7 } }]),
      /cannot cancel one of its own requests/,
    );

    // Ten messages, each with the caller's own visibility and a single call's limits.
    const batch = [
      message(1, 'tools/call', { name: 'fetch', arguments: { id: 'eng' } }),
      message(2, 'tools/call', { name: 'fetch', arguments: { id: 'finance' } }),
      search(3, 51),
      ...Array.from({ length: 7 }, (_, i) => search(4 + i)),
    ];
    const ok = await send(batch, '2025-03-26');
    assert.equal(ok.status, 200);
    const answers = (await ok.json()) as { id: number; result?: ToolResult; error?: unknown }[];
    assert.equal(answers.length, 10);
    const byId = new Map(answers.map((a) => [a.id, a]));
    assert.equal(byId.get(1)?.result?.isError ?? false, false, 'a visible item is fetched');
    const hidden = byId.get(2)!;
    assert.ok(hidden.error !== undefined || hidden.result?.isError === true, 'an invisible item is not found, as alone');
    assert.doesNotMatch(JSON.stringify(hidden), /The quarterly report for finance/);
    const tooMany = byId.get(3)!;
    assert.ok(tooMany.error !== undefined || tooMany.result?.isError === true, 'limit 51 is refused, as alone');
    for (let id = 4; id <= 10; id++) {
      const ids = (byId.get(id)!.result!.structuredContent as { results: { id: string }[] }).results.map((r) => r.id).sort();
      assert.deepEqual(ids, ['eng', 'open']);
    }
    // Without the header the transport specification's default, 2025-03-26, applies: a small batch is served.
    assert.equal((await send([search(1), search(2)])).status, 200);
  });
});

describe('/mcp session ids without a session secret (token-only configuration)', () => {
  test('are keyed by the database: they survive a restart and stay bound to their user', async () => {
    const s = await startTestServer({ auth: 'token\n    enabled true\n' });
    try {
      const alice = await s.addUser({ uid: 'alice', email: 'alice@example.com' });
      const bob = await s.addUser({ uid: 'bob', email: 'bob@example.com' });
      const [ta, tb] = [await s.tokenFor(alice), await s.tokenFor(bob)];
      const { client, transport } = await connectAs(s.url, bearer(ta));
      const id = transport.sessionId!;
      await client.close();
      await s.restart();
      const list = '{"jsonrpc":"2.0","id":2,"method":"tools/list"}';
      assert.equal((await post(s.url, { ...bearer(ta), 'mcp-session-id': id }, list)).status, 200);
      assert.equal((await post(s.url, { ...bearer(tb), 'mcp-session-id': id }, list)).status, 403);
    } finally {
      await s.stop();
    }
  });
});

describe('/mcp when a read fails after the caller is known', () => {
  test("a tool or resource call answers in svc's own words; the statement and the driver's message go to the log only", async () => {
    const lines: string[] = [];
    const s = await startTestServer({ auth: 'token\n    enabled true\n', log: createLogger((line) => lines.push(line)) });
    try {
      const alice = await s.addUser({ uid: 'alice', email: 'alice@example.com' });
      await s.database.write((tx) => putItem(tx, 'doc', itemRecord({ title: 'a plan', text: 'the plan', labels: '' })));
      const { client } = await connectAs(s.url, bearer(await s.tokenFor(alice)));
      try {
        // The search index goes away under the server: the bearer lookup still works, the search's query cannot.
        await s.database.write(async (tx) => void (await tx.run(sql`ALTER TABLE search_postings RENAME TO search_postings_gone`)));
        const r = await call(client, 'search', { query: 'plan' });
        assert.equal(r.isError, true);
        const text = r.content.map((c) => c.text).join(' ');
        assert.match(text, /svc failed to answer this call; its log has details/);
        assert.doesNotMatch(text, /search_postings|SELECT|select|params/i);
        await s.database.write(async (tx) => void (await tx.run(sql`ALTER TABLE items RENAME TO items_gone`)));
        await assert.rejects(client.listResources(), (e: Error) => /svc failed to answer/.test(e.message) && !/items/.test(e.message));
        assert.ok(
          lines.some((l) => /"event":"mcp_handler_failed".*"handler":"search".*search_postings/.test(l)),
          'the log has the cause',
        );
      } finally {
        await client.close();
      }
    } finally {
      await s.stop();
    }
  });
});

describe('documents an older svc wrote, without the search index', () => {
  test('are indexed once svc starts, and found through /mcp under the access rule', async () => {
    const lines: string[] = [];
    const s = await startTestServer({ auth: 'token\n    enabled true\n', log: createLogger((line) => lines.push(line)) });
    try {
      const alice = await s.addUser({ uid: 'alice', email: 'alice@example.com', labels: ['eng'] });
      // Written straight into the table, as an svc before the index did: no postings.
      await s.database.write(async (tx) => {
        for (let i = 0; i < 1200; i++) {
          const labels = i % 2 === 0 ? 'eng' : 'vault';
          await tx.run(sql`INSERT INTO items (id, title, text, labels, created_at, updated_at)
            VALUES (${`older/${i}`}, ${`memo ${i}`}, ${`archived memo number ${i}`}, ${labels}, 0, 0)`);
        }
      });
      const found = async () => {
        const { client } = await connectAs(s.url, bearer(await s.tokenFor(alice)));
        try {
          return ((await call(client, 'search', { query: 'archived memo', limit: 50 })).structuredContent as { results: { id: string }[] })
            .results;
        } finally {
          await client.close();
        }
      };
      assert.deepEqual(await found(), [], 'not indexed yet');
      await s.restart();
      // Indexed in the background once svc serves: the log says when it is done.
      for (let i = 0; i < 200 && !lines.some((l) => l.includes('"event":"search_indexed"')); i++)
        await new Promise((r) => setTimeout(r, 50));
      const results = await found();
      assert.equal(results.length, 50);
      assert.ok(
        results.every((r) => Number(r.id.split('/')[1]) % 2 === 0),
        'only what alice may read',
      );
      assert.ok(
        lines.some((l) => /"event":"search_indexed".*"items":1200/.test(l)),
        'the start says how many it indexed',
      );
      const [n] = await s.database.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM search_docs`);
      assert.equal(n!.n, 1200);
    } finally {
      await s.stop();
    }
  });
});
