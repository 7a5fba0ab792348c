import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { count } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser } from './helpers/http.ts';
import { newSecret } from './helpers/workspace.ts';
import { sessions, loginFailures } from '../src/db/schema.ts';
import { updateUser } from '../src/store/users.ts';

describe('password login and sessions', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
    await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
    await s.addUser({ uid: 'sso-only', email: 'sso@example.com' });
    for (let i = 0; i < 6; i++) await s.addUser({ uid: `user${i}`, email: `u${i}@example.com`, password: 'right password' });
  });
  after(() => s.stop());

  const sessionCount = async () => (await s.database.db.select({ n: count() }).from(sessions).get())!.n;

  test('the login page shows the password form', async () => {
    const res = await new Browser(s.url).request('/login');
    assert.equal(res.status, 200);
    const html = await res.text();
    assert.match(html, /<form method="post" action="\/login"/);
    assert.doesNotMatch(html, /oidc\/login/, 'no single sign-on button while oidc is off');
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'none'/);
  });

  test('success: 303 to next, an HttpOnly SameSite=Lax cookie, and the token page', async () => {
    const b = new Browser(s.url);
    const res = await b.login('alice', 'alice password 1', '/auth/tokens?x=1');
    assert.equal(res.status, 303);
    assert.equal(res.headers.get('location'), `${s.url}/auth/tokens?x=1`);
    const cookie = res.headers.get('set-cookie')!;
    assert.match(cookie, /^svc_session=[a-z2-7]{32}\.[A-Za-z0-9_-]{43};/);
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Lax/);
    assert.match(cookie, /Path=\//);
    assert.match(cookie, /Max-Age=86400/);
    assert.doesNotMatch(cookie, /Secure/, 'http base_url: no Secure flag');
    const page = await b.request('/');
    assert.equal(page.status, 200);
    assert.match(await page.text(), /Personal access tokens/);
  });

  test('a new session id at every login (no fixation)', async () => {
    const b = new Browser(s.url);
    await b.login('alice', 'alice password 1');
    const first = b.cookies.get('svc_session');
    await b.login('alice', 'alice password 1');
    assert.notEqual(b.cookies.get('svc_session'), first);
  });

  test('failure: 401, the form again, one generic message for unknown user, wrong password and no password', async () => {
    const bodies = [];
    for (const [user, password] of [
      ['alice', 'wrong password'],
      ['nobody', 'whatever pw'],
      ['sso-only', 'anything at all'],
    ]) {
      const res = await new Browser(s.url).login(user!, password!);
      assert.equal(res.status, 401);
      assert.equal(res.headers.get('set-cookie'), null);
      const html = await res.text();
      assert.match(html, /Wrong username or password\./);
      bodies.push(html.replace(/ (value|nonce)="[^"]*"/g, ''));
    }
    assert.equal(bodies[0], bodies[1]);
    assert.equal(bodies[1], bodies[2]);
  });

  test('redirect targets stay on this site', async () => {
    const hostile = [
      '//evil.example',
      '/\\evil.example',
      '/%09/evil.example',
      'https://evil.example',
      'javascript:alert(1)',
      '/.//evil.example',
      '/\t/evil.example',
    ];
    for (const next of hostile) {
      const b = new Browser(s.url);
      const res = await b.login('alice', 'alice password 1', next);
      assert.equal(res.status, 303, next);
      const location = new URL(res.headers.get('location')!);
      assert.equal(location.origin, s.url, `${next} -> ${location}`);
    }
    const page = await new Browser(s.url).request(`/login?next=${encodeURIComponent('//evil.example/x')}`);
    assert.doesNotMatch(await page.text(), /evil\.example/);
  });

  test('throttling: 5 failures per account in 15 minutes -> 429 with Retry-After, even with the right password', async () => {
    const b = new Browser(s.url);
    for (let i = 0; i < 5; i++) assert.equal((await b.login('user0', 'wrong')).status, 401);
    const locked = await b.login('user0', 'right password');
    assert.equal(locked.status, 429);
    const retry = Number(locked.headers.get('retry-after'));
    assert.ok(retry > 0 && retry <= 900, `Retry-After ${retry}`);
    assert.equal(locked.headers.get('set-cookie'), null);
    // Other accounts from the same address are not locked out by one user.
    assert.equal((await b.login('user1', 'right password')).status, 303);
  });

  test('a successful login resets the account count', async () => {
    const b = new Browser(s.url);
    for (let i = 0; i < 4; i++) await b.login('user2', 'wrong');
    assert.equal((await b.login('user2', 'right password')).status, 303);
    for (let i = 0; i < 4; i++) assert.equal((await b.login('user2', 'wrong')).status, 401);
    assert.equal((await b.login('user2', 'right password')).status, 303);
  });

  test('throttle state is in the database (holds across restarts)', async () => {
    const rows = await s.database.db.select({ n: count() }).from(loginFailures).get();
    assert.ok(rows!.n >= 5);
  });

  test('POST /login from another origin, or with no Origin or Referer: 403, no session', async () => {
    const before = await sessionCount();
    const b = new Browser(s.url);
    assert.equal(
      (await b.request('/login', { form: { username: 'alice', password: 'alice password 1' }, origin: 'https://evil.example' })).status,
      403,
    );
    assert.equal((await b.request('/login', { form: { username: 'alice', password: 'alice password 1' }, origin: null })).status, 403);
    const viaReferer = await b.request('/login', {
      form: { username: 'alice', password: 'alice password 1' },
      origin: null,
      headers: { referer: `${s.url}/login` },
    });
    assert.equal(viaReferer.status, 303);
    assert.equal(await sessionCount(), before + 1);
  });

  test('bad bodies: not a form, empty fields, oversized', async () => {
    const b = new Browser(s.url);
    assert.equal((await b.request('/login', { body: 'username=alice', headers: { 'content-type': 'text/plain' } })).status, 400);
    assert.equal((await b.login('', '')).status, 400);
    const huge = await b.request('/login', { form: { username: 'alice', password: 'x'.repeat(20_000) } });
    assert.equal(huge.status, 413);
    assert.equal((await huge.json()).error, 'payload_too_large');
  });

  test('logout ends the session server-side: the old cookie replayed is refused', async () => {
    const b = new Browser(s.url);
    await b.login('alice', 'alice password 1');
    const cookie = b.cookies.get('svc_session')!;
    const out = await b.request('/logout', { method: 'POST' });
    assert.equal(out.status, 303);
    assert.equal(out.headers.get('location'), '/login');
    const replay = await fetch(`${s.url}/`, { headers: { cookie: `svc_session=${cookie}` }, redirect: 'manual' });
    assert.equal(replay.status, 303);
    assert.match(replay.headers.get('location')!, /^\/login\?next=%2F/);
    const api = await fetch(`${s.url}/auth/tokens`, { headers: { cookie: `svc_session=${cookie}` } });
    assert.equal(api.status, 401);
  });

  test('cross-site logout is refused', async () => {
    const b = new Browser(s.url);
    await b.login('alice', 'alice password 1');
    assert.equal((await b.request('/logout', { method: 'POST', origin: 'https://evil.example' })).status, 403);
    assert.equal((await b.request('/')).status, 200, 'still signed in');
  });

  test('a forged or tampered cookie is anonymous', async () => {
    const b = new Browser(s.url);
    await b.login('alice', 'alice password 1');
    const [id, mac] = b.cookies.get('svc_session')!.split('.');
    for (const value of [`${id}.${mac!.slice(0, -2)}AA`, `${'a'.repeat(32)}.${mac}`, 'garbage']) {
      const res = await fetch(`${s.url}/auth/tokens`, { headers: { cookie: `svc_session=${value}` } });
      assert.equal(res.status, 401, value);
    }
  });

  test('a stored hash with old parameters is replaced at login', async () => {
    const { hash } = await import('@node-rs/argon2');
    const old = await hash('rehash me please', { memoryCost: 8192, timeCost: 1, parallelism: 1, algorithm: 2 });
    await s.addUser({ uid: 'legacy', email: 'legacy@example.com' });
    await s.database.write((tx) => updateUser(tx, 'legacy', { passwordHash: old }));
    assert.equal((await new Browser(s.url).login('legacy', 'rehash me please')).status, 303);
    const { passwordHashOf } = await import('../src/store/users.ts');
    const stored = (await passwordHashOf(s.database.db, 'legacy'))!.hash!;
    assert.match(stored, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
  });

  test('anonymous browsers get 303 to /login with next; anonymous API callers 401', async () => {
    const page = await fetch(`${s.url}/?a=b`, { redirect: 'manual', headers: { accept: 'text/html' } });
    assert.equal(page.status, 303);
    assert.equal(page.headers.get('location'), '/login?next=%2F%3Fa%3Db');
    const api = await fetch(`${s.url}/auth/tokens`);
    assert.equal(api.status, 401);
    assert.equal(api.headers.get('www-authenticate'), 'Bearer realm="svc"');
    assert.deepEqual(Object.keys(await api.json()).sort(), ['error', 'message']);
  });

  test('sessions survive a restart with the same secret, and not with another', async () => {
    const b = new Browser(s.url);
    await b.login('alice', 'alice password 1');
    await s.restart();
    assert.equal((await b.request('/')).status, 200);
    await s.restart({ SVC_SESSION_SECRET: newSecret() });
    assert.equal((await b.request('/')).status, 303);
  });
});
