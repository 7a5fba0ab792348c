// Bearer lookups that arrive together are read together in the next turn of the event loop (db/batched.ts), and
// still after their requests arrived. On the embedded file under 50 connections: a token revoked is refused on the
// very next request, every time. On a real sqld (§5 Durability), where svc also keeps a few Hrana streams open for
// its reads and a batch is one statement: two `svc serve` processes, B under 50 connections, a token revoked
// through A is refused by B on the very next request, every time, while B's lookups are batched (its read
// statements, counted by svc_database_statements_total{kind="read"}, are far fewer than its requests).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { install, serveTogether, sourceRunner, type Installation, type ServeProcess } from './helpers/installation.ts';
import { startSqld, type Sqld } from './helpers/sqld.ts';
import { Browser, bearer } from './helpers/http.ts';
import { loadClient } from './helpers/load.ts';
import { scrape } from './helpers/metrics.ts';
import { sql } from 'drizzle-orm';
import { startTestServer } from './helpers/server.ts';
import { tokenRecord, userRecord } from './helpers/records.ts';
import { readCounter } from './helpers/drivers.ts';
import { openDatabase } from '../src/db/open.ts';
import { checkToken, createToken } from '../src/store/tokens.ts';
import { createUser } from '../src/store/users.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';

const WHOAMI = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } });
const whoami = (url: string, token: string) =>
  fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: WHOAMI,
  });

