// The audit rows of upstream calls (upstream/call-audit.ts): every call waits until its row is committed; while
// other calls started moments ago are still running, a commit waits a moment for their rows to join it, and a call
// alone, or beside only calls that have run long, never waits.
// setTimeout is mocked, so the short wait passes only when a test says so: what is asserted is the order of
// events, never a time.
import { test, describe, mock } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'drizzle-orm';
import { CallAudit } from '../src/upstream/call-audit.ts';
import type { Database } from '../src/db/open.ts';
import { DRIVERS, openFresh } from './helpers/drivers.ts';

const event = (target: string) => ({ actor: 'alice', via: 'token', action: 'upstream.call', target, detail: { outcome: 'ok' } });

async function targets(database: Database): Promise<string[]> {
  const rows = await database.db.all<{ target: string }>(sql`SELECT target FROM audit WHERE action = 'upstream.call' ORDER BY id`);
  return rows.map((r) => r.target);
}

/** A call that ends when told to: `end()` to answer, `fail()` to throw. */
function pending(): { promise: Promise<string>; end(): void; fail(): void } {
  let end!: () => void;
  let fail!: () => void;
  const promise = new Promise<string>((resolve, reject) => {
    end = () => resolve('answered');
    fail = () => reject(new Error('the upstream failed'));
  });
  return { promise, end, fail };
}

/** Lets every microtask and one turn of the event loop run. */
const turn = () => new Promise((r) => setImmediate(r));

/** Runs a call through the audit as the gateway does: counted while it runs, then its row recorded. */
async function audited(audit: CallAudit, target: string, call: () => Promise<string>): Promise<string> {
  const answer = await audit.during(call).catch(() => 'refused');
  await audit.record(event(target));
  return answer;
}

for (const driver of DRIVERS) {
  describe(`audit rows of upstream calls (${driver})`, () => {
    // A commit that waited for the mocked clock would never end: the test's timeout is what fails then.
    test('a call alone is committed at once; rows of calls ending together go in one commit, and none is answered before it', {
      timeout: 120_000,
    }, async (t) => {
      const { database, close } = await openFresh(driver);
      t.after(close);
      await database.migrate();
      mock.timers.enable({ apis: ['setTimeout'] });
      t.after(() => mock.timers.reset());
      // Counts the transactions: rows that share one are committed together.
      let commits = 0;
      const write = database.write.bind(database);
      database.write = ((fn, options) => {
        commits++;
        return write(fn, options);
      }) as typeof database.write;
      const audit = new CallAudit(database);

      // Alone: committed without the group's wait (the mocked clock never moves here).
      assert.equal(await audited(audit, 'up/alone', async () => 'answered'), 'answered');
      assert.deepEqual(await targets(database), ['up/alone']);
      assert.equal(commits, 1);

      // Two at once: the first to end waits for the second, which is still running, and neither is answered
      // before both rows are committed.
      const [a, b] = [pending(), pending()];
      let answered = 0;
      const counted = (r: string) => {
        answered++;
        return r;
      };
      const first = audited(audit, 'up/first', () => a.promise).then(counted);
      const second = audited(audit, 'up/second', () => b.promise).then(counted);
      a.end();
      for (let i = 0; i < 5; i++) await turn();
      assert.equal(answered, 0, 'the first call waits for its row');
      assert.deepEqual(await targets(database), ['up/alone'], 'its row waits for the call still running');
      b.fail();
      assert.deepEqual(await Promise.all([first, second]), ['answered', 'refused']);
      assert.deepEqual(await targets(database), ['up/alone', 'up/first', 'up/second']);
      assert.equal(commits, 2, 'both rows in one commit');

      // A call that keeps running holds the others only for the group's wait.
      const [c, slow] = [pending(), pending()];
      const third = audited(audit, 'up/third', () => c.promise);
      const hanging = audited(audit, 'up/slow', () => slow.promise);
      c.end();
      for (let i = 0; i < 5; i++) await turn();
      assert.deepEqual(await targets(database), ['up/alone', 'up/first', 'up/second']);
      mock.timers.tick(2);
      assert.equal(await third, 'answered');
      assert.deepEqual(await targets(database), ['up/alone', 'up/first', 'up/second', 'up/third']);
      // Once it has run longer than a call that will soon end, a call still running holds no one.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 80);
      assert.equal(await audited(audit, 'up/later', async () => 'answered'), 'answered');
      assert.deepEqual((await targets(database)).slice(-1), ['up/later']);
      slow.end();
      await hanging;
      assert.deepEqual((await targets(database)).slice(-1), ['up/slow']);
    });
  });
}
