// What operators expect: the audit trail exported by the CLI, kept for audit_retention, CLI actions in it, every
// entry reachable in the admin pages; one log line per request with a request id; log_level.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { userInfo } from 'node:os';
import { eq } from 'drizzle-orm';
import { startTestServer } from './helpers/server.ts';
import { Browser, bearer, rawRequest } from './helpers/http.ts';
import { createWorkspace } from './helpers/workspace.ts';
import { audit } from '../src/db/schema.ts';
import { recordAudit, recordAudits } from '../src/store/audit.ts';
import { pruneAudit } from '../src/jobs/audit-retention.ts';
import { loadConfig, ConfigError } from '../src/config/load.ts';
import { createLogger } from '../src/log.ts';

describe('the audit trail', () => {
  test('CLI actions are audited as the operating-system user through cli, without secrets; svc audit list exports and filters', async () => {
    const ws = await createWorkspace();
    try {
      const steps = [
        await ws.svc(['user', 'add', 'alice', '--email', 'alice@example.com', '--labels', 'eng', '--password-stdin'], {
          stdin: 'alice password 1\n',
        }),
        await ws.svc(['user', 'set', 'alice', '--password-stdin'], { stdin: 'alice password 2\n' }),
        await ws.svc(['token', 'create', 'alice', '--name', 'bot', '--labels', 'eng']),
        await ws.svc(['item', 'put', 'notes/a', '--title', 'A', '--labels', 'eng'], { stdin: 'text' }),
        await ws.svc(['item', 'remove', 'notes/a']),
        await ws.svc(['user', 'add', 'bob', '--email', 'bob@example.com']),
        await ws.svc(['user', 'remove', 'bob']),
      ];
      for (const r of steps) assert.equal(r.code, 0, r.stderr);
      const listed = await ws.svc(['audit', 'list', '--json']);
      assert.equal(listed.code, 0, listed.stderr);
      const entries = JSON.parse(listed.stdout) as {
        actor: string;
        via: string;
        action: string;
        target: string;
        detail: Record<string, unknown> | null;
        at: string;
      }[];
      assert.deepEqual(
        entries.map((e) => e.action),
        ['user.create', 'user.update', 'token.create', 'item.create', 'item.remove', 'user.create', 'user.remove'],
      );
      for (const e of entries) assert.deepEqual([e.actor, e.via], [userInfo().username, 'cli']);
      assert.deepEqual(entries[1]!.detail, { password: 'set' });
      assert.doesNotMatch(listed.stdout, /argon2|svc_[a-z2-7]{20}/, 'no hash and no token');
      const alice = JSON.parse((await ws.svc(['audit', 'list', '--json', '--user', 'alice'])).stdout) as unknown[];
      assert.equal(alice.length, 2);
      assert.equal(JSON.parse((await ws.svc(['audit', 'list', '--json', '--since', '1h'])).stdout).length, 7);
      assert.equal(JSON.parse((await ws.svc(['audit', 'list', '--json', '--since', '2999-01-01T00:00:00Z'])).stdout).length, 0);
      const text = await ws.svc(['audit', 'list']);
      assert.match(text.stdout, /\tuser\.remove\tbob\t/);
      const bad = await ws.svc(['audit', 'list', '--since', 'yesterday-ish']);
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /--since takes a duration/);
    } finally {
      ws.remove();
    }
  });

  test('audit_retention: older entries are removed soon after start, in batches; newer ones stay', async () => {
    const s = await startTestServer({ serverExtra: 'audit_retention = 1d\n' });
    try {
      const now = Date.now();
      // One statement for the 2,500 rows: on sqld, as many statements in one transaction outlast its 5 s limit.
      const old = Array.from({ length: 2500 }, (_, i) => ({
        event: { actor: null, via: 'anonymous', action: 'old.event', target: String(i) },
        at: now - 2 * 86_400_000,
      }));
      await s.database.write(async (tx) => {
        await recordAudits(tx, old);
        await recordAudit(tx, { actor: null, via: 'anonymous', action: 'new.event' }, now - 3_600_000);
      });
      assert.equal(await pruneAudit(s.database, 86_400_000), 2500, 'three batches');
      await s.database.write((tx) => recordAudit(tx, { actor: null, via: 'anonymous', action: 'old.event' }, now - 2 * 86_400_000));
      await s.restart();
      const deadline = Date.now() + 5000;
      while ((await s.database.db.select().from(audit).where(eq(audit.action, 'old.event')).all()).length > 0) {
        assert.ok(Date.now() < deadline, 'the server removed it');
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal((await s.database.db.select().from(audit).where(eq(audit.action, 'new.event')).all()).length, 1);
    } finally {
      await s.stop();
    }
  });

  test('the admin pages reach every entry, a page at a time', async () => {
    const s = await startTestServer();
    try {
      await s.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', admin: true });
      await s.database.write(async (tx) => {
        for (let i = 0; i < 70; i++) await recordAudit(tx, { actor: 'boss', via: 'session', action: 'test.event', target: `t${i}` });
      });
      const b = new Browser(s.url);
      await b.login('boss', 'boss password 1');
      const first = await (await b.request('/admin/audit', { headers: { accept: 'text/html' } })).text();
      const older = /href="\/admin\/audit\?before=(\d+)"/.exec(first)?.[1];
      assert.ok(older, 'a link to older entries');
      const second = await (await b.request(`/admin/audit?before=${older}`, { headers: { accept: 'text/html' } })).text();
      const targets = [...`${first}${second}`.matchAll(/<td>(t\d+)<\/td>/g)].map((m) => m[1]);
      assert.equal(new Set(targets).size, 70, 'every entry on one of the pages');
      assert.equal((await new Browser(s.url).request('/admin/audit')).status, 303);
    } finally {
      await s.stop();
    }
  });
});

