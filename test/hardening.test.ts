// The weaknesses an adversarial review found, each tried the way an attacker would.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { count, eq, sql } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer, rawRequest } from './helpers/http.ts';
import { audit, loginFailures, sessions } from '../src/db/schema.ts';
import { openDatabase } from '../src/db/open.ts';
import { safeDatabaseMessage } from '../src/db/errors.ts';
import { createUser, findUser } from '../src/store/users.ts';
import { hashPassword } from '../src/auth/passwords.ts';
import { clientAddress, addressMatcher, limitAddress } from '../src/domain/addresses.ts';
import { ROOT } from './helpers/workspace.ts';
import { holdWriteLock } from './helpers/installation.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const json = (body: unknown) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('uids are unique and reserved regardless of letter case', () => {
  let s: TestServer;
  let admin: string;
  before(async () => {
    s = await startTestServer();
    admin = await s.tokenFor(await s.addUser({ uid: 'root', email: 'root@example.com', admin: true }), undefined, 'admin');
    await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
  });
  after(() => s.stop());
  const create = (uid: string) =>
    fetch(`${s.url}/admin/api/users`, {
      ...json({ uid, email: `${uid}@example.com` }),
      headers: { ...bearer(admin), 'content-type': 'application/json' },
    });

  test('Alice cannot join alice, and a removed tp7 cannot come back as TP7', async () => {
    assert.equal((await create('Alice')).status, 409);
    assert.equal((await create('ALICE')).status, 409);
    assert.equal((await create('tp7')).status, 201);
    assert.equal((await fetch(`${s.url}/admin/api/users/tp7`, { method: 'DELETE', headers: bearer(admin) })).status, 204);
    assert.equal((await create('TP7')).status, 409);
    assert.equal((await create('Tp7')).status, 409);
    const cli = await s.ws.svc(['user', 'add', 'aLiCe', '--email', 'x@example.com']);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /taken or was used before/);
    const uids = ((await (await fetch(`${s.url}/admin/api/users`, { headers: bearer(admin) })).json()) as { uid: string }[]).map(
      (u) => u.uid,
    );
    assert.deepEqual(uids.sort(), ['alice', 'root']);
  });

  test('the spelling is kept, and a user is found in any case (sign-in, API)', async () => {
    assert.equal((await create('MixedCase')).status, 201);
    assert.equal(
      ((await (await fetch(`${s.url}/admin/api/users/mixedcase`, { headers: bearer(admin) })).json()) as { uid: string }).uid,
      'MixedCase',
    );
    assert.equal((await new Browser(s.url).login('ALICE', 'alice password 1')).status, 303);
  });

  test('the migration keeps existing case-duplicates as they are, each found by its exact spelling, and allows no new one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-case-'));
    const path = join(dir, 'old.db');
    try {
      // A database as svc left it before migration 0004, with two users differing only by case.
      const { default: Sqlite } = await import('better-sqlite3');
      const old = new Sqlite(path);
      old.exec('CREATE TABLE __drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)');
      const journal = JSON.parse(readFileSync(join(ROOT, 'drizzle/meta/_journal.json'), 'utf8')) as {
        entries: { tag: string; when: number }[];
      };
      for (const { tag, when } of journal.entries.filter((e) => e.tag < '0004')) {
        const text = readFileSync(join(ROOT, 'drizzle', `${tag}.sql`), 'utf8');
        for (const statement of text.split('--> statement-breakpoint')) old.exec(statement);
        old
          .prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)')
          .run(createHash('sha256').update(text).digest('hex'), when);
      }
      old.exec(
        "INSERT INTO users (uid, email, created_at, updated_at) VALUES ('Bob', 'b1@example.com', 1, 1), ('bob', 'b2@example.com', 1, 1)",
      );
      old.close();
      const database = await openDatabase(`file:${path}`, null);
      try {
        assert.equal((await database.migrate())[0], '0004_uid_case_and_server_keys', 'the migrations from 0004 on are applied');
        assert.equal((await findUser(database.db, 'Bob'))?.email, 'b1@example.com');
        assert.equal((await findUser(database.db, 'bob'))?.email, 'b2@example.com');
        assert.equal(await findUser(database.db, 'BOB'), null, 'ambiguous in other spellings');
        await assert.rejects(
          database.write((tx) => createUser(tx, { uid: 'BOB', email: 'b3@example.com' })),
          /taken or was used before/,
        );
      } finally {
        database.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a password change or removal ends the user's other sessions (tokens stay)", () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.stop());

  test("changed by an admin: all the user's sessions end; changed by the user on their own page: theirs stays", async () => {
    await s.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', admin: true });
    const carol = await s.addUser({ uid: 'carol', email: 'carol@example.com', password: 'carol password 1', admin: true });
    const carolToken = await s.tokenFor(carol, undefined, 'api');
    const [c1, c2, boss] = [new Browser(s.url), new Browser(s.url), new Browser(s.url)];
    for (const b of [c1, c2]) assert.equal((await b.login('carol', 'carol password 1')).status, 303);
    assert.equal((await boss.login('boss', 'boss password 1')).status, 303);

    assert.equal((await boss.request('/admin/api/users/carol', { method: 'PATCH', json: { password: 'carol password 2' } })).status, 200);
    assert.equal((await c1.request('/')).status, 303, 'signed out');
    assert.equal((await c2.request('/')).status, 303, 'signed out');
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(carolToken) })).status, 200, 'tokens stay');
    assert.equal((await boss.request('/')).status, 200, 'the admin stays signed in');

    for (const b of [c1, c2]) assert.equal((await b.login('carol', 'carol password 2')).status, 303);
    // carol changes her own password from her page: that browser stays signed in, the other one does not.
    const own = await c1.request('/admin/users/carol', {
      form: { email: 'carol@example.com', name: '', labels: '', admin: 'on', password: 'carol password 3' },
    });
    assert.equal(own.status, 303);
    assert.equal((await c1.request('/')).status, 200);
    assert.equal((await c2.request('/')).status, 303);
    // Removing the password ends the rest.
    assert.equal((await boss.request('/admin/api/users/carol', { method: 'PATCH', json: { password: null } })).status, 200);
    assert.equal((await c1.request('/')).status, 303);
    const left = await s.database.db.select({ n: count() }).from(sessions).where(eq(sessions.userId, carol.id)).get();
    assert.equal(left!.n, 0);
  });

  test('the CLI ends them too', async () => {
    await s.addUser({ uid: 'dave', email: 'dave@example.com', password: 'dave password 1' });
    const d = new Browser(s.url);
    assert.equal((await d.login('dave', 'dave password 1')).status, 303);
    const r = await s.ws.svc(['user', 'set', 'dave', '--password-stdin'], { stdin: 'dave password 2\n' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await d.request('/')).status, 303);
  });
});

