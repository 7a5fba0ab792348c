// The audit trail against what anonymous callers can write into it: a flood of refused requests, and names meant to
// forge an entry in the export.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { eq } from 'drizzle-orm';
import { startTestServer } from './helpers/server.ts';
import { Browser, bearer, rawRequest } from './helpers/http.ts';
import { audit } from '../src/db/schema.ts';

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

  test('a login name cut in half an emoji by the 64-character limit is kept as U+FFFD, and the trail still reads', async () => {
    const s = await startTestServer();
    try {
      const admin = await s.addUser({ uid: 'root', email: 'root@example.com', admin: true });
      const token = await s.tokenFor(admin, undefined, 'admin');
      const name = `${'a'.repeat(63)}\u{1F600}`;
      assert.equal((await new Browser(s.url).login(name, 'wrong password 1')).status, 401);
      const read = await fetch(`${s.url}/admin/api/audit`, { headers: bearer(token) });
      assert.equal(read.status, 200);
      const entries = (await read.json()) as { action: string; target: string }[];
      const failed = entries.find((e) => e.action === 'login.failure');
      assert.equal(failed?.target, `${'a'.repeat(63)}\uFFFD`);
      assert.equal((await fetch(`${s.url}/healthz`)).status, 200, 'svc still serves');
      const listed = await s.ws.svc(['audit', 'list', '--json']);
      assert.equal(listed.code, 0, listed.stderr);
    } finally {
      await s.stop();
    }
  });
});
