import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { count, eq } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer, rawRequest } from './helpers/http.ts';
import { tokens } from '../src/db/schema.ts';
import type { User } from '../src/store/users.ts';
import { waitFor } from './helpers/wait.ts';
import { movableClock } from './helpers/clock.ts';
import { readDatabaseFile } from './helpers/workspace.ts';

describe('personal access tokens', () => {
  let s: TestServer;
  let alice: User;
  let bob: User;
  let b: Browser;
  // The server judges expiry by this clock, which runs five years ahead: whatever it stamps and checks must agree
  // with itself, never with the system time. Times below are read from it too.
  const clock = movableClock(5 * 365 * 86400_000);
  before(async () => {
    s = await startTestServer({ clock: clock.now });
    alice = await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1', labels: 'eng' });
    bob = await s.addUser({ uid: 'bob', email: 'bob@example.com', password: 'bob password 12' });
    b = new Browser(s.url);
    assert.equal((await b.login('alice', 'alice password 1')).status, 303);
  });
  after(() => s.stop());

  const tokenRows = async () => (await s.database.db.select({ n: count() }).from(tokens).get())!.n;

  test('create from a session: 201 with the plaintext once; list shows no secret', async () => {
    const before = clock.now();
    const res = await b.request('/auth/tokens', { form: { name: 'laptop', ttl: '30d', scopes: 'mcp api' } });
    const after = clock.now();
    assert.equal(res.status, 201);
    const body = await res.json();
    assert.deepEqual(Object.keys(body).sort(), ['expires_at', 'id', 'labels', 'name', 'scopes', 'token']);
    assert.deepEqual(body.scopes, ['mcp', 'api']);
    assert.match(body.token, /^svc_[a-z2-7]{48}$/);
    assert.equal(body.name, 'laptop');
    const minted = Date.parse(body.expires_at) - 30 * 86400_000;
    assert.ok(Math.floor(before / 1000) * 1000 <= minted && minted <= after, `expires ${body.expires_at}: 30 days after it was made`);

    const list = await (await b.request('/auth/tokens')).json();
    const mine = list.find((t: { id: string }) => t.id === body.id);
    assert.deepEqual(Object.keys(mine).sort(), ['created_at', 'expires_at', 'id', 'labels', 'last_used_at', 'name', 'scopes', 'state']);
    assert.deepEqual(mine.scopes, ['mcp', 'api']);
    assert.equal(mine.state, 'active');
    assert.equal(mine.last_used_at, null);
    assert.ok(!JSON.stringify(list).includes(body.token));

    const asBearer = await fetch(`${s.url}/auth/tokens`, { headers: bearer(body.token) });
    assert.equal(asBearer.status, 200);
    assert.equal((await asBearer.json()).length, list.length);
  });

  test('the plaintext token is never stored: not in the database file or its WAL', async () => {
    const { token } = await (await b.request('/auth/tokens', { form: { name: 'needle' } })).json();
    const files = readdirSync(s.ws.dir).filter((f) => f.startsWith('svc.db'));
    assert.ok(files.length > 0);
    for (const f of files) {
      const bytes = readDatabaseFile(join(s.ws.dir, f));
      assert.equal(bytes.includes(token), false, `${f} contains the token`);
      assert.equal(bytes.includes(token.slice(4, 40)), false, `${f} contains the token body`);
    }
    const row = await s.database.db.select().from(tokens).where(eq(tokens.name, 'needle')).get();
    assert.match(row!.hash, /^[0-9a-f]{64}$/);
  });

  test('a bearer caller cannot mint tokens (403), and nothing is created', async () => {
    const token = await s.tokenFor(alice);
    const before = await tokenRows();
    const res = await fetch(`${s.url}/auth/tokens`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=x',
    });
    assert.equal(res.status, 403);
    assert.equal((await res.json()).error, 'forbidden');
    assert.equal(await tokenRows(), before);
  });

  test('bad names, ttls and bodies: 400 naming the field; nothing created', async () => {
    const before = await tokenRows();
    const cases: [Record<string, string>, RegExp][] = [
      [{ name: '' }, /^name:/],
      [{ name: '   ' }, /^name:/],
      [{ name: 'x'.repeat(101) }, /^name:/],
      [{ name: 'x'.repeat(10_000) }, /^name:/],
      [{ name: 'ok', ttl: '0h' }, /^ttl:/],
      [{ name: 'ok', ttl: '-1h' }, /^ttl:/],
      [{ name: 'ok', ttl: '1x' }, /^ttl:/],
      [{ name: 'ok', ttl: 'h' }, /^ttl:/],
      [{ name: 'ok', ttl: '100000d' }, /^ttl: at most 3650d/],
      [{}, /^name:/],
    ];
    for (const [form, message] of cases) {
      const res = await b.request('/auth/tokens', { form });
      assert.equal(res.status, 400, JSON.stringify(form));
      const body = await res.json();
      assert.equal(body.error, 'bad_request');
      assert.match(body.message, message);
    }
    const plain = await b.request('/auth/tokens', { body: 'name=x', headers: { 'content-type': 'text/plain' } });
    assert.equal(plain.status, 400);
    const big = await b.request('/auth/tokens', { form: { name: 'x'.repeat(20_000) } });
    assert.equal(big.status, 413);
    assert.equal(await tokenRows(), before);
  });

  test('a cross-site form post with the session cookie is refused (403), nothing created', async () => {
    const before = await tokenRows();
    const res = await b.request('/auth/tokens', { form: { name: 'csrf' }, origin: 'https://evil.example' });
    assert.equal(res.status, 403);
    const noOrigin = await b.request('/auth/tokens', { form: { name: 'csrf' }, origin: null });
    assert.equal(noOrigin.status, 403);
    const foreignReferer = await b.request('/auth/tokens', {
      form: { name: 'csrf' },
      origin: null,
      headers: { referer: 'https://evil.example/x' },
    });
    assert.equal(foreignReferer.status, 403);
    assert.equal(await tokenRows(), before);
  });

  test("revoke: refused on the very next request; others' and unknown ids are 404", async () => {
    const { id, token } = await (await b.request('/auth/tokens', { form: { name: 'short-lived', scopes: 'mcp api' } })).json();
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 200);

    const bobSession = new Browser(s.url);
    await bobSession.login('bob', 'bob password 12');
    const foreign = await bobSession.request(`/auth/tokens/${id}/revoke`, { method: 'POST' });
    assert.equal(foreign.status, 404);
    assert.equal((await bobSession.request('/auth/tokens/tok_unknown/revoke', { method: 'POST' })).status, 404);
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 200, 'still active after the refused revokes');

    const revoked = await b.request(`/auth/tokens/${id}/revoke`, { method: 'POST' });
    assert.equal(revoked.status, 200);
    assert.deepEqual(await revoked.json(), { id, state: 'revoked' });
    const after = await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) });
    assert.equal(after.status, 401);
    assert.match(after.headers.get('www-authenticate')!, /^Bearer realm="svc", error="invalid_token"/);
    const listed = (await (await b.request('/auth/tokens')).json()).find((t: { id: string }) => t.id === id);
    assert.equal(listed.state, 'revoked');
  });

  test('a token may revoke itself', async () => {
    const token = await s.tokenFor(bob, undefined, 'api');
    const [{ id }] = await (await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).json();
    const res = await fetch(`${s.url}/auth/tokens/${id}/revoke`, { method: 'POST', headers: bearer(token) });
    assert.equal(res.status, 200);
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 401);
  });

  test('expiry: a 1s token works, then is refused and listed as expired', async () => {
    const { id, token, expires_at } = await (
      await b.request('/auth/tokens', { form: { name: 'one second', ttl: '1s', scopes: 'api' } })
    ).json();
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 200);
    clock.advance(1001);
    assert.ok(clock.now() > Date.parse(expires_at), 'the clock is past the expiry');
    const res = await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) });
    assert.equal(res.status, 401);
    assert.match(res.headers.get('www-authenticate')!, /error="invalid_token"/);
    assert.match((await res.json()).message, /expired/);
    const listed = (await (await b.request('/auth/tokens')).json()).find((t: { id: string }) => t.id === id);
    assert.equal(listed.state, 'expired');
  });

  test("malformed credentials are 401, never anonymous and never the cookie's user", async () => {
    const good = await s.tokenFor(alice, undefined, 'api');
    const body = good.slice(4, 44);
    const flipped = good.slice(0, -1) + (good.endsWith('a') ? 'b' : 'a');
    const cases: [string, string][] = [
      ['wrong checksum', `Bearer ${flipped}`],
      ['truncated', `Bearer ${good.slice(0, -3)}`],
      ['right format, unknown', `Bearer svc_${body}${good.slice(44)}`.replace(body, 'a'.repeat(40))],
      ['Bearer without token', 'Bearer'],
      ['Bearer and a space', 'Bearer '],
      ['another scheme', `Basic ${Buffer.from('alice:alice password 1').toString('base64')}`],
      ['two tokens in one header', `Bearer ${good}, Bearer ${good}`],
    ];
    for (const [what, authorization] of cases) {
      const res = await b.request('/auth/tokens', { headers: { authorization } });
      assert.equal(res.status, 401, what);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="svc"/, what);
      assert.equal((await res.json()).error, 'unauthorized', what);
    }
    const once = await rawRequest(s.url, ['GET /auth/tokens HTTP/1.1', `Authorization: Bearer ${good}`]);
    assert.equal(once.status, 200);
    const twice = await rawRequest(s.url, ['GET /auth/tokens HTTP/1.1', `Authorization: Bearer ${good}`, `Authorization: Bearer ${good}`]);
    assert.equal(twice.status, 401, 'two Authorization headers');
  });

  test('last_used_at is recorded on use', async () => {
    const token = await s.tokenFor(alice, undefined, 'api');
    const before = clock.now();
    await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) });
    // The stamp is written after the answer, so the listing that shows it may be a later one.
    let used: { last_used_at: string }[] = [];
    await waitFor('last_used_at to be recorded', async () => {
      const list = await (await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).json();
      used = list.filter((t: { last_used_at: string | null }) => t.last_used_at !== null);
      return used.length >= 1;
    });
    const stamped = Date.parse(used[0]!.last_used_at);
    assert.ok(
      Math.floor(before / 1000) * 1000 <= stamped && stamped <= clock.now(),
      `last used ${used[0]!.last_used_at}: during this test`,
    );
  });

  test('the token page renders for a session, with revoke buttons; a bearer token cannot open it', async () => {
    const page = await b.request('/', { headers: { accept: 'text/html' } });
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /action="\/auth\/tokens\/tok_[a-z2-7]+\/revoke"/);
    assert.doesNotMatch(html, /svc_[a-z2-7]{48}/, 'no plaintext token on the page');
    const token = await s.tokenFor(alice, undefined, 'mcp api');
    assert.equal((await fetch(`${s.url}/`, { headers: bearer(token) })).status, 403);
  });
});