describe('login throttling under a burst', () => {
  test('30 parallel wrong passwords for one account: at most 5 are checked, the rest get 429', async () => {
    const s = await startTestServer();
    try {
      await s.addUser({ uid: 'target', email: 'target@example.com', password: 'the right password' });
      const answers = await Promise.all(Array.from({ length: 30 }, () => new Browser(s.url).login('target', 'a wrong guess')));
      const statuses = answers.map((a) => a.status);
      assert.equal(statuses.filter((x) => x === 401).length, 5, statuses.join(','));
      assert.equal(statuses.filter((x) => x === 429).length, 25);
      const failures = await s.database.db.select({ n: count() }).from(audit).where(eq(audit.action, 'login.failure')).get();
      assert.equal(failures!.n, 5, 'five passwords were checked');
      assert.equal((await new Browser(s.url).login('target', 'the right password')).status, 429);
    } finally {
      await s.stop();
    }
  });

  test('fifty failures from addresses of one IPv6 /64 lock the whole /64, not another one', async () => {
    const s = await startTestServer({ serverExtra: 'trusted_proxies = 127.0.0.1\n' });
    try {
      await s.addUser({ uid: 'victim', email: 'victim@example.com', password: 'the right password' });
      const from = (address: string, username: string, password: string) =>
        new Browser(s.url).request('/login', { form: { username, password }, headers: { 'x-forwarded-for': address } });
      // Each guess from another address of the /64, at another account, so only the address limit (50) can hold.
      for (let n = 1; n <= 50; n++) assert.equal((await from(`2001:db8:0:7::${n.toString(16)}`, `nobody${n}`, 'guess')).status, 401);
      assert.equal((await from('2001:db8:0:7:ffff::1', 'victim', 'the right password')).status, 429, 'the /64 is locked');
      assert.equal((await from('2001:db8:0:8::1', 'victim', 'the right password')).status, 303, 'another /64 signs in');
    } finally {
      await s.stop();
    }
  });

  test('a successful sign-in does not count against the address', async () => {
    const s = await startTestServer();
    try {
      await s.addUser({ uid: 'busy', email: 'busy@example.com', password: 'the right password' });
      for (let i = 0; i < 60; i++) assert.equal((await new Browser(s.url).login('busy', 'the right password')).status, 303);
      const rows = await s.database.db.select({ n: count() }).from(loginFailures).get();
      assert.equal(rows!.n, 0);
    } finally {
      await s.stop();
    }
  });
});

