// GET /metrics on metrics_listen: scraped and parsed as Prometheus would, the counters move with the requests made,
// no label carries a uid, token id or id-bearing path, and the public listener never serves metrics.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import Sqlite from 'better-sqlite3';
import { startTestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { freePort } from './helpers/workspace.ts';
import { scrape } from './helpers/metrics.ts';
import { waitFor } from './helpers/wait.ts';
import { movableClock } from './helpers/clock.ts';
import { filePath } from '../src/db/open.ts';
import { createToken } from '../src/store/tokens.ts';
import { loadConfig, type ConfigError } from '../src/config/load.ts';
import { tokenRecord } from './helpers/records.ts';

const mcp = (url: string, token: string, body: unknown) =>
  fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify(body),
  });

describe('metrics', () => {
  test('counters move with requests, auth outcomes, logins and MCP calls; gauges count users, sessions and tokens', async () => {
    const metricsPort = await freePort();
    const clock = movableClock();
    const s = await startTestServer({ serverExtra: `metrics_listen = 127.0.0.1:${metricsPort}\n`, clock: clock.now });
    const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    try {
      const alice = await s.addUser({ uid: 'alice', email: 'alice@example.com', labels: 'eng', password: 'alice password 1' });
      const mint = (name: string, ttl?: string) =>
        s.database.write(async (tx) => createToken(tx, alice.id, tokenRecord(name, ttl, null, 'mcp api'), await s.database.tokenEpoch(tx)));
      const { token: good } = await mint('good');
      const { token: revoked, id: revokedId } = await mint('revoked');
      const { token: expired } = await mint('expired', '1h');
      assert.equal((await fetch(`${s.url}/auth/tokens/${revokedId}/revoke`, { method: 'POST', headers: bearer(revoked) })).status, 200);
      clock.advance(3600_000);

      const before = await scrape(metricsUrl);
      assert.equal(before.families.get('svc_users')?.type, 'GAUGE');
      assert.equal(before.value('svc_users'), 1);
      assert.equal(before.value('svc_tokens_active'), 1, 'one of three tokens is neither revoked nor expired');
      assert.equal(before.value('svc_sessions_active'), 0);
      assert.ok(before.families.has('process_cpu_user_seconds_total'), 'the default process metrics');
      assert.ok(before.families.has('nodejs_heap_size_used_bytes'));
      assert.equal(
        before.value('svc_login_attempts_total', { method: 'password', outcome: 'throttled' }),
        0,
        'present before the first refusal',
      );

      for (let i = 0; i < 3; i++) assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(good) })).status, 200);
      assert.equal((await fetch(`${s.url}/auth/tokens`)).status, 401);
      assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(revoked) })).status, 401);
      assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(expired) })).status, 401);
      assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer('svc_not_a_real_token') })).status, 401);
      assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: { authorization: 'Basic abc' } })).status, 401);
      assert.equal((await fetch(`${s.url}/auth/tokens/tok_nosuchid/revoke`, { method: 'POST', headers: bearer(good) })).status, 404);
      const browser = new Browser(s.url);
      assert.equal((await browser.login('alice', 'wrong password')).status, 401);
      assert.equal((await browser.login('alice', 'alice password 1')).status, 303);
      assert.equal(
        (await mcp(s.url, good, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } })).status,
        200,
      );
      assert.equal(
        (await mcp(s.url, good, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'search', arguments: { query: 'x' } } }))
          .status,
        200,
      );
      assert.equal((await mcp(s.url, good, { jsonrpc: '2.0', id: 3, method: 'tools/list' })).status, 200);
      // Made-up names a caller sends must not become series of their own.
      await mcp(s.url, good, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'alice-secret-tool', arguments: {} } });
      await mcp(s.url, good, { jsonrpc: '2.0', id: 5, method: 'made/up/method-alice' });

      const after = await scrape(metricsUrl);
      const moved = (name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
      assert.equal(moved('svc_http_requests_total', { route: '/auth/tokens', method: 'GET', status: '200' }), 3);
      assert.equal(moved('svc_http_requests_total', { route: '/auth/tokens', method: 'GET', status: '401' }), 5);
      assert.equal(
        moved('svc_http_requests_total', { route: '/auth/tokens/:id/revoke', method: 'POST', status: '404' }),
        1,
        'the route template, not the path',
      );
      assert.equal(
        after.count('svc_http_request_duration_seconds', { route: '/auth/tokens', method: 'GET' }) -
          before.count('svc_http_request_duration_seconds', { route: '/auth/tokens', method: 'GET' }),
        8,
      );
      assert.equal(
        moved('svc_auth_outcomes_total', { channel: 'token', outcome: 'ok' }),
        3 + 1 + 5,
        'lists, the 404 revoke, five MCP calls',
      );
      assert.equal(moved('svc_auth_outcomes_total', { channel: 'none', outcome: 'missing' }) >= 1, true);
      assert.equal(moved('svc_auth_outcomes_total', { channel: 'token', outcome: 'revoked' }), 1);
      assert.equal(moved('svc_auth_outcomes_total', { channel: 'token', outcome: 'expired' }), 1);
      assert.equal(moved('svc_auth_outcomes_total', { channel: 'token', outcome: 'invalid' }), 1);
      assert.equal(moved('svc_auth_outcomes_total', { channel: 'token', outcome: 'malformed' }), 1);
      assert.equal(moved('svc_login_attempts_total', { method: 'password', outcome: 'failed' }), 1);
      assert.equal(moved('svc_login_attempts_total', { method: 'password', outcome: 'ok' }), 1);
      assert.equal(moved('svc_mcp_calls_total', { method: 'tools/call', tool: 'whoami' }), 1);
      assert.equal(moved('svc_mcp_calls_total', { method: 'tools/call', tool: 'search' }), 1);
      assert.equal(moved('svc_mcp_calls_total', { method: 'tools/list', tool: '' }), 1);
      assert.equal(moved('svc_mcp_calls_total', { method: 'tools/call', tool: 'other' }), 1);
      assert.equal(moved('svc_mcp_calls_total', { method: 'other', tool: '' }), 1);
      assert.equal(after.count('svc_mcp_call_duration_seconds', { method: 'tools/call', tool: 'whoami' }), 1);
      assert.equal(after.value('svc_sessions_active'), 1);

      // Nothing that names a user, a token or an id-bearing path is in any label.
      for (const secret of ['alice', revokedId, 'tok_nosuchid', good.slice(0, 12)])
        assert.equal(after.text.includes(secret), false, secret);

      // The public listener has no /metrics; the metrics address serves nothing else.
      assert.equal((await fetch(`${s.url}/metrics`, { headers: bearer(good) })).status, 404);
      assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/mcp`)).status, 404);
      assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { method: 'POST' })).status, 404);
    } finally {
      await s.stop();
    }
  });

  test('statements sent to the database are counted: reads alone for reads, a write with its BEGIN and COMMIT', async () => {
    const metricsPort = await freePort();
    const s = await startTestServer({ serverExtra: `metrics_listen = 127.0.0.1:${metricsPort}\n` });
    const started = Date.now();
    const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    try {
      await s.addUser({ uid: 'alice', email: 'alice@example.com', labels: 'eng', password: 'alice password 1' });
      const browser = new Browser(s.url);
      assert.equal((await browser.login('alice', 'alice password 1')).status, 303);
      const minted = await browser.request('/auth/tokens', { json: { name: 'counted', scopes: 'mcp api' } });
      assert.equal(minted.status, 201);
      const { token } = (await minted.json()) as { token: string };
      // The token's first use stamps it (a best-effort write after the answer); later uses within a minute do not.
      assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 200);
      const kinds = async () => {
        const m = await scrape(metricsUrl);
        return {
          read: m.value('svc_database_statements_total', { kind: 'read' }),
          write: m.value('svc_database_statements_total', { kind: 'write' }),
        };
      };
      /** The counts once the writes stopped (two scrapes 200 ms apart agree), with more writes than `above`. */
      const settled = async (what: string, above = Number.NEGATIVE_INFINITY) => {
        let last = await kinds();
        await waitFor(
          what,
          async () => {
            const now = await kinds();
            const done = now.write === last.write && now.write > above;
            last = now;
            return done;
          },
          { everyMs: 200 },
        );
        return last;
      };
      // The audit retention job's first prune (a write) runs 1 s after start: past it before counting.
      await new Promise((r) => setTimeout(r, Math.max(0, started + 1500 - Date.now())));
      const before = await settled('the last-used stamp and the first prune are written');

      for (let i = 0; i < 5; i++) assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 200);
      const read = await kinds();
      assert.ok(read.read - before.read >= 5, `five bearer requests read at least five statements (${read.read - before.read})`);
      assert.equal(read.write - before.write, 0, 'reads sent no write statement');

      const second = await browser.request('/auth/tokens', { json: { name: 'second', scopes: 'mcp api' } });
      assert.equal(second.status, 201);
      const wrote = await kinds();
      assert.ok(wrote.write - read.write >= 3, `a mint is BEGIN, its statements and COMMIT (${wrote.write - read.write})`);

      // Twenty requests at once with a token never used: each reads it unstamped, and one stamp is written.
      const fresh = ((await second.json()) as { token: string }).token;
      const answers = await Promise.all(Array.from({ length: 20 }, () => fetch(`${s.url}/auth/tokens`, { headers: bearer(fresh) })));
      assert.deepEqual([...new Set(answers.map((r) => r.status))], [200]);
      const stamped = await settled('the stamp is written', wrote.write);
      assert.equal(stamped.write - wrote.write, 3, 'one stamp: BEGIN, the UPDATE and COMMIT');
    } finally {
      await s.stop();
    }
  });

  test('lock retries and a write refused busy are counted', async () => {
    const metricsPort = await freePort();
    const s = await startTestServer({ serverExtra: `metrics_listen = 127.0.0.1:${metricsPort}\n` });
    const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    const holder = new Sqlite(filePath(s.ws.dbUrl));
    try {
      const bob = await s.addUser({ uid: 'bob', email: 'bob@example.com' });
      const token = await s.tokenFor(bob, undefined, 'api');
      const other = await s.database.write((tx) => createToken(tx, bob.id, tokenRecord('other', undefined)));
      const before = await scrape(metricsUrl);
      // Held briefly: the write waits, retries and succeeds.
      holder.exec('BEGIN IMMEDIATE');
      const waiting = fetch(`${s.url}/auth/tokens/${other.id}/revoke`, { method: 'POST', headers: bearer(token) });
      await waitFor(
        'the write to retry on the held lock',
        async () => (await scrape(metricsUrl)).value('svc_database_busy_retries_total') > before.value('svc_database_busy_retries_total'),
      );
      holder.exec('COMMIT');
      assert.equal((await waiting).status, 200);
      const middle = await scrape(metricsUrl);
      assert.ok(middle.value('svc_database_busy_retries_total') > before.value('svc_database_busy_retries_total'));
      assert.equal(middle.value('svc_database_errors_total', { kind: 'busy' }), 0);
      // Held past the wait: 503, counted once.
      const another = await s.database.write((tx) => createToken(tx, bob.id, tokenRecord('another', undefined)));
      holder.exec('BEGIN IMMEDIATE');
      const refused = await fetch(`${s.url}/auth/tokens/${another.id}/revoke`, { method: 'POST', headers: bearer(token) });
      holder.exec('COMMIT');
      assert.equal(refused.status, 503);
      const after = await scrape(metricsUrl);
      assert.equal(after.value('svc_database_errors_total', { kind: 'busy' }), 1);
    } finally {
      holder.close();
      await s.stop();
    }
  });

  test('metrics_listen is checked: host:port, never the public port; off by default', () => {
    const load = (server: string) =>
      loadConfig(`[server]\nlisten = 127.0.0.1:8080\n${server}\n[auth]\ntoken\n    enabled true\n`, {}, { mode: 'serve' });
    assert.equal(load('').server.metrics, null);
    assert.deepEqual(load('metrics_listen = 127.0.0.1:9464').server.metrics, { host: '127.0.0.1', port: 9464 });
    assert.throws(
      () => load('metrics_listen = 9464'),
      (e: ConfigError) => /server\.metrics_listen: "9464" is not host:port/.test(e.message),
    );
    assert.throws(
      () => load('metrics_listen = 0.0.0.0:8080'),
      (e: ConfigError) => /must not share listen's port 8080/.test(e.message),
    );
  });
});