describe('with the token channel off', () => {
  test('no personal token is made: the page says so, POST /auth/tokens is 403, svc token create exits 1', async () => {
    const s = await startTestServer({
      auth: 'session\n    cookie_name svc_session\n    ttl 24h\n    secret_env SVC_SESSION_SECRET\nlocal\n    enabled true\ntoken\n    enabled false\n',
    });
    try {
      await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
      const b = new Browser(s.url);
      assert.equal((await b.login('alice', 'alice password 1')).status, 303);
      const page = await (await b.request('/', { headers: { accept: 'text/html' } })).text();
      assert.match(page, /Personal access tokens are turned off on this server/);
      assert.doesNotMatch(page, /action="\/auth\/tokens"/, 'no create form');
      const res = await b.request('/auth/tokens', { json: { name: 'agent' } });
      assert.equal(res.status, 403);
      assert.match(((await res.json()) as { message: string }).message, /token enabled false/);
      const cli = await s.ws.svc(['token', 'create', 'alice', '--name', 'cli']);
      assert.equal(cli.code, 1);
      assert.match(cli.stderr, /personal access tokens are turned off/);
      assert.equal((await s.database.db.select({ n: count() }).from(tokens).get())!.n, 0, 'nothing was made');
    } finally {
      await s.stop();
    }
  });
});