describe('the client address behind trusted proxies', () => {
  test("the right-most X-Forwarded-For entry that is not a trusted proxy; other peers' headers are ignored", () => {
    const trusted = addressMatcher(['10.0.0.0/8', '127.0.0.1']);
    assert.equal(clientAddress('127.0.0.1', '203.0.113.9', trusted), '203.0.113.9');
    assert.equal(
      clientAddress('127.0.0.1', '6.6.6.6, 203.0.113.9, 10.1.2.3', trusted),
      '203.0.113.9',
      'the client cannot choose its address',
    );
    assert.equal(clientAddress('::ffff:10.0.0.7', '203.0.113.9', trusted), '203.0.113.9');
    assert.equal(clientAddress('198.51.100.4', '203.0.113.9', trusted), '198.51.100.4', "an untrusted peer's header is ignored");
    assert.equal(clientAddress('127.0.0.1', null, trusted), '127.0.0.1');
    assert.equal(clientAddress('127.0.0.1', 'unknown, 10.0.0.1', trusted), '10.0.0.1', 'garbage stops at the proxy that added it');
    assert.equal(clientAddress('127.0.0.1', '10.0.0.1, 10.0.0.2', trusted), '10.0.0.1');
  });
});

describe('per-address limits count an IPv6 client by its /64', () => {
  test('IPv4 as it is; every spelling of an IPv6 address of one /64 the same, another /64 apart', () => {
    assert.equal(limitAddress('203.0.113.9'), '203.0.113.9');
    for (const mapped of ['::ffff:203.0.113.9', '::FFFF:203.0.113.9', '::ffff:cb00:7109', '0:0:0:0:0:ffff:203.0.113.9'])
      assert.equal(limitAddress(mapped), '203.0.113.9', `an IPv4-mapped peer is its IPv4 address: ${mapped}`);
    const one = limitAddress('2001:db8:0:7::1');
    assert.equal(one, '2001:db8:0:7::/64');
    for (const same of [
      '2001:db8:0:7:ffff:ffff:ffff:ffff',
      '2001:0DB8:0000:0007:0:0:0:2',
      '2001:db8:0:7:1:2:3.4.5.6',
      '2001:db8:0:7::9%eth0',
    ])
      assert.equal(limitAddress(same), one, same);
    for (const other of ['2001:db8:0:8::1', '2001:db8::7:0:0:1', '2001:db9:0:7::1']) assert.notEqual(limitAddress(other), one, other);
  });
});

