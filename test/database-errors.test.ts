// Database errors as svc reports them: never with the statement's bound values (password and token hashes).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { openDatabase } from '../src/db/open.ts';
import { safeDatabaseMessage } from '../src/db/errors.ts';
import { createUser } from '../src/store/users.ts';
import { hashPassword } from '../src/auth/passwords.ts';
import { userRecord } from './helpers/records.ts';

describe('database errors never carry the values they were given', () => {
  test("on the @libsql/client driver, a failed statement's message holds its parameters; what svc prints does not", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-params-'));
    const database = await openDatabase(`file:${join(dir, 'p.db')}`, null, { forceClient: true });
    try {
      await database.migrate();
      const hash = await hashPassword('a secret password');
      const user = await database.write((tx) => createUser(tx, userRecord({ uid: 'p', email: 'p@example.com', passwordHash: hash })));
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
