import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { count, eq, sql } from 'drizzle-orm';
import { writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer, type TestServerOptions } from './helpers/server.ts';
import { startNginx, type Nginx, type NginxOptions } from './helpers/nginx.ts';
import { freePort } from './helpers/workspace.ts';
import { rawRequest, bearer } from './helpers/http.ts';
import { users, tokens, audit } from '../src/db/schema.ts';
import { trustedPeers } from '../src/auth/channels/header.ts';
import { getUser, findUser } from '../src/store/users.ts';

const SECRET = 'proxy-shared-secret-0123456789abcdef';
const authConfig = (jit: boolean) => `
token
    enabled true
header
    enabled true
    user_header X-Authenticated-User
    email_header X-Authenticated-Email
    name_header X-Authenticated-Name
    groups_header X-Authenticated-Groups
    secret_header X-Auth-Secret
    shared_secret_env SVC_PROXY_SECRET
    trusted_proxy 127.0.0.1
    jit ${jit}
    default_acl staff
groups
    enabled true
    map
        idp-engineering eng
        idp-finance finance
`;

const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });

describe('address comparison', () => {
  test('IPv4, IPv6 loopback and IPv4-mapped IPv6 peers compare correctly', () => {
    const v4 = trustedPeers(['127.0.0.1']);
    assert.equal(v4('127.0.0.1'), true);
    assert.equal(v4('::ffff:127.0.0.1'), true);
    assert.equal(v4('::FFFF:127.0.0.1'), true);
    assert.equal(v4('127.0.0.2'), false);
    assert.equal(v4('::1'), false);
    assert.equal(v4(''), false);
    assert.equal(v4('not an address'), false);
    const v6 = trustedPeers(['0:0:0:0:0:0:0:1']);
    assert.equal(v6('::1'), true);
    assert.equal(v6('127.0.0.1'), false);
    const mapped = trustedPeers(['::ffff:10.1.2.3']);
    assert.equal(mapped('10.1.2.3'), true);
  });
});

/** svc behind Debian's nginx on loopback, base_url being the proxy's URL. */
async function behindNginx(server: Omit<TestServerOptions, 'baseUrl'>, nginx: Pick<NginxOptions, 'users' | 'groups' | 'names'>) {
  const proxyPort = await freePort();
  const proxyUrl = `http://127.0.0.1:${proxyPort}`;
  const s = await startTestServer({ ...server, baseUrl: proxyUrl });
  const proxy = await startNginx({ ...nginx, port: proxyPort, upstreamPort: s.ws.port, secret: SECRET });
  return { s, proxy, proxyUrl };
}

