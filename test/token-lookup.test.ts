// The bearer lookup has a fast path for the embedded driver and a drizzle path for remote databases; every driver
// must give the same answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DRIVERS, openFresh } from './helpers/drivers.ts';
import { createUser } from '../src/store/users.ts';
import { createToken, checkToken, revokeToken } from '../src/store/tokens.ts';
import { userRecord, tokenRecord } from './helpers/records.ts';

for (const driver of DRIVERS) {
  test(`checkToken on the ${driver} driver`, async () => {
    const { database, close } = await openFresh(driver);
    try {
      await database.migrate();
      const db = database;
      const w = database.write;
      const user = await w((tx) =>
        createUser(
          tx,
          userRecord({ uid: 'tess', email: 'tess@example.com', name: 'Tess', labels: 'b, a', admin: true, passwordHash: 'x' }),
        ),
      );
      const active = await w((tx) => createToken(tx, user.id, tokenRecord('active', undefined)));
      const revoked = await w((tx) => createToken(tx, user.id, tokenRecord('revoked', undefined)));
      const expiring = await w((tx) => createToken(tx, user.id, tokenRecord('expiring', '1s')));
      await w((tx) => revokeToken(tx, user.id, revoked.id));

      const ok = await checkToken(db, active.token);
      assert.ok(ok.ok);
      assert.equal(ok.tokenId, active.id);
      assert.deepEqual(ok.user, { ...user });
      // A hit, then misses on the same prepared statement (the case that once crashed libsql).
      assert.deepEqual(await checkToken(db, `svc_${'a'.repeat(40)}${active.token.slice(44)}`), { ok: false, reason: 'malformed' });
      const unknown = (await w((tx) => createToken(tx, user.id, tokenRecord('gone', undefined)))).token;
      await w(async (tx) => void (await tx.run((await import('drizzle-orm')).sql`DELETE FROM tokens WHERE name = 'gone'`)));
      assert.deepEqual(await checkToken(db, unknown), { ok: false, reason: 'unknown' });
      assert.deepEqual(await checkToken(db, revoked.token), { ok: false, reason: 'revoked' });
      assert.ok((await checkToken(db, expiring.token)).ok);
      assert.deepEqual(await checkToken(db, expiring.token, Date.now() + 2000), { ok: false, reason: 'expired' });
      assert.ok((await checkToken(db, active.token)).ok);
    } finally {
      await close();
    }
  });
}
