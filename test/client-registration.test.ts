// Dynamic client registration under a flood: clients that may be in a sign-in are never forgotten, so a consent in
// progress is still redeemable; a full cap answers 429; per-address rates count an IPv6 client by its /64. The rules
// live in the store, so this suite also runs on a real sqld (store-on-sqld.test.ts).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { count, eq, inArray } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, rawRequest } from './helpers/http.ts';
import { DEFAULT_AUTH } from './helpers/workspace.ts';
import { movableClock } from './helpers/clock.ts';
import { REDIRECT } from './helpers/oauth-client.ts';
import { oauthClients, oauthGrants, oauthRequests } from '../src/db/schema.ts';
import { HELD_REQUESTS_PER_USER } from '../src/store/oauth.ts';
import { MAX_UNUSED_CLIENTS } from '../src/store/oauth-clients.ts';
import { heldConsent, pkce } from './helpers/oauth-client.ts';

describe('a flood of client registrations cannot break a sign-in in progress', () => {
  let s: TestServer;
  let alice: Browser;
  const clock = movableClock();
  before(async () => {
    s = await startTestServer({
      auth: `${DEFAULT_AUTH}oauth\n    enabled true\n`,
      serverExtra: 'trusted_proxies = 127.0.0.9\n',
      clock: clock.now,
    });
    await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
    alice = new Browser(s.url);
    assert.equal((await alice.login('alice', 'alice password 1')).status, 303);
  });
  after(() => s.stop());

  const register = (name: string, localAddress?: string, forwardedFor?: string) =>
    rawRequest(
      `${s.url}/oauth/register`,
      ['POST /oauth/register HTTP/1.1', 'Content-Type: application/json', ...(forwardedFor ? [`X-Forwarded-For: ${forwardedFor}`] : [])],
      {
        body: JSON.stringify({ client_name: name, redirect_uris: [REDIRECT] }),
        ...(localAddress ? { localAddress } : {}),
      },
    );
  const answer = async (secret: string) => {
    const res = await alice.request('/oauth/authorize', {
      method: 'POST',
      body: new URLSearchParams({ request: secret, decision: 'approve', access: 'all' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    });
    assert.equal(res.status, 302, await res.text());
    return new URL(res.headers.get('location')!).searchParams.get('code')!;
  };
  const redeem = (clientId: string, code: string, verifier: string) =>
    fetch(`${s.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        client_id: clientId,
        code,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
      }),
    });
  /** `n` registrations from each of the addresses, twenty at a time; their statuses. */
  const flood = async (addresses: readonly string[], n: number) => {
    const statuses: number[] = [];
    const jobs = addresses.flatMap((a) => Array.from({ length: n }, (_, i) => () => register(`flood ${i}`, a)));
    for (let i = 0; i < jobs.length; i += 20)
      statuses.push(...(await Promise.all(jobs.slice(i, i + 20).map((j) => j()))).map((r) => r.status));
    return statuses;
  };

  test('1,200 registrations from four addresses: a code already issued and a consent page still open both finish', async () => {
    const app = JSON.parse((await register('real app', '127.0.0.3')).body) as { client_id: string };
    const issued = pkce();
    const code = await answer(await heldConsent(s.url, alice, app.client_id, issued.challenge));
    const late = JSON.parse((await register('late app', '127.0.0.3')).body) as { client_id: string };
    const open = pkce();
    const waiting = await heldConsent(s.url, alice, late.client_id, open.challenge);

    const statuses = await flood(['127.0.0.21', '127.0.0.22', '127.0.0.23', '127.0.0.24'], 300);

    // Both apps are still known: the issued code is redeemed, and the open consent is answered and redeemed.
    const first = await redeem(app.client_id, code, issued.verifier);
    assert.equal(first.status, 200, await first.clone().text());
    const second = await redeem(late.client_id, await answer(waiting), open.verifier);
    assert.equal(second.status, 200, await second.clone().text());

    // The app with a grant no longer counted as unused; the one on its consent page did, and kept its place.
    const made = statuses.filter((status) => status === 201).length;
    assert.equal(made, MAX_UNUSED_CLIENTS - 1, 'the cap filled with the flood');
    assert.equal(statuses.filter((status) => status === 429).length, 1200 - made);
    const full = await rawRequest(`${s.url}/oauth/register`, ['POST /oauth/register HTTP/1.1', 'Content-Type: application/json'], {
      body: JSON.stringify({ client_name: 'one more', redirect_uris: [REDIRECT] }),
      localAddress: '127.0.0.25',
    });
    assert.equal(full.status, 201, 'the app redeemed last left the unused ones: one place is free');
  });

  test('a full cap answers 429 with Retry-After until its oldest clients leave the window; then the oldest unused go first', async () => {
    const attempt = () =>
      fetch(`${s.url}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'waits', redirect_uris: [REDIRECT] }),
      });
    const res = await attempt();
    assert.equal(res.status, 429);
    const retry = Number(res.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 600, `Retry-After ${retry}`);
    const before = (await s.database.db.select({ n: count() }).from(oauthClients).get())!.n;
    clock.advance(11 * 60_000);
    const after = await fetch(`${s.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'now', redirect_uris: [REDIRECT] }),
    });
    assert.equal(after.status, 201);
    assert.equal((await s.database.db.select({ n: count() }).from(oauthClients).get())!.n, before, 'one forgotten, one made');
    // The apps that completed a grant stay, whatever their age.
    const granted = await s.database.db.select({ id: oauthGrants.clientId }).from(oauthGrants).all();
    assert.equal(granted.length, 2);
    for (const g of granted)
      assert.ok(await s.database.db.select().from(oauthClients).where(eq(oauthClients.id, g.id)).get(), 'a granted app stays');
  });

  test('300 registrations from one IPv6 /64 (through the trusted proxy) use up its rate; another /64 registers', async () => {
    // Room first: every unused client is past the window by now, so the oldest make way.
    const statuses: number[] = [];
    for (let i = 0; i < 300; i += 20) {
      const batch = await Promise.all(
        Array.from({ length: 20 }, (_, j) => register(`v6 ${i + j}`, '127.0.0.9', `2001:db8:0:9::${(i + j + 1).toString(16)}`)),
      );
      statuses.push(...batch.map((r) => r.status));
    }
    assert.deepEqual([...new Set(statuses)], [201]);
    assert.equal((await register('same /64', '127.0.0.9', '2001:db8:0:9:ffff::1')).status, 429);
    assert.equal((await register('other /64', '127.0.0.9', '2001:db8:0:a::1')).status, 201);
  });

  test('one person holds at most ten consent requests, so held requests cannot keep every registration out', async () => {
    const apps: string[] = [];
    for (let i = 0; i < 12; i++)
      apps.push((JSON.parse((await register(`held ${i}`, '127.0.0.4')).body) as { client_id: string }).client_id);
    const held: string[] = [];
    for (const app of apps) held.push(await heldConsent(s.url, alice, app));
    const stillHeld = await s.database.db.select({ n: count() }).from(oauthRequests).where(inArray(oauthRequests.clientId, apps)).get();
    assert.equal(stillHeld!.n, HELD_REQUESTS_PER_USER);
    // The two opened first are gone; the newest is answered as ever.
    const refused = await alice.request('/oauth/authorize', {
      method: 'POST',
      body: new URLSearchParams({ request: held[0]!, decision: 'approve', access: 'all' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    });
    assert.equal(refused.status, 400);
    assert.match(await refused.text(), /expired or was answered already/);
    assert.ok(await answer(held[11]!));
  });

  // Last: it moves the clock a day on, past the browser's session.
  test('a never-used client whose grant was never redeemed is forgotten after a day, and that grant ends', async () => {
    const app = (JSON.parse((await register('never redeemed', '127.0.0.5')).body) as { client_id: string }).client_id;
    await answer(await heldConsent(s.url, alice, app));
    const kept = (JSON.parse((await register('redeemed', '127.0.0.5')).body) as { client_id: string }).client_id;
    const flow = pkce();
    assert.equal((await redeem(kept, await answer(await heldConsent(s.url, alice, kept, flow.challenge)), flow.verifier)).status, 200);
    const grant = () => s.database.db.select().from(oauthGrants).where(eq(oauthGrants.clientId, app)).get();
    assert.equal((await grant())!.revokedAt, null);
    clock.advance(25 * 3600_000);
    // Each registration forgets a batch of the oldest such clients; the flood's go first, this one among the last.
    const known = async () => (await s.database.db.select().from(oauthClients).where(eq(oauthClients.id, app)).get()) !== undefined;
    for (let i = 0; i < 40 && (await known()); i++) assert.equal((await register(`later ${i}`, '127.0.0.6')).status, 201);
    assert.equal(await known(), false, 'forgotten');
    assert.notEqual((await grant())!.revokedAt, null, 'its grant ended with it');
    // An app that completed a grant stays, however old.
    assert.ok(await s.database.db.select().from(oauthClients).where(eq(oauthClients.id, kept)).get(), 'the used app stays');
  });
});