describe('header channel behind nginx', () => {
  let s: TestServer;
  let proxy: Nginx;
  let proxyUrl: string;
  before(async () => {
    ({ s, proxy, proxyUrl } = await behindNginx(
      { auth: authConfig(true), env: { SVC_PROXY_SECRET: SECRET } },
      {
        users: { carol: 'carol-pw', dave: 'dave-pw', erin: 'erin-pw', frank: 'frank-pw' },
        groups: { carol: 'idp-engineering,idp-unmapped' },
        names: { carol: 'Carol C' },
      },
    ));
  });
  after(async () => {
    await proxy?.stop();
    await s?.stop();
  });

  const userCount = async () => (await s.database.db.select({ n: count() }).from(users).get())!.n;
  const direct = (head: string[], localAddress?: string) =>
    rawRequest(s.url, ['GET /auth/tokens HTTP/1.1', ...head], localAddress ? { localAddress } : {});

  test('a good request through nginx provisions once, with default_acl + mapped groups, and is matched after', async () => {
    const first = await fetch(`${proxyUrl}/auth/tokens`, { headers: basic('carol', 'carol-pw') });
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('set-cookie'), null, 'no session cookie for header requests');
    const carol = await getUser(s.database.db, 'carol');
    assert.deepEqual(carol.labels, ['eng', 'staff']);
    assert.equal(carol.email, 'carol@example.com');
    assert.equal(carol.name, 'Carol C');
    assert.equal(carol.hasPassword, false);
    assert.equal(carol.admin, false);
    const n = await userCount();
    await Promise.all(Array.from({ length: 5 }, () => fetch(`${proxyUrl}/auth/tokens`, { headers: basic('carol', 'carol-pw') })));
    assert.equal(await userCount(), n, 'matched, not provisioned again');
  });

  test('concurrent first requests of a new user create exactly one user', async () => {
    const before = await userCount();
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => fetch(`${proxyUrl}/auth/tokens`, { headers: basic('frank', 'frank-pw') })),
    );
    assert.ok(answers.every((r) => r.status === 200));
    assert.equal(await userCount(), before + 1);
    assert.equal(await findUser(s.database.db, 'frank-2'), null);
  });

  test('/mcp through nginx with no token works as the proxied user', async () => {
    const client = new Client({ name: 'proxy-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${proxyUrl}/mcp`), { requestInit: { headers: basic('carol', 'carol-pw') } }),
    );
    const who = (await client.callTool({ name: 'whoami', arguments: {} })) as unknown as {
      structuredContent: { uid: string; via: string; labels: string[] };
    };
    assert.equal(who.structuredContent.uid, 'carol');
    assert.equal(who.structuredContent.via, 'header');
    assert.deepEqual(who.structuredContent.labels, ['eng', 'staff']);
    await client.close();
  });

  test('forged identity and secret headers sent through nginx are overwritten; without proxy login nothing reaches svc', async () => {
    const before = await userCount();
    const forged = {
      'X-Authenticated-User': 'carol',
      'X-Auth-Secret': 'guess',
      'X-Authenticated-Groups': 'idp-finance',
      X_Authenticated_User: 'root',
    };
    const asDave = await fetch(`${proxyUrl}/mcp`, {
      method: 'POST',
      headers: {
        ...basic('dave', 'dave-pw'),
        ...forged,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
    });
    assert.equal(asDave.status, 200);
    const who = (await asDave.json()).result.structuredContent;
    assert.equal(who.uid, 'dave');
    assert.deepEqual(who.labels, ['staff'], 'forged groups did not reach svc');
    const anonymous = await fetch(`${proxyUrl}/auth/tokens`, { headers: forged });
    assert.equal(anonymous.status, 401, 'nginx itself refuses');
    assert.equal(await userCount(), before + 1, 'only dave was provisioned');
  });

  test('bad secrets, repeated headers and untrusted peers: 403, nothing provisioned', async () => {
    const before = await userCount();
    const who = 'X-Authenticated-User: mallory';
    const email = 'X-Authenticated-Email: mallory@example.com';
    const cases: [string, string[], string?][] = [
      ['no secret', [who, email]],
      ['wrong secret', [who, email, 'X-Auth-Secret: wrong']],
      ['right length, wrong', [who, email, `X-Auth-Secret: ${'x'.repeat(SECRET.length)}`]],
      ['empty secret', [who, email, 'X-Auth-Secret: ']],
      ['secret twice', [who, email, `X-Auth-Secret: ${SECRET}`, `X-Auth-Secret: ${SECRET}`]],
      ['identity twice', [who, 'X-Authenticated-User: carol', email, `X-Auth-Secret: ${SECRET}`]],
      ['untrusted peer with the right secret', [who, email, `X-Auth-Secret: ${SECRET}`], '127.0.0.2'],
      [
        'X-Forwarded-For from an untrusted peer',
        [who, email, `X-Auth-Secret: ${SECRET}`, 'X-Forwarded-For: 127.0.0.1', 'X-Real-IP: 127.0.0.1', 'Forwarded: for=127.0.0.1'],
        '127.0.0.2',
      ],
      ['known user, untrusted peer', ['X-Authenticated-User: carol', email, `X-Auth-Secret: ${SECRET}`], '127.0.0.2'],
    ];
    for (const [what, head, from] of cases) {
      const r = await direct(head, from);
      assert.equal(r.status, 403, what);
      assert.doesNotMatch(r.body, new RegExp(SECRET), `${what}: the secret is not echoed`);
    }
    assert.equal(await userCount(), before);
    assert.equal(await findUser(s.database.db, 'mallory'), null);
  });

  test('underscore and case variants of the header names are not the identity header', async () => {
    const before = await userCount();
    for (const name of ['X_Authenticated_User', 'x_authenticated_user', 'X-Authenticated_User']) {
      const r = await direct([`${name}: mallory`, 'X-Authenticated-Email: m@example.com', `X-Auth-Secret: ${SECRET}`]);
      assert.equal(r.status, 401, name);
    }
    assert.equal(await userCount(), before);
  });

  test('a cross-site form post forwarded by the proxy changes nothing (403); a same-site one works', async () => {
    const carol = await getUser(s.database.db, 'carol');
    const tokenCount = async () => (await s.database.db.select({ n: count() }).from(tokens).where(eq(tokens.userId, carol.id)).get())!.n;
    const before = await tokenCount();
    const form = { ...basic('carol', 'carol-pw'), 'content-type': 'application/x-www-form-urlencoded' };
    const evil = await fetch(`${proxyUrl}/auth/tokens`, {
      method: 'POST',
      headers: { ...form, origin: 'https://evil.example' },
      body: 'name=csrf',
    });
    assert.equal(evil.status, 403);
    const noOrigin = await fetch(`${proxyUrl}/auth/tokens`, { method: 'POST', headers: form, body: 'name=csrf' });
    assert.equal(noOrigin.status, 403);
    assert.equal(await tokenCount(), before);
    const ok = await fetch(`${proxyUrl}/auth/tokens`, { method: 'POST', headers: { ...form, origin: proxyUrl }, body: 'name=from-proxy' });
    assert.equal(ok.status, 201);
    assert.equal(await tokenCount(), before + 1);
  });

  test('users from single sign-on never get a password', async () => {
    const { passwordHashOf } = await import('../src/store/users.ts');
    const { updateUserAs } = await import('../src/admin/actions.ts');
    // The one action that sets passwords (admin API, pages and CLI alike) refuses.
    await assert.rejects(
      updateUserAs(s.database, { uid: 'root', via: 'cli', peer: null }, 'carol', { password: 'a long password' }),
      /signs in with single sign-on/,
    );
    const cli = await s.ws.svc(['user', 'set', 'carol', '--password-stdin'], { stdin: 'a long password\n' });
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /password: this user signs in with single sign-on/);
    // Even a hash written behind svc's back is never offered to the password form.
    await s.database.write(async (tx) => void (await tx.run(sql`UPDATE users SET password_hash = 'x' WHERE uid = 'carol'`)));
    assert.equal((await passwordHashOf(s.database.db, 'carol'))!.hash, null);
    await s.database.write(async (tx) => void (await tx.run(sql`UPDATE users SET password_hash = NULL WHERE uid = 'carol'`)));
  });

  test('a bearer token still works alongside the header channel', async () => {
    const token = await s.tokenFor(await getUser(s.database.db, 'carol'), undefined, 'api');
    const r = await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) });
    assert.equal(r.status, 200);
  });

  test('email and name are refreshed from the headers; groups and labels are not changed after provisioning', async () => {
    const before = await userCount();
    const r = await direct([
      'X-Authenticated-User: carol',
      'X-Authenticated-Email: carol.new@example.com',
      'X-Authenticated-Name: Carol New',
      'X-Authenticated-Groups: idp-finance',
      `X-Auth-Secret: ${SECRET}`,
    ]);
    assert.equal(r.status, 200);
    const carol = await getUser(s.database.db, 'carol');
    assert.equal(carol.email, 'carol.new@example.com');
    assert.equal(carol.name, 'Carol New');
    assert.deepEqual(carol.labels, ['eng', 'staff']);
    assert.equal(await userCount(), before);
  });

  test('jit false: unknown users are refused (403), pre-provisioned users are linked', async () => {
    writeFileSync(
      s.ws.configPath,
      `[server]\nlisten = 127.0.0.1:${s.ws.port}\nbase_url = ${proxyUrl}\ndatabase = ${s.ws.dbUrl}\n[auth]\n${authConfig(false)}`,
    );
    await s.restart();
    const before = await userCount();
    const unknown = await fetch(`${proxyUrl}/auth/tokens`, { headers: basic('erin', 'erin-pw') });
    assert.equal(unknown.status, 403);
    assert.match((await unknown.json()).message, /ask an administrator/);
    assert.equal(await userCount(), before);
    assert.equal(await findUser(s.database.db, 'erin'), null);

    await s.addUser({ uid: 'erin', email: 'erin.old@example.com', labels: 'finance' });
    const linked = await fetch(`${proxyUrl}/auth/tokens`, { headers: basic('erin', 'erin-pw') });
    assert.equal(linked.status, 200);
    const erin = await getUser(s.database.db, 'erin');
    assert.deepEqual(erin.labels, ['finance'], 'the ACL an admin gave stays');
    assert.equal(erin.email, 'erin@example.com', 'email refreshed on login');
    assert.equal(await userCount(), before + 1);
    assert.equal((await fetch(`${proxyUrl}/auth/tokens`, { headers: basic('carol', 'carol-pw') })).status, 200, 'known users still get in');
  });
});

