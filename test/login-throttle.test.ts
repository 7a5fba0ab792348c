// The sign-in throttle under a burst of guesses: attempts are counted before passwords are checked, per account,
// per client address and per IPv6 /64.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { count, eq } from 'drizzle-orm';
import { startTestServer } from './helpers/server.ts';
import { Browser } from './helpers/http.ts';
import { audit, loginFailures } from '../src/db/schema.ts';

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