describe('security headers', () => {
  test('every kind of answer carries them and its request id: a page, JSON, /mcp, a refusal, a redirect, a 404', async () => {
    const s = await startTestServer();
    try {
      const admin = await s.addUser({ uid: 'root', email: 'root@example.com', admin: true });
      const token = await s.tokenFor(admin, undefined, 'admin');
      const mcp = (headers: Record<string, string>) =>
        fetch(`${s.url}/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
        });
      const answers = {
        page: await fetch(`${s.url}/login`),
        json: await fetch(`${s.url}/admin/api/users/root`, { headers: bearer(token) }),
        mcp: await mcp(bearer(await s.tokenFor(admin))),
        refused: await mcp({}),
        redirect: await fetch(`${s.url}/admin/audit`, { redirect: 'manual' }),
        missing: await fetch(`${s.url}/no/such/page`),
        health: await fetch(`${s.url}/healthz`),
      };
      const statuses = Object.fromEntries(Object.entries(answers).map(([k, r]) => [k, r.status]));
      assert.deepEqual(statuses, { page: 200, json: 200, mcp: 200, refused: 401, redirect: 303, missing: 404, health: 200 });
      for (const [kind, r] of Object.entries(answers)) {
        const h = Object.fromEntries(
          ['x-content-type-options', 'referrer-policy', 'x-frame-options', 'cache-control'].map((n) => [n, r.headers.get(n)]),
        );
        assert.deepEqual(
          h,
          { 'x-content-type-options': 'nosniff', 'referrer-policy': 'same-origin', 'x-frame-options': 'DENY', 'cache-control': 'no-store' },
          kind,
        );
        assert.match(r.headers.get('x-request-id') ?? '', /^[A-Za-z0-9_-]{9,}$/, kind);
      }
      // What the routes set themselves is kept beside them.
      assert.match(answers.page.headers.get('content-security-policy') ?? '', /default-src 'none'/);
      assert.equal(answers.json.headers.get('content-security-policy'), null);
      assert.match(answers.refused.headers.get('www-authenticate') ?? '', /^Bearer /);
      assert.ok(answers.redirect.headers.get('location'));
      assert.match(await answers.mcp.text(), /"uid":"root"/);
    } finally {
      await s.stop();
    }
  });
});

describe('request logs', () => {
  test("one line per request: request id (a trusted proxy's, else new, echoed), route pattern, channel and uid; log_level", async () => {
    const lines: Record<string, unknown>[] = [];
    const log = { info: (event: string, f?: object) => void lines.push({ event, ...f }), warn() {}, error() {} };
    const s = await startTestServer({ log, serverExtra: 'trusted_proxies = 127.0.0.1\n' });
    try {
      const admin = await s.addUser({ uid: 'root', email: 'root@example.com', admin: true });
      const token = await s.tokenFor(admin, undefined, 'admin');
      const res = await fetch(`${s.url}/admin/api/users/root`, { headers: { ...bearer(token), 'x-request-id': 'from-the-proxy-123' } });
      assert.equal(res.headers.get('x-request-id'), 'from-the-proxy-123');
      const line = lines.find((l) => l.event === 'request' && l.path === '/admin/api/users/root')!;
      assert.deepEqual(
        [line.request_id, line.route, line.status, line.via, line.uid],
        ['from-the-proxy-123', '/admin/api/users/:uid', 200, 'token', 'root'],
      );
      const untrusted = await rawRequest(`${s.url}/healthz`, ['GET /healthz HTTP/1.1', 'X-Request-Id: forged-by-client'], {
        localAddress: '127.0.0.2',
      });
      assert.equal(untrusted.status, 200);
      const forged = lines.filter((l) => l.event === 'request' && l.path === '/healthz').at(-1)!;
      assert.notEqual(forged.request_id, 'forged-by-client');
      // Made here: a random prefix of this process and a counter, so every request's id differs.
      assert.match(String(forged.request_id), /^[A-Za-z0-9_-]{9,}$/);
      for (let i = 0; i < 3; i++) assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
      const made = lines.filter((l) => l.event === 'request' && l.request_id !== 'from-the-proxy-123').map((l) => l.request_id);
      assert.equal(made.length, 4);
      assert.equal(new Set(made).size, made.length, 'no two requests share an id');
    } finally {
      await s.stop();
    }
  });

  test('log_level and audit_retention are checked like every setting', () => {
    const server = (extra: string) => `[server]\nlisten = 127.0.0.1:8080\n${extra}\n[auth]\ntoken\n    enabled true\n`;
    assert.equal(loadConfig(server('log_level = warn'), {}, { mode: 'serve' }).server.logLevel, 'warn');
    assert.equal(loadConfig(server(''), {}, { mode: 'serve' }).server.auditRetentionSeconds, 180 * 86400);
    assert.throws(
      () => loadConfig(server('log_level = loud'), {}, { mode: 'serve' }),
      (e) => e instanceof ConfigError && /server\.log_level: "loud" is not one of debug, info, warn, error/.test(e.message),
    );
    assert.throws(
      () => loadConfig(server('audit_retention = forever'), {}, { mode: 'serve' }),
      (e) => e instanceof ConfigError && /server\.audit_retention: "forever" is not a duration/.test(e.message),
    );
    const written: string[] = [];
    const quiet = createLogger((l) => written.push(l), 'warn');
    quiet.info('request');
    quiet.warn('database_busy');
    assert.deepEqual(
      written.map((l) => (JSON.parse(l) as { event: string }).event),
      ['database_busy'],
    );
  });
});