describe('client addresses behind nginx ([server] trusted_proxies)', () => {
  let s: TestServer;
  let proxy: Nginx;
  let proxyUrl: string;
  before(async () => {
    ({ s, proxy, proxyUrl } = await behindNginx({ serverExtra: 'trusted_proxies = 127.0.0.1\n' }, { users: {} }));
  });
  after(async () => {
    await proxy?.stop();
    await s?.stop();
  });

  const login = (via: string, from: string, username: string, extra: string[] = []) => {
    const body = new URLSearchParams({ username, password: 'a wrong password' }).toString();
    return rawRequest(
      `${via}/login`,
      ['POST /login HTTP/1.1', `Origin: ${proxyUrl}`, 'Content-Type: application/x-www-form-urlencoded', ...extra],
      { localAddress: from, body },
    );
  };

  test('50 failures from one client lock only that client out, whatever X-Forwarded-For it sends', async () => {
    for (let i = 0; i < 50; i++) assert.equal((await login(proxyUrl, '127.0.0.2', `nobody${i}`)).status, 401);
    assert.equal((await login(proxyUrl, '127.0.0.2', 'someone-else')).status, 429);
    assert.equal(
      (await login(proxyUrl, '127.0.0.2', 'someone-else', ['X-Forwarded-For: 127.0.0.9'])).status,
      429,
      'a claimed address does not help',
    );
    assert.equal(
      (await login(proxyUrl, '127.0.0.3', 'someone-else')).status,
      401,
      'another client behind the same proxy is not locked out',
    );
    // Straight to svc, not through the proxy: X-Forwarded-For from an untrusted peer is ignored.
    assert.equal((await login(s.url, '127.0.0.4', 'someone-else', ['X-Forwarded-For: 127.0.0.2'])).status, 401);
    const from = await s.database.db
      .select({ peer: audit.peer, n: count() })
      .from(audit)
      .where(eq(audit.action, 'login.failure'))
      .groupBy(audit.peer)
      .all();
    assert.deepEqual(
      Object.fromEntries(from.map((r) => [r.peer, r.n])),
      { '127.0.0.2': 50, '127.0.0.3': 1, '127.0.0.4': 1 },
      'the audit trail names the client, not the proxy',
    );
  });
});