describe('refused proxy requests cannot flood the audit trail', () => {
  test('300 forged requests: 300 refusals and log lines, one audit row with a count of 300', async () => {
    const lines: string[] = [];
    const log = { info() {}, warn: (event: string) => void lines.push(event), error() {} };
    const s = await startTestServer({
      auth: `token\n    enabled true\nheader\n    enabled true\n    user_header X-User\n    email_header X-Email\n    secret_header X-Secret\n    shared_secret_env SVC_PROXY_SECRET\n    trusted_proxy 127.0.0.1\n`,
      env: { SVC_PROXY_SECRET: 'proxy-shared-secret-0123456789abcdef' },
      // 300 connections at once from one address: more than its default share of connections, which is not what
      // this test is about.
      serverExtra: 'max_connections_per_address = 300\n',
      log,
    });
    try {
      const statuses = await Promise.all(
        Array.from({ length: 300 }, () =>
          rawRequest(`${s.url}/`, ['GET / HTTP/1.1', 'X-User: admin', 'X-Email: admin@example.com'], { localAddress: '127.0.0.2' }),
        ),
      );
      assert.ok(statuses.every((r) => r.status === 403));
      assert.equal(lines.filter((l) => l === 'header_rejected').length, 300);
      const rows = () => s.database.db.select().from(audit).where(eq(audit.action, 'header.rejected')).all();
      assert.equal((await rows()).length, 1, 'one row for this peer and reason this minute');
      // The rest is counted in memory and added before the minute ends, or at shutdown.
      await s.restart();
      const [row, ...more] = await rows();
      assert.equal(more.length, 0);
      assert.deepEqual(JSON.parse(row!.detail!), { reason: 'untrusted peer', count: 300 });
      assert.equal(row!.peer, '127.0.0.2');
    } finally {
      await s.stop();
    }
  });
});

describe('/mcp checks Origin (DNS rebinding)', () => {
  test("another origin is 403; base_url's origin, allowed_origins and no Origin at all are served", async () => {
    const s = await startTestServer({ serverExtra: 'allowed_origins = https://agent.example.com\n' });
    try {
      const token = await s.tokenFor(await s.addUser({ uid: 'u', email: 'u@example.com' }));
      const call = (origin?: string) =>
        fetch(`${s.url}/mcp`, {
          method: 'POST',
          headers: {
            ...bearer(token),
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...(origin ? { origin } : {}),
          },
          body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}',
        });
      for (const evil of ['http://evil.example', 'http://127.0.0.1.evil.example', 'null', `${s.url}.evil.example`]) {
        const r = await call(evil);
        assert.equal(r.status, 403, evil);
        assert.doesNotMatch(await r.text(), /"uid"/);
      }
      for (const good of [undefined, s.url, 'https://agent.example.com']) assert.equal((await call(good)).status, 200, String(good));
    } finally {
      await s.stop();
    }
  });
});

describe('cookies over https', () => {
  test('the session cookie is __Host- prefixed, Secure, Path=/, without Domain', async () => {
    const s = await startTestServer({ baseUrl: 'https://svc.example.com' });
    try {
      await s.addUser({ uid: 'h', email: 'h@example.com', password: 'h password 12' });
      const res = await fetch(`${s.url}/login`, {
        method: 'POST',
        headers: { origin: 'https://svc.example.com', 'content-type': 'application/x-www-form-urlencoded' },
        body: 'username=h&password=h+password+12',
        redirect: 'manual',
      });
      assert.equal(res.status, 303);
      const cookie = res.headers.getSetCookie().find((c) => c.startsWith('__Host-svc_session='));
      assert.ok(cookie, res.headers.getSetCookie().join(' | '));
      assert.match(cookie, /; Secure/i);
      assert.match(cookie, /; Path=\//i);
      assert.doesNotMatch(cookie, /Domain=/i);
      const value = cookie.split(';')[0]!.split('=').slice(1).join('=');
      assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: { cookie: `__Host-svc_session=${value}` } })).status, 200);
      assert.equal(
        (await fetch(`${s.url}/auth/tokens`, { headers: { cookie: `svc_session=${value}` } })).status,
        401,
        'the unprefixed name is not read',
      );
    } finally {
      await s.stop();
    }
  });
});

