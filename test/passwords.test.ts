// Password hashes run on libuv's thread pool, and so does every WebCrypto signature and verification (identity
// assertions for upstreams, ID-JAG, OIDC) and host name lookup: a burst of sign-ins must leave threads to those.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hashPassword, verifyPassword } from '../src/auth/passwords.ts';

test('sixteen password checks at once leave the thread pool to a WebCrypto signature', async () => {
  const phc = await hashPassword('the right password');
  const { privateKey } = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify']);
  let checked = 0;
  const checks = Array.from({ length: 16 }, () =>
    verifyPassword(phc, 'a wrong guess').then((ok) => {
      checked++;
      return ok;
    }),
  );
  // Every check asks for its hash first (each takes tens of milliseconds); then the signature is asked for. What
  // counts is how many checks end while the signature waits, not a time: on a busy machine one may end before.
  await new Promise((r) => setImmediate(r));
  const before = checked;
  await crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, privateKey, new Uint8Array(64));
  const during = checked - before;
  assert.deepEqual(await Promise.all(checks), Array(16).fill(false), 'every check ran, and refused the guess');
  assert.ok(before < 16, 'the signature was asked for while checks were still waiting');
  assert.ok(during <= 4, `${during} of 16 checks ended while the signature waited`);
  assert.equal(await verifyPassword(phc, 'the right password'), true);
});
