// Scopes: every bearer token says what it may do (CONTRACT §5 "Scopes"). Each test tries a wrong "yes" through the
// real interfaces: an OAuth app's token on the admin API and the owner's token endpoints, a restricted admin token,
// a token made before scopes existed, a demoted admin's token, and the choices on the API, the page and the CLI.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { count, eq, isNotNull } from 'drizzle-orm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { createWorkspace, OAUTH_ON } from './helpers/workspace.ts';
import { REDIRECT } from './helpers/oauth-client.ts';
import { putItem } from '../src/store/items.ts';
import { tokens, users } from '../src/db/schema.ts';
import { openDatabase } from '../src/db/open.ts';
import { applyMigrations, loadMigrations } from '../src/db/migrations.ts';
import { mintToken, storedHash } from '../src/domain/secrets.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './helpers/workspace.ts';
import { startServer } from '../src/server.ts';
import { loadConfig } from '../src/config/load.ts';
import { silentLogger } from '../src/log.ts';
import { itemRecord } from './helpers/records.ts';

const json = { 'content-type': 'application/json' };
const INSUFFICIENT = (scope: string) => `Bearer realm="svc", error="insufficient_scope", scope="${scope}"`;

/** Asserts the contract's refusal of a token outside its scopes, and returns nothing else of the answer. */
async function refusedForScope(res: Response, scope: string, what: string): Promise<void> {
  assert.equal(res.status, 403, `${what}: status`);
  assert.equal(res.headers.get('www-authenticate'), INSUFFICIENT(scope), `${what}: challenge`);
  assert.equal(((await res.json()) as { error: string }).error, 'insufficient_scope', what);
}