describe('connection limits', () => {
  test('a client sending one header byte at a time is cut off, and others are served meanwhile', async () => {
    const s = await startTestServer({ serverOptions: { limits: { headersTimeoutMs: 1000, checkEveryMs: 200 } } });
    try {
      const header = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(100)}`;
      let i = 0;
      let isCut = false;
      const cut = new Promise<void>((resolve) => {
        const socket = connect(s.ws.port, '127.0.0.1');
        const drip = setInterval(() => {
          if (i < header.length && !socket.destroyed) socket.write(header[i++]!);
        }, 150);
        socket.on('error', () => undefined);
        socket.on('close', () => {
          clearInterval(drip);
          isCut = true;
          resolve();
        });
      });
      // The drip takes over 20 s; Node's default header timeout (60 s) would let it finish and be answered.
      let served = 0;
      await untilTrue(
        async () => {
          if ((await fetch(`${s.url}/healthz`)).status === 200) served++;
          return isCut;
        },
        'the slow client to be cut off',
        60_000,
      );
      await cut;
      assert.ok(served > 5, `others were served meanwhile (${served})`);
      assert.ok(
        i > 1 && i < header.length,
        `cut after ${i} of ${header.length} header bytes: by the header timeout, not at once and not after the header was complete`,
      );
    } finally {
      await s.stop();
    }
  });
});

/** A raw socket from a given loopback address; `closed` settles when the server (or anyone) ends it. */
function slowClient(
  port: number,
  localAddress: string,
  send: string,
): { closed: Promise<void>; written: Promise<void>; isOpen(): boolean; socket: Socket } {
  let wrote: () => void = () => undefined;
  const written = new Promise<void>((resolve) => (wrote = resolve));
  const socket = connect({ port, host: '127.0.0.1', localAddress }, () => socket.write(send, () => wrote()));
  socket.on('error', () => undefined);
  socket.on('data', () => undefined);
  let open = true;
  const closed = new Promise<void>((resolve) =>
    socket.on('close', () => {
      open = false;
      resolve();
    }),
  );
  return { closed, written, isOpen: () => open, socket };
}

async function untilTrue(check: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
    await sleep(25);
  }
}

describe('one client address cannot take every connection', () => {
  const stalledLogin = (port: number, extra = '') =>
    `POST /login HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: http://127.0.0.1:${port}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n${extra}\r\nu`;

  test('300 stalled POST /login bodies from 127.0.0.2: it keeps its share only, 127.0.0.3 and .4 are served, and the stalled ones are cut', async () => {
    const s = await startTestServer({
      serverExtra: 'max_connections = 250\nmax_connections_per_address = 25\nheader_timeout = 5s\nbody_idle_timeout = 5s\n',
      serverOptions: { limits: { checkEveryMs: 200 } },
    });
    const attack: ReturnType<typeof slowClient>[] = [];
    try {
      await s.addUser({ uid: 'pat', email: 'pat@example.com', password: 'pat password 1' });
      for (let i = 0; i < 300; i++) attack.push(slowClient(s.ws.port, '127.0.0.2', stalledLogin(s.ws.port)));
      // Past its share, the address's connections are closed as they are accepted.
      await untilTrue(() => attack.filter((a) => a.isOpen()).length <= 25, "at most 25 of 127.0.0.2's connections stay");
      const held = attack.filter((a) => a.isOpen()).length;
      assert.ok(held > 0, 'the address keeps its share while it stalls');

      const health = await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.3' });
      assert.equal(health.status, 200);
      const body = new URLSearchParams({ username: 'pat', password: 'pat password 1' }).toString();
      const login = await rawRequest(
        s.url,
        ['POST /login HTTP/1.1', `Origin: ${s.url}`, 'Content-Type: application/x-www-form-urlencoded'],
        { localAddress: '127.0.0.4', body },
      );
      assert.equal(login.status, 303, 'another client signs in meanwhile');
      assert.ok(
        attack.some((a) => a.isOpen()),
        'and that was while the stalled connections were held',
      );

      // Node alone would wait 60 s (its request timeout) for each stalled body; the body deadline cuts them.
      await untilTrue(() => attack.every((a) => !a.isOpen()), 'every stalled connection is cut, long before 60 s', 30_000);
      // The share is free again: the same address is served once its stalled connections are gone.
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.2' })).status, 200);
    } finally {
      for (const a of attack) a.socket.destroy();
      await s.stop();
    }
  });

  test('a connection that sends nothing, or stalls in its headers, is cut at header_timeout', async () => {
    const s = await startTestServer({ serverExtra: 'header_timeout = 1s\n', serverOptions: { limits: { checkEveryMs: 200 } } });
    try {
      const silent = slowClient(s.ws.port, '127.0.0.5', '');
      const partial = slowClient(s.ws.port, '127.0.0.5', 'GET /healthz HTTP/1.1\r\nHost: x\r\n');
      await untilTrue(() => !silent.isOpen() && !partial.isOpen(), 'both are cut, long before the 10 s default', 8_000);
    } finally {
      await s.stop();
    }
  });

  test('1,000 slow connections from ten addresses (each within its share) leave /healthz answering', async () => {
    // The defaults: max_connections 1,000, 100 for one address, headers within 10 s.
    const s = await startTestServer();
    const attack: ReturnType<typeof slowClient>[] = [];
    try {
      for (let a = 0; a < 10; a++)
        for (let i = 0; i < 100; i++) attack.push(slowClient(s.ws.port, `127.0.1.${a + 1}`, 'GET /healthz HTTP/1.1\r\nHost: x\r\n'));
      await Promise.all(attack.map((a) => Promise.race([a.written, a.closed])));
      // Well before their 10 s header deadline: the waiting ones beyond half of the slots were cut as others came.
      await untilTrue(() => attack.filter((a) => a.isOpen()).length <= 500, 'at most half of the slots wait for a request', 3000);
      for (let i = 0; i < 5; i++) {
        const health = await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.3' });
        assert.equal(health.status, 200, `served while the slow connections are held (${i})`);
      }
      const held = attack.filter((a) => a.isOpen()).length;
      assert.ok(held >= 400, `the slow ones keep half of the slots until their header deadline (${held} held)`);
    } finally {
      for (const a of attack) a.socket.destroy();
      await s.stop();
    }
  });

  test('a request being answered is not waiting: slow connections arriving meanwhile never cut it', async () => {
    // Two may wait (half of four). The GET takes a second to answer (/readyz waits for a write lock held elsewhere).
    const s = await startTestServer({ serverExtra: 'max_connections = 4\nmax_connections_per_address = 4\n' });
    const bare: ReturnType<typeof slowClient>[] = [];
    const lock = await holdWriteLock(s.ws.dbUrl.slice('file:'.length));
    try {
      const answered = rawRequest(s.url, ['GET /readyz HTTP/1.1'], { localAddress: '127.0.0.2' });
      await sleep(300);
      for (const address of ['127.0.0.3', '127.0.0.4']) bare.push(slowClient(s.ws.port, address, ''));
      await Promise.all(bare.map((b) => Promise.race([b.written, b.closed])));
      assert.equal((await answered).status, 503, 'answered (the database is locked), not cut');
      assert.ok(
        bare.every((b) => b.isOpen()),
        'two waiting connections are within the ceiling',
      );
    } finally {
      await lock.release();
      for (const b of bare) b.socket.destroy();
      await s.stop();
    }
  });

  test('idle kept-alive connections count as waiting: they cannot hold every slot beside silent ones', async () => {
    // At most 20 connections, 10 of them waiting, 10 for one address.
    const s = await startTestServer({ serverExtra: 'max_connections = 20\nmax_connections_per_address = 10\n' });
    const attack: ReturnType<typeof slowClient>[] = [];
    try {
      // Ten ask for /healthz once and stay open between requests; ten more say nothing.
      for (let i = 0; i < 10; i++) attack.push(slowClient(s.ws.port, `127.0.1.${1 + (i % 2)}`, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
      await Promise.all(attack.map((a) => Promise.race([a.written, a.closed])));
      await sleep(300);
      for (let i = 0; i < 10; i++) attack.push(slowClient(s.ws.port, `127.0.1.${3 + (i % 2)}`, ''));
      await Promise.all(attack.map((a) => Promise.race([a.written, a.closed])));
      await untilTrue(() => attack.filter((a) => a.isOpen()).length <= 10, 'the attack keeps at most the waiting half', 3000);
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.2' })).status, 200);
    } finally {
      for (const a of attack) a.socket.destroy();
      await s.stop();
    }
  });

  test('1,000 stalled requests forwarded for addresses of one IPv6 /64 hold one share, and /healthz answers', async () => {
    const s = await startTestServer({ serverExtra: 'trusted_proxies = 127.0.0.9\n' });
    const attack: ReturnType<typeof slowClient>[] = [];
    const forwarded = (n: number) => `X-Forwarded-For: 2001:db8:0:7::${n.toString(16)}\r\n`;
    try {
      for (let n = 1; n <= 1000; n++) attack.push(slowClient(s.ws.port, '127.0.0.9', stalledLogin(s.ws.port, forwarded(n))));
      await Promise.all(attack.map((a) => Promise.race([a.written, a.closed])));
      // Past its share (100), the /64's requests are answered 429 and their connections closed.
      await untilTrue(() => attack.filter((a) => a.isOpen()).length <= 100, "at most the /64's share of 100 stays");
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.3' })).status, 200);
      const sameNet = await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 2001:db8:0:7:abcd::1'], {
        localAddress: '127.0.0.9',
      });
      assert.equal(sameNet.status, 429, 'another address of the same /64 is over the share');
      const otherNet = await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 2001:db8:0:8::1'], {
        localAddress: '127.0.0.9',
      });
      assert.equal(otherNet.status, 200, 'another /64 is served');
      assert.ok(
        attack.some((a) => a.isOpen()),
        'while the share is held',
      );
    } finally {
      for (const a of attack) a.socket.destroy();
      await s.stop();
    }
  });

  test("behind a trusted proxy the share is the forwarded client's, never the proxy's own", async () => {
    const s = await startTestServer({
      serverExtra: 'trusted_proxies = 127.0.0.9\nmax_connections_per_address = 3\nbody_idle_timeout = 5s\n',
      serverOptions: { limits: { checkEveryMs: 200 } },
    });
    const held: ReturnType<typeof slowClient>[] = [];
    try {
      // Three stalled requests forwarded for 203.0.113.7 hold its share (the proxy itself opens more than three).
      for (let i = 0; i < 3; i++)
        held.push(slowClient(s.ws.port, '127.0.0.9', stalledLogin(s.ws.port, 'X-Forwarded-For: 203.0.113.7\r\n')));
      await Promise.all(held.map((h) => h.written));
      // A request of the proxy's own, answered after the stalled ones were sent, so they are in before the probes.
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.9' })).status, 200);
      await untilTrue(
        async () =>
          (await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.7'], { localAddress: '127.0.0.9' })).status ===
          429,
        'its fourth request is refused',
      );
      const refused = await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.7'], { localAddress: '127.0.0.9' });
      assert.equal(refused.status, 429);
      assert.equal(JSON.parse(refused.body).error, 'too_many_requests');
      // Other clients of the same proxy, and the proxy's own requests, are served.
      assert.equal(
        (await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.8'], { localAddress: '127.0.0.9' })).status,
        200,
      );
      assert.equal((await rawRequest(s.url, ['GET /healthz HTTP/1.1'], { localAddress: '127.0.0.9' })).status, 200);
      // A forged X-Forwarded-For from an untrusted peer counts against that peer, not the address it names.
      assert.equal(
        (await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.7'], { localAddress: '127.0.0.6' })).status,
        200,
      );
      await untilTrue(() => held.every((h) => !h.isOpen()), 'the stalled forwarded requests are cut', 30_000);
      await untilTrue(
        async () =>
          (await rawRequest(s.url, ['GET /healthz HTTP/1.1', 'X-Forwarded-For: 203.0.113.7'], { localAddress: '127.0.0.9' })).status ===
          200,
        'its share is free again',
      );
    } finally {
      for (const h of held) h.socket.destroy();
      await s.stop();
    }
  });
});

describe('database errors never carry the values they were given', () => {
  test("on the @libsql/client driver, a failed statement's message holds its parameters; what svc prints does not", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-params-'));
    const database = await openDatabase(`file:${join(dir, 'p.db')}`, null, { forceClient: true });
    try {
      await database.migrate();
      const hash = await hashPassword('a secret password');
      const user = await database.write((tx) => createUser(tx, { uid: 'p', email: 'p@example.com', passwordHash: hash }));
      let failure: unknown;
      try {
        // A second user with the same uid and the hash as a parameter: the insert fails.
        await database.write(async (tx) => {
          await tx.run(
            sql`INSERT INTO users (id, uid, email, password_hash, created_at, updated_at) VALUES (${user.id}, 'p', 'q@example.com', ${hash}, 1, 1)`,
          );
        });
      } catch (e) {
        failure = e;
      }
      const everything =
        JSON.stringify(failure, Object.getOwnPropertyNames(failure)) +
        String((failure as Error).message) +
        String((failure as { cause?: Error }).cause?.message);
      assert.ok(everything.includes(hash.slice(-20)), "the driver's own error does carry the hash (so this test can fail)");
      const shown = safeDatabaseMessage(failure);
      assert.ok(!shown.includes('argon2') && !shown.includes(hash.slice(-20)), shown);
      assert.match(shown, /SQLITE_CONSTRAINT/);
    } finally {
      database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('svc audit list cannot be forged through what anonymous callers write', () => {
  test('a login name with newlines, tabs, a fake entry and ANSI escapes prints as one line, its controls escaped', async () => {
    const s = await startTestServer();
    try {
      const forged = 'x\r\x1b[2K\x1b[31m\u009b\u2028\n2026-11-20T10:00:00Z\troot (cli)\tuser.remove\tbob\t-';
      assert.ok(forged.length <= 64, 'the audit keeps 64 characters of a login name');
      assert.equal((await new Browser(s.url).login(forged, 'wrong password 1')).status, 401);
      const listed = await s.ws.svc(['audit', 'list']);
      assert.equal(listed.code, 0, listed.stderr);
      const lines = listed.stdout.split('\n').filter((l) => l !== '');
      assert.equal(lines.length, 1, listed.stdout);
      assert.equal(lines[0]!.split('\t').length, 6, 'six fields, none added by the name');
      assert.doesNotMatch(
        listed.stdout.slice(0, -1),
        /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028]/,
        'no control character but the field tabs and the line end',
      );
      assert.ok(
        lines[0]!.includes('\tx\\r\\x1b[2K\\x1b[31m\\x9b\\u2028\\n2026-11-20T10:00:00Z\\troot (cli)\\tuser.remove\\tbob\\t-\t'),
        lines[0],
      );
      const json = JSON.parse((await s.ws.svc(['audit', 'list', '--json'])).stdout) as { target: string }[];
      assert.equal(json[0]!.target, forged, 'the JSON export keeps the value exactly');
    } finally {
      await s.stop();
    }
  });
});