describe('reads on sqld over long-lived streams, bearer lookups batched', () => {
  let sqld: Sqld;
  let inst: Installation;
  const servers = {} as Record<'a' | 'b', ServeProcess>;
  let metricsB: string;

  before(async () => {
    sqld = await startSqld({ auth: true });
    inst = await install(sourceRunner, { remote: { url: sqld.url, token: sqld.token } });
    const migrated = await inst.cli(['migrate']);
    assert.equal(migrated.code, 0, migrated.stderr);
    const added = await inst.cli(['user', 'add', 'alice', '--email', 'alice@example.com', '--password-stdin'], 'alice password 1\n');
    assert.equal(added.code, 0, added.stderr);
    metricsB = `http://127.0.0.1:${await freePort()}/metrics`;
    for (const [name, extra] of [
      ['a', ''],
      ['b', `metrics_listen = ${new URL(metricsB).host}\n`],
    ] as const) {
      const config = join(inst.dir, `serve-${name}.ini`);
      writeFileSync(
        config,
        `[server]\nlisten = 127.0.0.1:0\nbase_url = ${inst.url}\ndatabase = ${sqld.url}\ndatabase_token_env = SVC_DATABASE_TOKEN\n${extra}[auth]\n${DEFAULT_AUTH}`,
      );
      Object.assign(servers, await serveTogether(sourceRunner, config, [name], () => inst.env));
    }
  });
  after(async () => {
    for (const s of Object.values(servers)) s.child.kill('SIGTERM');
    await Promise.all(
      Object.values(servers).map(
        (s) =>
          new Promise<void>((ok) => (s.child.exitCode !== null || s.child.signalCode !== null ? ok() : s.child.once('exit', () => ok()))),
      ),
    );
    inst?.remove();
    await sqld?.remove();
  });

  test('under 50 connections to B, each token revoked through A is refused by B on the next request; B batched its lookups', async () => {
    const alice = new Browser(servers.a.url);
    assert.equal(
      (await alice.request('/login', { form: { username: 'alice', password: 'alice password 1' }, origin: inst.url })).status,
      303,
    );
    const mint = async (name: string) => {
      const r = await alice.request('/auth/tokens', { json: { name, scopes: 'mcp' }, origin: inst.url });
      const body = await r.text();
      assert.equal(r.status, 201, body);
      return JSON.parse(body) as { id: string; token: string };
    };
    const load = await mint('load');
    const before = await scrape(metricsB);

    let running = true;
    const statuses = new Map<number, number>();
    const pool = loadClient(50);
    const headers = { ...bearer(load.token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const loops = Array.from({ length: 50 }, async () => {
      while (running) {
        const r = await pool.post(`${servers.b.url}/mcp`, headers, WHOAMI);
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      }
    });
    try {
      for (let round = 0; round < 20; round++) {
        const t = await mint(`round ${round}`);
        assert.equal((await whoami(servers.b.url, t.token)).status, 200, `round ${round}: B takes the new token`);
        const revoked = await alice.request(`/auth/tokens/${t.id}/revoke`, { method: 'POST', json: {}, origin: inst.url });
        assert.equal(revoked.status, 200, `round ${round}: revoked through A`);
        assert.equal((await whoami(servers.b.url, t.token)).status, 401, `round ${round}: B refuses it on the next request`);
        assert.equal((await whoami(servers.a.url, t.token)).status, 401, `round ${round}: and so does A`);
      }
    } finally {
      running = false;
      await Promise.all(loops);
      pool.close();
    }

    assert.deepEqual([...statuses.keys()], [200], `every request of the load was answered 200: ${JSON.stringify([...statuses])}`);
    const after = await scrape(metricsB);
    const requests = after.value('svc_http_requests_total') - before.value('svc_http_requests_total');
    const reads =
      after.value('svc_database_statements_total', { kind: 'read' }) - before.value('svc_database_statements_total', { kind: 'read' });
    assert.ok(requests > 1000, `B answered ${requests} requests`);
    assert.ok(reads > 0, 'B read from sqld');
    assert.ok(reads / requests < 0.5, `B sent ${reads} read statements for ${requests} requests: its lookups were batched`);
  });
});

describe('bearer lookups on sqld beside reads that run past their deadline', () => {
  test('four reads that take over 5 s fail alone: the lookups meanwhile all answer, on a connection of their own', async () => {
    const sqld = await startSqld({ auth: true });
    const database = await openDatabase(sqld.url, sqld.token);
    try {
      await database.migrate();
      const user = await database.write((tx) => createUser(tx, userRecord({ uid: 'alice', email: 'alice@example.com' })));
      const { token } = await database.write(async (tx) => createToken(tx, user.id, tokenRecord('agent'), await database.tokenEpoch(tx)));
      // Enough rows for each read to outlast the 5 s deadline, one per read stream.
      const slow = sql`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400000000) SELECT count(*) FROM c`;
      const reads = Array.from({ length: 4 }, () =>
        Promise.resolve(database.db.all(slow)).then(
          () => 'answered',
          () => 'failed',
        ),
      );
      const lookups: boolean[] = [];
      const started = Date.now();
      while (Date.now() - started < 6000) {
        lookups.push((await checkToken(database, token)).ok);
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(await Promise.all(reads), ['failed', 'failed', 'failed', 'failed'], 'the slow reads ran past their deadline');
      assert.ok(lookups.length > 50, `${lookups.length} lookups were made meanwhile`);
      assert.deepEqual(
        lookups.filter((ok) => !ok),
        [],
        'every lookup made while the slow reads held their streams, and when their connection was dropped, found the token',
      );
    } finally {
      database.close();
      await sqld.remove();
    }
  });
});

describe('bearer lookups on sqld while it does not answer', () => {
  test('the lookups waiting behind the two statements on their way fail with them, not 5 s each after', async () => {
    const sqld = await startSqld({ auth: true });
    const counter = readCounter();
    const database = await openDatabase(sqld.url, sqld.token, { events: counter.events });
    try {
      await database.migrate();
      const user = await database.write((tx) => createUser(tx, userRecord({ uid: 'alice', email: 'alice@example.com' })));
      const { token } = await database.write(async (tx) => createToken(tx, user.id, tokenRecord('agent'), await database.tokenEpoch(tx)));
      assert.equal((await checkToken(database, token)).ok, true);
      await sqld.freeze();
      const before = counter.reads;
      // 1,000 lookups: two statements of 200 go out, 600 wait for a free one.
      const outcomes = await Promise.all(
        Array.from({ length: 1000 }, () =>
          checkToken(database, token).then(
            (c) => (c.ok ? 'found' : c.reason),
            () => 'failed',
          ),
        ),
      );
      assert.deepEqual([...new Set(outcomes)], ['failed'], 'no lookup found the token while sqld did not answer');
      assert.equal(counter.reads - before, 2, 'the two statements on their way were the only ones sent; the rest failed with them');
      sqld.resume();
      assert.equal((await checkToken(database, token)).ok, true, 'once sqld answers, the next lookup reads it');
    } finally {
      sqld.resume();
      database.close();
      await sqld.remove();
    }
  });
});

describe('bearer lookups batched on the embedded file', () => {
  test('under 50 connections, each token revoked is refused on the next request, and the load is answered throughout', async () => {
    const svc = await startTestServer({});
    const pool = loadClient(50);
    try {
      const alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
      const load = await svc.tokenFor(alice);
      const browser = new Browser(svc.url);
      assert.equal((await browser.login('alice', 'alice password 1')).status, 303);
      let running = true;
      const statuses = new Map<number, number>();
      const headers = { ...bearer(load), 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const loops = Array.from({ length: 50 }, async () => {
        while (running) {
          const r = await pool.post(`${svc.url}/mcp`, headers, WHOAMI);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        }
      });
      try {
        for (let round = 0; round < 20; round++) {
          const r = await browser.request('/auth/tokens', { json: { name: `round ${round}`, scopes: 'mcp' } });
          const body = await r.text();
          assert.equal(r.status, 201, body);
          const t = JSON.parse(body) as { id: string; token: string };
          assert.equal((await whoami(svc.url, t.token)).status, 200, `round ${round}: the new token works`);
          assert.equal((await browser.request(`/auth/tokens/${t.id}/revoke`, { method: 'POST', json: {} })).status, 200);
          assert.equal((await whoami(svc.url, t.token)).status, 401, `round ${round}: refused on the next request`);
        }
      } finally {
        running = false;
        await Promise.all(loops);
      }
      assert.deepEqual([...statuses.keys()], [200], `every request of the load was answered 200: ${JSON.stringify([...statuses])}`);
      assert.ok((statuses.get(200) ?? 0) > 1000, `the load made ${statuses.get(200)} requests`);
    } finally {
      pool.close();
      await svc.stop();
    }
  });
});