async function mcpWhoami(url: string, token: string, path = '/mcp'): Promise<Record<string, unknown>> {
  const client = new Client({ name: 'scopes-test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}${path}`), { requestInit: { headers: bearer(token) } }));
  try {
    return (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as Record<string, unknown>;
  } finally {
    await client.close();
  }
}

describe('an OAuth app allowed to read documents can do nothing else', () => {
  let s: TestServer;
  let root: Browser;
  let access = '';
  let grantId = '';
  before(async () => {
    s = await startTestServer({ auth: OAUTH_ON });
    await s.addUser({ uid: 'root', email: 'root@example.com', password: 'root password 1', admin: true, labels: 'eng, fin' });
    await s.addUser({ uid: 'bob', email: 'bob@example.com', password: 'bob password 1' });
    await s.database.write((tx) => putItem(tx, 'fin/q1', itemRecord({ title: 'Q1', text: 'quarter numbers', labels: 'fin' })));
    await s.database.write((tx) => putItem(tx, 'eng/plan', itemRecord({ title: 'Plan', text: 'engineering plan', labels: 'eng' })));
    root = new Browser(s.url);
    assert.equal((await root.login('root', 'root password 1')).status, 303);
    // A self-registered app, approved by the admin on the consent page and limited to the label eng.
    const reg = (await (
      await fetch(`${s.url}/oauth/register`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ client_name: 'reader', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }),
      })
    ).json()) as { client_id: string };
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const query = new URLSearchParams({
      client_id: reg.client_id,
      redirect_uri: REDIRECT,
      response_type: 'code',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 's',
    });
    const page = await (await root.request(`/oauth/authorize?${query}`, { headers: { accept: 'text/html' } })).text();
    const request = /name="request" value="([^"]+)"/.exec(page)?.[1];
    assert.ok(request, page);
    const answer = await root.request('/oauth/authorize', {
      form: { request, decision: 'approve', access: 'labels', labels: 'eng' },
      headers: { accept: 'text/html' },
    });
    assert.equal(answer.status, 302);
    const code = new URL(answer.headers.get('location')!).searchParams.get('code')!;
    const issued = (await (
      await fetch(`${s.url}/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          client_id: reg.client_id,
          code,
          code_verifier: verifier,
          redirect_uri: REDIRECT,
        }),
      })
    ).json()) as { access_token: string; scope: string };
    access = issued.access_token;
    assert.equal(issued.scope, 'mcp');
    grantId = ((await (await root.request('/auth/grants')).json()) as { id: string }[])[0]!.id;
  });
  after(() => s.stop());

  test('it reads through MCP, narrowed to its grant, and says so in whoami', async () => {
    const who = await mcpWhoami(s.url, access, '/oauth/mcp');
    assert.deepEqual([who.uid, who.via, who.restriction, who.scopes], ['root', 'token', ['eng'], ['mcp']]);
    assert.deepEqual((await mcpWhoami(s.url, access)).scopes, ['mcp'], 'on /mcp too');
  });

  test('the admin API refuses it, and nothing changes', async () => {
    const usersBefore = (await s.database.db.select({ n: count() }).from(users).get())!.n;
    await refusedForScope(await fetch(`${s.url}/admin/api/items/fin/q1`, { headers: bearer(access) }), 'admin', 'read an item');
    await refusedForScope(
      await fetch(`${s.url}/admin/api/users`, {
        method: 'POST',
        headers: { ...bearer(access), ...json },
        body: JSON.stringify({ uid: 'mallory', email: 'm@example.com', admin: true }),
      }),
      'admin',
      'make an admin',
    );
    await refusedForScope(
      await fetch(`${s.url}/admin/api/users/bob`, {
        method: 'PATCH',
        headers: { ...bearer(access), ...json },
        body: JSON.stringify({ password: 'taken over 12345' }),
      }),
      'admin',
      'set a password',
    );
    await refusedForScope(
      await fetch(`${s.url}/admin/api/items/eng/plan`, { method: 'DELETE', headers: bearer(access) }),
      'admin',
      'remove an item',
    );
    assert.equal((await s.database.db.select({ n: count() }).from(users).get())!.n, usersBefore, 'no user created');
    assert.equal((await new Browser(s.url).login('bob', 'taken over 12345')).status, 401, "bob's password unchanged");
    assert.equal((await new Browser(s.url).login('bob', 'bob password 1')).status, 303);
    assert.equal((await root.request('/admin/api/items/eng/plan')).status, 200, 'the item is still there');
  });

  test("the owner cannot lift the app's restriction through the personal token endpoint", async () => {
    const issued = await s.database.db.select({ id: tokens.id }).from(tokens).where(isNotNull(tokens.grantId)).all();
    assert.ok(issued.length > 0);
    for (const { id } of issued) {
      const lifted = await root.request(`/auth/tokens/${id}`, { method: 'PATCH', json: { labels: null } });
      assert.equal(lifted.status, 404, 'an OAuth token is not a personal token');
    }
    assert.deepEqual((await mcpWhoami(s.url, access, '/oauth/mcp')).restriction, ['eng'], 'still limited to its grant');
  });

  test("the owner's token and grant endpoints refuse it; the pages never open for it", async () => {
    const mine = await s.tokenFor(
      (await s.database.db.query.users.findFirst({ where: (u, { eq: e }) => e(u.uid, 'root') }))! as never,
      undefined,
      'mcp',
    );
    const personal = ((await (await root.request('/auth/tokens')).json()) as { id: string }[])[0]!.id;
    await refusedForScope(await fetch(`${s.url}/auth/tokens`, { headers: bearer(access) }), 'api', 'list tokens');
    await refusedForScope(
      await fetch(`${s.url}/auth/tokens/${personal}/revoke`, { method: 'POST', headers: bearer(access) }),
      'api',
      'revoke a token',
    );
    await refusedForScope(await fetch(`${s.url}/auth/grants`, { headers: bearer(access) }), 'api', 'list grants');
    await refusedForScope(
      await fetch(`${s.url}/auth/grants/${grantId}/revoke`, { method: 'POST', headers: bearer(access) }),
      'api',
      'revoke a grant',
    );
    assert.equal((await mcpWhoami(s.url, mine)).uid, 'root', 'the personal token still works');
    assert.equal(((await (await root.request('/auth/grants')).json()) as unknown[]).length, 1, 'the grant still stands');
    for (const page of ['/', '/admin/users', '/admin/users/bob', '/admin/items', '/admin/audit']) {
      const res = await fetch(`${s.url}${page}`, { headers: { ...bearer(access), accept: 'text/html' }, redirect: 'manual' });
      assert.equal(res.status, 403, page);
      assert.doesNotMatch(await res.text(), /<html/i, page);
    }
  });

  test('a /oauth/mcp refusal names the resource metadata', async () => {
    const token = await s.tokenFor(
      (await s.database.db.query.users.findFirst({ where: (u, { eq: e }) => e(u.uid, 'bob') }))! as never,
      undefined,
      'api',
    );
    const res = await fetch(`${s.url}/oauth/mcp`, {
      method: 'POST',
      headers: { ...bearer(token), ...json, accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    assert.equal(res.status, 403);
    assert.equal(
      res.headers.get('www-authenticate'),
      `${INSUFFICIENT('mcp')}, resource_metadata="${s.url}/.well-known/oauth-protected-resource/oauth/mcp"`,
    );
    await refusedForScope(
      await fetch(`${s.url}/mcp`, {
        method: 'POST',
        headers: { ...bearer(token), ...json, accept: 'application/json, text/event-stream' },
        body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      }),
      'mcp',
      '/mcp without mcp',
    );
  });
});

describe('personal tokens carry the scopes asked for, and admin only where it is safe', () => {
  let s: TestServer;
  let admin: Browser;
  let plain: Browser;
  const tokenCount = async () => (await s.database.db.select({ n: count() }).from(tokens).get())!.n;
  const create = (b: Browser, body: unknown) => b.request('/auth/tokens', { json: body });
  before(async () => {
    s = await startTestServer();
    await s.addUser({ uid: 'root', email: 'root@example.com', password: 'root password 1', admin: true, labels: 'eng' });
    await s.addUser({ uid: 'second', email: 'second@example.com', admin: true });
    await s.addUser({ uid: 'pat', email: 'pat@example.com', password: 'pat password 12', labels: 'eng' });
    admin = new Browser(s.url);
    plain = new Browser(s.url);
    assert.equal((await admin.login('root', 'root password 1')).status, 303);
    assert.equal((await plain.login('pat', 'pat password 12')).status, 303);
  });
  after(() => s.stop());

  test('omitted means mcp; unknown scopes, admin for a non-admin, admin with a restriction: 400 and nothing made', async () => {
    const made = (await (await create(plain, { name: 'default' })).json()) as { scopes: string[]; token: string };
    assert.deepEqual(made.scopes, ['mcp']);
    await refusedForScope(await fetch(`${s.url}/auth/tokens`, { headers: bearer(made.token) }), 'api', 'an mcp token on the token API');
    const before = await tokenCount();
    for (const [who, body, pattern] of [
      [plain, { name: 'x', scopes: ['mcp', 'write'] }, /unknown scope "write"/],
      [plain, { name: 'x', scopes: 'mcp,admin' }, /admin is only for a token of an administrator/],
      [plain, { name: 'x', scopes: [] }, /at least one/],
      [plain, { name: 'x', scopes: 7 }, /scopes: a list or a string/],
      [admin, { name: 'x', scopes: ['admin'], labels: ['eng'] }, /label restriction cannot carry admin/],
      [admin, { name: 'x', scopes: 'admin', labels: '' }, /label restriction cannot carry admin/],
    ] as const) {
      const res = await create(who, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(((await res.json()) as { message: string }).message, pattern);
    }
    assert.equal(await tokenCount(), before, 'nothing made');
  });

  test("an admin's unrestricted admin token works on the admin API until the owner stops being an admin", async () => {
    const made = (await (await create(admin, { name: 'automation', scopes: 'admin api' })).json()) as {
      id: string;
      token: string;
      scopes: string[];
    };
    assert.deepEqual(made.scopes, ['api', 'admin']);
    assert.equal((await fetch(`${s.url}/admin/api/users`, { headers: bearer(made.token) })).status, 200);
    await refusedForScope(
      await fetch(`${s.url}/mcp`, {
        method: 'POST',
        headers: { ...bearer(made.token), ...json, accept: 'application/json, text/event-stream' },
        body: '{}',
      }),
      'mcp',
      'no mcp scope',
    );
    // It cannot be restricted afterwards (a restricted admin token would be a contradiction), and stays as it was.
    const restrict = await admin.request(`/auth/tokens/${made.id}`, { method: 'PATCH', json: { labels: ['eng'] } });
    assert.equal(restrict.status, 400);
    assert.equal((await fetch(`${s.url}/admin/api/users`, { headers: bearer(made.token) })).status, 200);
    const mcpOnly = (await (await create(admin, { name: 'reader' })).json()) as { token: string };
    await refusedForScope(await fetch(`${s.url}/admin/api/users`, { headers: bearer(mcpOnly.token) }), 'admin', "an admin's mcp token");
    // Losing admin takes effect on the very next request.
    assert.equal((await admin.request('/admin/api/users/second', { method: 'PATCH', json: { admin: true } })).status, 200);
    assert.equal((await s.ws.svc(['user', 'set', 'root', '--no-admin'])).code, 0);
    const after = await fetch(`${s.url}/admin/api/users`, { headers: bearer(made.token) });
    assert.equal(after.status, 403);
    assert.equal(((await after.json()) as { error: string }).error, 'forbidden');
    assert.equal((await s.ws.svc(['user', 'set', 'root', '--admin'])).code, 0);
  });

  test('a restricted admin token gets no admin, whatever its row says', async () => {
    const made = (await (await create(admin, { name: 'eng only', labels: ['eng'], scopes: 'mcp api' })).json()) as {
      id: string;
      token: string;
    };
    await refusedForScope(await fetch(`${s.url}/admin/api/items`, { headers: bearer(made.token) }), 'admin', 'restricted');
    // Even a row edited behind svc's back to carry admin is refused while it has a restriction.
    await s.database.write(async (tx) => void (await tx.update(tokens).set({ scopes: 'mcp api admin' }).where(eq(tokens.id, made.id))));
    await refusedForScope(await fetch(`${s.url}/admin/api/items`, { headers: bearer(made.token) }), 'admin', 'restricted row with admin');
  });

  test('the token page offers the scopes (admin only to admins) and shows them; none checked is refused', async () => {
    const page = await (await plain.request('/', { headers: { accept: 'text/html' } })).text();
    assert.match(page, /<input type="checkbox" name="scopes" value="mcp" checked=""/);
    assert.match(page, /name="scopes" value="api"/);
    assert.doesNotMatch(page, /name="scopes" value="admin"/);
    assert.match(await (await admin.request('/', { headers: { accept: 'text/html' } })).text(), /name="scopes" value="admin"/);
    const post = (body: string) =>
      plain.request('/auth/tokens', { body, headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' } });
    const made = await post('name=two+scopes&ttl=7d&access=all&scope_choice=1&scopes=mcp&scopes=api');
    assert.equal(made.status, 201);
    assert.match(await made.text(), /Scopes: mcp, api\./);
    const before = await tokenCount();
    const none = await post('name=no+scopes&ttl=7d&access=all&scope_choice=1');
    assert.equal(none.status, 400);
    assert.match(await none.text(), /at least one/);
    assert.equal(await tokenCount(), before);
    const listed = (await (await plain.request('/auth/tokens')).json()) as { name: string; scopes: string[] }[];
    assert.deepEqual(listed.find((t) => t.name === 'two scopes')!.scopes, ['mcp', 'api']);
  });

  test('the CLI: --scopes, and the same refusals', async () => {
    const ok = await s.ws.svc(['token', 'create', 'root', '--name', 'ci', '--scopes', 'admin,mcp']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal((await fetch(`${s.url}/admin/api/users`, { headers: bearer(ok.stdout.trim()) })).status, 200);
    const before = await tokenCount();
    const nonAdmin = await s.ws.svc(['token', 'create', 'pat', '--name', 'ci', '--scopes', 'admin']);
    assert.equal(nonAdmin.code, 1);
    assert.match(nonAdmin.stderr, /admin is only for a token of an administrator/);
    const unknown = await s.ws.svc(['token', 'create', 'pat', '--name', 'ci', '--scopes', 'mcp read']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /unknown scope "read"/);
    assert.equal(await tokenCount(), before);
    const plainToken = await s.ws.svc(['token', 'create', 'pat', '--name', 'reader']);
    assert.deepEqual((await mcpWhoami(s.url, plainToken.stdout.trim())).scopes, ['mcp']);
  });

  test('sessions are not scoped: whoami says null', async () => {
    const res = await plain.request('/mcp', {
      method: 'POST',
      headers: { ...json, accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
    });
    assert.equal(res.status, 200);
    const who = ((await res.json()) as { result: { structuredContent: { via: string; scopes: unknown } } }).result.structuredContent;
    assert.deepEqual([who.via, who.scopes], ['session', null]);
  });
});

test("tokens made before scopes existed keep what they could do: mcp and api, and admin for an unrestricted admin's", async () => {
  const ws = await createWorkspace();
  try {
    // A database as the version before scopes left it: migrations up to 0008, with tokens in it.
    const all = loadMigrations((path) => readFileSync(join(ROOT, 'drizzle', path), 'utf8'));
    const before = all.findIndex((m) => m.tag.endsWith('_token_scopes'));
    assert.ok(before > 0);
    const old = await openDatabase(ws.dbUrl, null);
    const plaintexts: Record<string, string> = {};
    await old.write(async (tx) => {
      await applyMigrations(tx, all.slice(0, before));
      const now = Date.now();
      await tx.run(
        `INSERT INTO users (id, uid, email, name, labels, admin, created_at, updated_at) VALUES (1, 'root', 'r@example.com', '', '', 1, ${now}, ${now}), (2, 'pat', 'p@example.com', '', '', 0, ${now}, ${now})` as never,
      );
      for (const [id, user, labels] of [
        ['admin_all', 1, null],
        ['admin_restricted', 1, "'eng'"],
        ['plain', 2, null],
      ] as const) {
        plaintexts[id] = mintToken();
        await tx.run(
          `INSERT INTO tokens (id, hash, user_id, name, created_at, labels) VALUES ('${id}', '${storedHash(plaintexts[id])}', ${user}, '${id}', ${now}, ${labels})` as never,
        );
      }
    });
    old.close();
    const migrated = await ws.svc(['migrate']);
    assert.equal(migrated.code, 0, migrated.stderr);
    const running = await startServer(loadConfig(readFileSync(ws.configPath, 'utf8'), ws.env, { mode: 'serve' }), silentLogger);
    try {
      const url = `http://127.0.0.1:${ws.port}`;
      const status = async (id: string, path: string) => (await fetch(`${url}${path}`, { headers: bearer(plaintexts[id]!) })).status;
      assert.deepEqual([await status('admin_all', '/admin/api/users'), await status('admin_all', '/auth/tokens')], [200, 200]);
      assert.deepEqual(
        [await status('admin_restricted', '/admin/api/users'), await status('admin_restricted', '/auth/tokens')],
        [403, 200],
      );
      assert.deepEqual([await status('plain', '/admin/api/users'), await status('plain', '/auth/tokens')], [403, 200]);
      for (const id of Object.keys(plaintexts)) assert.equal((await mcpWhoami(url, plaintexts[id]!)).via, 'token', id);
    } finally {
      await running.stop();
    }
  } finally {
    ws.remove();
  }
});
