import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { count } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { users, audit } from '../src/db/schema.ts';
import { putItem } from '../src/store/items.ts';
import { itemRecord } from './helpers/records.ts';

describe('administration', () => {
  let s: TestServer;
  let adminToken: string;
  let userToken: string;
  let admin: Browser;
  before(async () => {
    s = await startTestServer();
    const root = await s.addUser({ uid: 'root', email: 'root@example.com', password: 'root password 1', admin: true });
    const plain = await s.addUser({ uid: 'plain', email: 'plain@example.com', password: 'plain password 1' });
    adminToken = await s.tokenFor(root, undefined, 'mcp api admin');
    userToken = await s.tokenFor(plain, undefined, 'mcp api');
    admin = new Browser(s.url);
    assert.equal((await admin.login('root', 'root password 1')).status, 303);
  });
  after(() => s.stop());

  const api = (path: string, init: { method?: string; json?: unknown; token?: string } = {}) =>
    fetch(`${s.url}/admin/api${path}`, {
      method: init.method ?? (init.json === undefined ? 'GET' : 'POST'),
      headers: { ...bearer(init.token ?? adminToken), ...(init.json === undefined ? {} : { 'content-type': 'application/json' }) },
      body: init.json === undefined ? null : JSON.stringify(init.json),
    });
  const userCount = async () => (await s.database.db.select({ n: count() }).from(users).get())!.n;

  test('anonymous: API 401, browser 303 to login; non-admins 403 and nothing changes', async () => {
    const anon = await fetch(`${s.url}/admin/api/users`);
    assert.equal(anon.status, 401);
    assert.equal(anon.headers.get('www-authenticate'), 'Bearer realm="svc"');
    const page = await fetch(`${s.url}/admin/users`, { redirect: 'manual' });
    assert.equal(page.status, 303);
    assert.equal(page.headers.get('location'), '/login?next=%2Fadmin%2Fusers');

    const before = await userCount();
    for (const [method, path, json] of [
      ['GET', '/users', undefined],
      ['POST', '/users', { uid: 'sneaky', email: 'sneaky@example.com', admin: true }],
      ['PATCH', '/users/plain', { admin: true }],
      ['DELETE', '/users/root', undefined],
      ['PUT', '/items/x', { title: 't', text: 'x' }],
      ['GET', '/audit', undefined],
    ] as const) {
      const res = await api(path, { method, json, token: userToken });
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.equal((await res.json()).error, 'forbidden');
    }
    assert.equal(await userCount(), before);
    const plainBrowser = new Browser(s.url);
    await plainBrowser.login('plain', 'plain password 1');
    assert.equal((await plainBrowser.request('/admin/users')).status, 403);
    assert.equal((await plainBrowser.request('/admin/users', { form: { uid: 'sneaky2', email: 's@example.com' } })).status, 403);
    const self = await fetch(`${s.url}/admin/api/users/plain`, { headers: bearer(userToken) });
    assert.equal(self.status, 403);
  });

  test('users API: create 201, get, list, patch, delete 204; responses never carry secrets', async () => {
    const created = await api('/users', {
      json: { uid: 'erin', email: 'erin@example.com', name: 'Erin', labels: 'eng, ops', password: 'erin password 1' },
    });
    assert.equal(created.status, 201);
    const body = await created.json();
    assert.deepEqual(body, {
      uid: 'erin',
      email: 'erin@example.com',
      name: 'Erin',
      labels: ['eng', 'ops'],
      admin: false,
      has_password: true,
      created_at: body.created_at,
    });
    const one = await (await api('/users/erin')).json();
    assert.deepEqual(one.identities, []);
    assert.equal(one.active_tokens, 0);
    const list = await (await api('/users')).json();
    assert.ok(list.some((u: { uid: string }) => u.uid === 'erin'));
    assert.doesNotMatch(JSON.stringify(list), /argon2|password_hash|erin password/);

    const patched = await api('/users/erin', { method: 'PATCH', json: { labels: ['finance'], name: 'Erin E', password: null } });
    assert.equal(patched.status, 200);
    const p = await patched.json();
    assert.deepEqual([p.labels, p.name, p.has_password], [['finance'], 'Erin E', false]);
    assert.equal((await new Browser(s.url).login('erin', 'erin password 1')).status, 401, 'the removed password no longer works');

    assert.equal((await api('/users/erin', { method: 'DELETE' })).status, 204);
    assert.equal((await api('/users/erin')).status, 404);
    assert.equal((await api('/users/erin', { method: 'DELETE' })).status, 404);
    const again = await api('/users', { json: { uid: 'erin', email: 'erin@example.com' } });
    assert.equal(again.status, 409, 'the uid stays reserved');
    assert.match((await again.json()).message, /never reused/);
    assert.equal((await api('/users', { json: { uid: 'root', email: 'x@example.com' } })).status, 409);
  });

  test('bad input is 400 with the field named; nothing created', async () => {
    const before = await userCount();
    const cases: [unknown, string][] = [
      [{ uid: 'bad uid', email: 'a@example.com' }, 'uid'],
      [{ uid: '', email: 'a@example.com' }, 'uid'],
      [{ uid: 'x'.repeat(65), email: 'a@example.com' }, 'uid'],
      [{ uid: 'ok1', email: 'nope' }, 'email'],
      [{ uid: 'ok1' }, 'email'],
      [{ uid: 'ok1', email: 'a@example.com', labels: 'Eng' }, 'labels'],
      [{ uid: 'ok1', email: 'a@example.com', labels: ['ok', 7] }, 'labels'],
      [{ uid: 'ok1', email: 'a@example.com', labels: { a: 1 } }, 'labels'],
      [{ uid: 'ok1', email: 'a@example.com', admin: 'yes' }, 'admin'],
      [{ uid: 'ok1', email: 'a@example.com', password: 'short' }, 'password'],
      [{ uid: 'ok1', email: 'a@example.com', colour: 'red' }, 'colour'],
      [{ uid: 'ok1', email: 'a@example.com', name: 'Bob\u202Eexe.txt' }, 'name'],
      [{ uid: 'ok1', email: 'a@example.com', name: 'Zero\u200Bwidth' }, 'name'],
      [{ uid: 'ok1', email: 'a@example.com', name: 'C1\u0085control' }, 'name'],
    ];
    for (const [json, field] of cases) {
      const res = await api('/users', { json });
      assert.equal(res.status, 400, JSON.stringify(json));
      const body = await res.json();
      assert.equal(body.error, 'bad_request');
      assert.ok(body.message.startsWith(`${field}:`), `${JSON.stringify(json)} -> ${body.message}`);
    }
    const notJson = await fetch(`${s.url}/admin/api/users`, {
      method: 'POST',
      headers: { ...bearer(adminToken), 'content-type': 'application/json' },
      body: '{oops',
    });
    assert.equal(notJson.status, 400);
    const form = await fetch(`${s.url}/admin/api/users`, {
      method: 'POST',
      headers: { ...bearer(adminToken), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'uid=f&email=f@example.com',
    });
    assert.equal(form.status, 400);
    assert.equal((await api('/users/plain', { method: 'PATCH', json: { email: 'broken' } })).status, 400);
    assert.equal((await api('/users/nobody', { method: 'PATCH', json: { name: 'x' } })).status, 404);
    assert.equal(await userCount(), before);
  });

  test('the last admin cannot be removed or demoted; with two, concurrent demotions leave one', async () => {
    const demote = await api('/users/root', { method: 'PATCH', json: { admin: false } });
    assert.equal(demote.status, 409);
    assert.equal((await api('/users/root', { method: 'DELETE' })).status, 409);
    assert.equal((await (await api('/users/root')).json()).admin, true);

    await api('/users', { json: { uid: 'second', email: 'second@example.com', admin: true } });
    const secondToken = await s.tokenFor(
      await (await import('../src/store/users.ts')).getUser(s.database.db, 'second'),
      undefined,
      'mcp api admin',
    );
    const [a, b] = await Promise.all([
      api('/users/second', { method: 'PATCH', json: { admin: false } }),
      api('/users/root', { method: 'PATCH', json: { admin: false }, token: secondToken }),
    ]);
    // Whichever lands second is refused: 409 if it still ran as an admin, 403 if its caller was already demoted.
    const statuses = [a.status, b.status].sort();
    assert.equal(statuses[0], 200);
    assert.ok([403, 409].includes(statuses[1]!), `second demotion: ${statuses[1]}`);
    const admins = (await (await api('/users', { token: a.status === 200 ? adminToken : secondToken })).json()).filter(
      (u: { admin: boolean }) => u.admin,
    );
    assert.equal(admins.length, 1);
    // Put things back for the other tests.
    const remaining = admins[0].uid === 'root' ? adminToken : secondToken;
    await api('/users/root', { method: 'PATCH', json: { admin: true }, token: remaining });
  });

  test('two admins changing the same user at once leave a consistent record', async () => {
    await api('/users', { json: { uid: 'shared', email: 's0@example.com', name: 'n0' } });
    const writes = [];
    for (let i = 1; i <= 20; i++) {
      writes.push(api('/users/shared', { method: 'PATCH', json: i % 2 ? { email: `s${i}@example.com` } : { name: `n${i}` } }));
    }
    assert.ok((await Promise.all(writes)).every((r) => r.status === 200));
    const final = await (await api('/users/shared')).json();
    assert.match(final.email, /^s(1|3|5|7|9|11|13|15|17|19)@example\.com$/);
    assert.match(final.name, /^n(2|4|6|8|10|12|14|16|18|20)$/);
  });

  test("a removed user's token and session are refused at once", async () => {
    await api('/users', { json: { uid: 'leaver', email: 'leaver@example.com', password: 'leaver password' } });
    const token = await s.tokenFor(await (await import('../src/store/users.ts')).getUser(s.database.db, 'leaver'), undefined, 'mcp api');
    const b = new Browser(s.url);
    await b.login('leaver', 'leaver password');
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 200);
    assert.equal((await b.request('/auth/tokens')).status, 200);
    assert.equal((await api('/users/leaver', { method: 'DELETE' })).status, 204);
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 401);
    assert.equal((await b.request('/auth/tokens')).status, 401);
  });

  test('label changes reach existing tokens and sessions on the next request', async () => {
    await s.database.write((tx) => putItem(tx, 'secret/plan', itemRecord({ title: 'Plan', text: 'the plan', labels: 'board' })));
    const mcp = (token: string) =>
      fetch(`${s.url}/mcp`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'fetch', arguments: { id: 'secret/plan' } } }),
      }).then((r) => r.json());
    assert.equal((await mcp(userToken)).result.isError, true);
    await api('/users/plain', { method: 'PATCH', json: { labels: 'board' } });
    assert.equal((await mcp(userToken)).result.structuredContent.title, 'Plan');
    await api('/users/plain', { method: 'PATCH', json: { labels: '' } });
    assert.equal((await mcp(userToken)).result.isError, true);
  });

  test("revoke a user's tokens and end their sessions", async () => {
    const b = new Browser(s.url);
    await b.login('plain', 'plain password 1');
    const extra = await (await b.request('/auth/tokens', { form: { name: 'x' } })).json();
    assert.equal((await api('/users/plain/sessions/end', { json: {} })).status, 200);
    assert.equal((await b.request('/auth/tokens')).status, 401);
    const revoked = await (await api('/users/plain/tokens/revoke', { json: {} })).json();
    assert.ok(revoked.revoked >= 2);
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(extra.token) })).status, 401);
    userToken = await s.tokenFor(await (await import('../src/store/users.ts')).getUser(s.database.db, 'plain'), undefined, 'mcp api');
  });

  test('items API: put creates 201 then replaces 200, labels as string or array, get, list, delete 204', async () => {
    const created = await api('/items/docs/a.b', { method: 'PUT', json: { title: 'A', text: 'alpha', labels: 'eng, ops' } });
    assert.equal(created.status, 201);
    assert.deepEqual((await created.json()).labels, ['eng', 'ops']);
    const replaced = await api('/items/docs/a.b', { method: 'PUT', json: { title: 'A2', text: 'alpha two', labels: ['ops'] } });
    assert.equal(replaced.status, 200);
    const got = await (await api('/items/docs/a.b')).json();
    assert.deepEqual([got.title, got.text, got.labels], ['A2', 'alpha two', ['ops']]);
    assert.ok((await (await api('/items')).json()).some((i: { id: string }) => i.id === 'docs/a.b'));
    for (const [json, field] of [
      [{ text: 'x' }, 'title'],
      [{ title: 't' }, 'text'],
      [{ title: 't', text: 'x', labels: 'BAD' }, 'labels'],
    ] as const) {
      const r = await api('/items/docs/b', { method: 'PUT', json });
      assert.equal(r.status, 400);
      assert.ok((await r.json()).message.startsWith(`${field}:`));
    }
    assert.equal(
      (await api('/items/../etc', { method: 'PUT', json: { title: 't', text: 'x' } })).status,
      404,
      'URL normalisation keeps it out of /admin/api',
    );
    for (const bad of ['bad%20id', 'a//b', 'a/.hidden/..x/%2E%2E']) {
      const r = await api(`/items/${bad}`, { method: 'PUT', json: { title: 't', text: 'x' } });
      assert.equal(r.status, 400, bad);
      assert.ok((await r.json()).message.startsWith('id:'), bad);
    }
    assert.equal((await api('/items/docs/a.b', { method: 'DELETE' })).status, 204);
    assert.equal((await api('/items/docs/a.b')).status, 404);
    assert.equal((await api('/items/docs/a.b', { method: 'DELETE' })).status, 404);
  });

  test('CLI and API agree: a user added by one is seen by the other', async () => {
    const r = await s.ws.svc(['user', 'add', 'from-cli', '--email', 'cli@example.com', '--labels', 'eng']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual((await (await api('/users/from-cli')).json()).labels, ['eng']);
    await api('/users', { json: { uid: 'from-api', email: 'api@example.com', labels: 'ops' } });
    const listed = JSON.parse((await s.ws.svc(['user', 'list', '--json'])).stdout);
    assert.deepEqual(listed.find((u: { uid: string }) => u.uid === 'from-api').labels, ['ops']);
  });

  test('pages: list with search, add with errors shown, edit, remove with a confirmation step', async () => {
    const list = await admin.request('/admin/users?q=plain');
    assert.equal(list.status, 200);
    const html = await list.text();
    assert.match(html, /data-uid="plain"/);
    assert.doesNotMatch(html, /data-uid="root"/);

    const bad = await admin.request('/admin/users', { form: { uid: 'page user', email: 'p@example.com' } });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /uid: a uid is 1 to 64 characters/);
    const added = await admin.request('/admin/users', { form: { uid: 'pageuser', email: 'p@example.com', labels: 'eng', password: '' } });
    assert.equal(added.status, 303);
    assert.equal(added.headers.get('location'), '/admin/users/pageuser?done=created');
    const edit = await admin.request('/admin/users/pageuser?done=created');
    assert.match(await edit.text(), /User created\./);
    const saved = await admin.request('/admin/users/pageuser', { form: { email: 'p2@example.com', name: 'Page', labels: 'eng ops' } });
    assert.equal(saved.status, 303);
    assert.deepEqual((await (await api('/users/pageuser')).json()).labels, ['eng', 'ops']);

    const confirm = await admin.request('/admin/users/pageuser/remove');
    assert.match(await confirm.text(), /stays\s+reserved/);
    assert.equal((await api('/users/pageuser')).status, 200, 'the confirmation page itself removes nothing');
    const removed = await admin.request('/admin/users/pageuser/remove', { method: 'POST' });
    assert.equal(removed.status, 303);
    assert.equal((await api('/users/pageuser')).status, 404);
    assert.equal((await admin.request('/admin/users/ghost')).status, 404);
  });

  test('cross-site form posts to admin pages are 403 and change nothing', async () => {
    const before = await userCount();
    const res = await admin.request('/admin/users', {
      form: { uid: 'csrf', email: 'c@example.com', admin: 'on' },
      origin: 'https://evil.example',
    });
    assert.equal(res.status, 403);
    assert.equal((await admin.request('/admin/users/plain/remove', { method: 'POST', origin: 'https://evil.example' })).status, 403);
    assert.equal(await userCount(), before);
  });

  test('the audit trail records who did what, when and from where, without secrets', async () => {
    await new Browser(s.url).login('root', 'wrong password!!');
    const entries = await (await api('/audit?limit=1000')).json();
    const actions = new Set(entries.map((e: { action: string }) => e.action));
    for (const a of [
      'user.create',
      'user.update',
      'user.remove',
      'user.revoke_tokens',
      'user.end_sessions',
      'item.create',
      'item.replace',
      'item.remove',
      'login.success',
      'login.failure',
      'token.create',
    ]) {
      assert.ok(actions.has(a), `audit has ${a}`);
    }
    const created = entries.find((e: { action: string; target: string }) => e.action === 'user.create' && e.target === 'erin');
    assert.equal(created.actor, 'root');
    assert.equal(created.via, 'token');
    assert.equal(created.peer, '127.0.0.1');
    assert.match(created.at, /^\d{4}-\d\d-\d\dT/);
    assert.equal(created.detail.password, 'set');
    const failure = entries.find((e: { action: string }) => e.action === 'login.failure');
    assert.equal(failure.actor, null);
    const text = JSON.stringify(entries);
    assert.doesNotMatch(text, /erin password|wrong password!!|root password|svc_[a-z2-7]{48}|argon2/);
    const rows = await s.database.db.select({ n: count() }).from(audit).get();
    assert.ok(rows!.n >= entries.length);
    const page = await admin.request('/admin/users');
    assert.match(await page.text(), /Recent activity[\s\S]*user\.create/);
  });
});
