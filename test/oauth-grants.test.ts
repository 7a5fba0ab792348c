// The grant is the one authority behind its codes and tokens (CONTRACT §7), judged by oauth4webapi: what a revoked
// grant issued is dead whenever it was issued, a code is checked in full before it is used up, a refresh family
// never forks, asking again never widens the restriction, and client credentials never reach the bearer channel.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { and, count, eq, isNull, sql } from 'drizzle-orm';
import * as oauth from 'oauth4webapi';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer, rawRequest } from './helpers/http.ts';
import { scrape } from './helpers/metrics.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';
import { consentAs, REDIRECT } from './helpers/oauth-client.ts';
import { movableClock } from './helpers/clock.ts';
import { createLogger } from '../src/log.ts';
import { audit, oauthClients, oauthGrants } from '../src/db/schema.ts';
import { MAX_UNUSED_CLIENTS } from '../src/store/oauth-clients.ts';

const OAUTH = `${DEFAULT_AUTH}oauth\n    enabled true\n    refresh_grace 30s\n`;
const DAY = 86400_000;
const insecure = { [oauth.allowInsecureRequests]: true } as const;
const invalidGrant = (e: unknown) => e instanceof oauth.ResponseBodyError && e.error === 'invalid_grant';

describe('the grant is the authority', () => {
  let s: TestServer;
  let alice: Browser;
  let ops: Browser;
  let as: oauth.AuthorizationServer;
  let metricsUrl: string;
  const logLines: string[] = [];
  // svc runs five years ahead of the system time here: codes, tokens and grants must agree with its own clock.
  const clock = movableClock(5 * 365 * DAY);
  before(async () => {
    const metricsPort = await freePort();
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    s = await startTestServer({
      auth: OAUTH,
      serverExtra: `metrics_listen = 127.0.0.1:${metricsPort}\n`,
      log: createLogger((line) => logLines.push(line)),
      clock: clock.now,
    });
    await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1', labels: 'eng, finance' });
    await s.addUser({ uid: 'ops', email: 'ops@example.com', password: 'ops password 1', admin: true });
    alice = new Browser(s.url);
    await alice.login('alice', 'alice password 1');
    ops = new Browser(s.url);
    await ops.login('ops', 'ops password 1');
    const issuer = new URL(s.url);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
  });
  after(() => s.stop());

  async function registered(body: Record<string, unknown> = {}): Promise<{ client: oauth.Client; secret?: string }> {
    const res = await fetch(as.registration_endpoint!, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'app', redirect_uris: [REDIRECT], ...body }),
    });
    const reg = await oauth.processDynamicClientRegistrationResponse(res);
    return {
      client: { client_id: reg.client_id, token_endpoint_auth_method: reg.token_endpoint_auth_method as string },
      ...(reg.client_secret ? { secret: String(reg.client_secret) } : {}),
    };
  }
  async function codeFor(client: oauth.Client, who = alice, redirect = REDIRECT) {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: client.client_id,
      redirect_uri: redirect,
      response_type: 'code',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();
    const back = await consentAs(who, url);
    return { verifier, params: oauth.validateAuthResponse(as, client, back, state) };
  }
  const exchange = async (
    client: oauth.Client,
    c: { verifier: string; params: URLSearchParams },
    auth = oauth.None(),
    redirect = REDIRECT,
  ) =>
    oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(as, client, auth, c.params, redirect, c.verifier, insecure),
    );
  const refresh = async (client: oauth.Client, token: string) =>
    oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), token, insecure));
  /** Whether an access token still reads through /oauth/mcp (an OAuth token's only scope); a dead one is 401. */
  const works = async (accessToken: string) => {
    const r = await fetch(`${s.url}/oauth/mcp`, {
      method: 'POST',
      headers: { ...bearer(accessToken), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    await r.body?.cancel();
    if (r.status !== 200 && r.status !== 401) assert.fail(`/oauth/mcp answered ${r.status}`);
    return r.status === 200;
  };
  const grantOf = async (clientId: string) =>
    (await s.database.db.select().from(oauthGrants).where(eq(oauthGrants.clientId, clientId)).get())!;

  test('a code issued before its grant was revoked and redeemed after: invalid_grant, and no token appears', async () => {
    const { client } = await registered();
    const first = await exchange(client, await codeFor(client));
    // A second authorization under the same grant, its code held back while alice revokes the app.
    const held = await codeFor(client);
    const grant = await grantOf(client.client_id);
    assert.equal((await alice.request(`/auth/grants/${grant.id}/revoke`, { form: {} })).status, 200);
    await assert.rejects(() => exchange(client, held), invalidGrant);
    assert.equal(await works(first.access_token), false);
    await assert.rejects(() => refresh(client, first.refresh_token!), invalidGrant);
    assert.notEqual((await grantOf(client.client_id)).revokedAt, null, 'the grant stays revoked');
  });

  test("an admin revoking all of a user's tokens ends their grants: refresh tokens stop too", async () => {
    const { client } = await registered();
    const issued = await exchange(client, await codeFor(client));
    const held = await codeFor(client);
    assert.equal((await ops.request('/admin/users/alice/revoke-tokens', { form: {} })).status, 303);
    assert.equal(await works(issued.access_token), false);
    await assert.rejects(() => refresh(client, issued.refresh_token!), invalidGrant);
    await assert.rejects(() => exchange(client, held), invalidGrant);
    assert.notEqual((await grantOf(client.client_id)).revokedAt, null);
  });

  test('a code is checked in full before it is used up: a wrong verifier, redirect_uri or resource leaves it to its holder', async () => {
    const { client } = await registered();
    const c = await codeFor(client);
    const raw = (fields: Record<string, string>) =>
      fetch(as.token_endpoint!, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          client_id: client.client_id,
          code: c.params.get('code')!,
          ...fields,
        }),
      }).then((r) => r.json() as Promise<{ error?: string }>);
    assert.equal((await raw({ code_verifier: oauth.generateRandomCodeVerifier(), redirect_uri: REDIRECT })).error, 'invalid_grant');
    assert.equal((await raw({ code_verifier: c.verifier, redirect_uri: 'http://127.0.0.1:9/other' })).error, 'invalid_grant');
    assert.equal(
      (await raw({ code_verifier: c.verifier, redirect_uri: REDIRECT, resource: 'https://elsewhere.example/mcp' })).error,
      'invalid_target',
    );
    const other = await registered();
    assert.equal(
      (
        (await (
          await fetch(as.token_endpoint!, {
            method: 'POST',
            body: new URLSearchParams({
              grant_type: 'authorization_code',
              client_id: other.client.client_id,
              code: c.params.get('code')!,
              code_verifier: c.verifier,
              redirect_uri: REDIRECT,
            }),
          })
        ).json()) as { error: string }
      ).error,
      'invalid_grant',
    );
    const tokens = await exchange(client, c);
    assert.ok(await works(tokens.access_token));
  });

  test('a refresh family never forks: the grace answers a reused token once, and using both successors revokes the family', async () => {
    const { client } = await registered();
    const a = (await exchange(client, await codeFor(client))).refresh_token!;
    const b = await refresh(client, a);
    const c = await refresh(client, a);
    // Both of a's successors now carry on: the second one to rotate shows the fork.
    const d = await refresh(client, b.refresh_token!);
    assert.ok(await works(d.access_token));
    await assert.rejects(() => refresh(client, c.refresh_token!), invalidGrant);
    assert.equal(await works(d.access_token), false, 'the whole family is revoked');
    assert.equal(await works(c.access_token), false);
    await assert.rejects(() => refresh(client, d.refresh_token!), invalidGrant);
  });

  test("asked again through another redirect, consent shows and keeps the grant's restriction", async () => {
    const { client } = await registered({ redirect_uris: [REDIRECT, 'https://app.example/cb'] });
    const verifier = oauth.generateRandomCodeVerifier();
    const q = new URLSearchParams({
      client_id: client.client_id,
      redirect_uri: REDIRECT,
      response_type: 'code',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const first = await (await alice.request(`/oauth/authorize?${q}`, { headers: { accept: 'text/html' } })).text();
    const request = /name="request" value="([^"]+)"/.exec(first)![1]!;
    const answer = await alice.request('/oauth/authorize', {
      method: 'POST',
      body: new URLSearchParams([
        ['request', request],
        ['decision', 'approve'],
        ['access', 'labels'],
        ['labels', 'eng'],
      ]).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    });
    assert.equal(answer.status, 302);
    q.set('redirect_uri', 'https://app.example/cb');
    const again = await (await alice.request(`/oauth/authorize?${q}`, { headers: { accept: 'text/html' } })).text();
    assert.match(again, /<input type="radio" name="access" value="labels" checked/);
    assert.doesNotMatch(again, /<input type="radio" name="access" value="all" checked/);
    assert.match(again, /<input type="checkbox" name="labels" value="eng" checked/);
    assert.doesNotMatch(again, /<input type="checkbox" name="labels" value="finance" checked/);
    // The person presses Allow without changing anything: the restriction stays.
    const url = new URL(`${s.url}/oauth/authorize?${q}`);
    await consentAs(alice, url);
    assert.equal((await grantOf(client.client_id)).labels, 'eng');
  });

  test("a confidential client's Basic credentials on /oauth/token and /oauth/revoke never reach the bearer channel", async () => {
    const { client, secret } = await registered({ token_endpoint_auth_method: 'client_secret_basic' });
    const before = await scrape(metricsUrl);
    logLines.length = 0;
    const tokens = await exchange(client, await codeFor(client), oauth.ClientSecretBasic(secret!));
    const refreshed = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, oauth.ClientSecretBasic(secret!), tokens.refresh_token!, insecure),
    );
    await oauth.processRevocationResponse(
      await oauth.revocationRequest(as, client, oauth.ClientSecretBasic(secret!), refreshed.refresh_token!, insecure),
    );
    const wrong = await fetch(as.token_endpoint!, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${client.client_id}:wrong`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'svcr_x' }),
    });
    assert.equal(wrong.status, 401);
    const after = await scrape(metricsUrl);
    for (const outcome of ['malformed', 'invalid', 'ok']) {
      assert.equal(
        after.value('svc_auth_outcomes_total', { channel: 'token', outcome }),
        before.value('svc_auth_outcomes_total', { channel: 'token', outcome }),
        outcome,
      );
    }
    const lines = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.event === 'request' && String(l.path).startsWith('/oauth/'));
    assert.ok(lines.some((l) => l.path === '/oauth/token') && lines.some((l) => l.path === '/oauth/revoke'), 'the requests were logged');
    for (const l of lines.filter((l) => l.path !== '/oauth/authorize')) assert.equal(l.rejected, undefined, JSON.stringify(l));
    assert.doesNotMatch(logLines.join('\n'), new RegExp(secret!), 'the secret is never logged');
  });

  test('registration: a generous rate per address, and a cap on never-used clients with the oldest forgotten first', async () => {
    const reg = (i: number, localAddress?: string) =>
      rawRequest(`${s.url}/oauth/register`, ['POST /oauth/register HTTP/1.1', 'Content-Type: application/json'], {
        body: JSON.stringify({ client_name: `office ${i}`, redirect_uris: ['https://claude.ai/api/mcp/auth_callback'] }),
        ...(localAddress ? { localAddress } : {}),
      });
    // A whole office onboarding behind one address (claude.ai registers from its own servers).
    for (let i = 0; i < 60; i++) assert.equal((await reg(i, '127.0.0.2')).status, 201, `registration ${i}`);
    // The cap: fill it with never-used clients past the authorization window (an hour old by svc's clock), one
    // used client among them.
    const now = clock.now();
    await s.database.write(async (tx) => {
      const rows = Array.from({ length: MAX_UNUSED_CLIENTS }, (_, i) => ({
        id: `oc_old${String(i).padStart(4, '0')}`,
        kind: 'dynamic',
        name: `old ${i}`,
        redirectUris: JSON.stringify([REDIRECT]),
        authMethod: 'none',
        createdAt: now - 3_600_000 + i,
      }));
      for (let i = 0; i < rows.length; i += 200) await tx.insert(oauthClients).values(rows.slice(i, i + 200));
      await tx.insert(oauthClients).values({
        id: 'oc_used',
        kind: 'dynamic',
        name: 'used',
        redirectUris: JSON.stringify([REDIRECT]),
        authMethod: 'none',
        createdAt: now - 7_200_000,
        lastUsedAt: now - 7_000_000,
      });
    });
    assert.equal((await reg(1000, '127.0.0.3')).status, 201);
    // Never used: no token exchanged and no grant (a client someone consented to is not forgotten, code redeemed or not).
    const neverUsed = and(
      isNull(oauthClients.lastUsedAt),
      sql`NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = ${oauthClients.id})`,
    );
    const unused = (await s.database.db.select({ n: count() }).from(oauthClients).where(neverUsed).get())!.n;
    assert.equal(unused, MAX_UNUSED_CLIENTS);
    const ids = new Set((await s.database.db.select({ id: oauthClients.id }).from(oauthClients).all()).map((r) => r.id));
    assert.ok(!ids.has('oc_old0000'), 'the oldest never-used client was forgotten');
    assert.ok(ids.has('oc_old0999') && ids.has('oc_used'), 'newer and used clients stay');
  });

  test("an app's own sign-out (its refresh token revoked at /oauth/revoke) ends the grant, which leaves Connected apps", async () => {
    const connected = async () =>
      ((await (await alice.request('/auth/grants', { headers: { accept: 'application/json' } })).json()) as { client_id: string }[]).map(
        (g) => g.client_id,
      );
    const revoke = async (client: oauth.Client, token: string) => {
      const res = await oauth.revocationRequest(as, client, oauth.None(), token, insecure);
      await oauth.processRevocationResponse(res);
    };
    const signedOut: string[] = [];
    // Two sign-in and sign-out cycles, as Claude Code makes them: a new registration each time.
    for (let cycle = 0; cycle < 2; cycle++) {
      const { client } = await registered({ client_name: `Claude Code ${cycle}` });
      signedOut.push(client.client_id);
      const signedIn = await exchange(client, await codeFor(client));
      const rotated = await refresh(client, signedIn.refresh_token!);
      assert.ok((await connected()).includes(client.client_id));
      await revoke(client, rotated.refresh_token!);
      assert.equal(await works(rotated.access_token), false, 'its access token ends with it');
      assert.ok(!(await connected()).includes(client.client_id), `cycle ${cycle}: the app left Connected apps`);
      assert.notEqual((await grantOf(client.client_id)).revokedAt, null);
    }
    // A grant with another live family (the app signed in on a second device), or a code not yet redeemed, stays.
    const { client } = await registered({ client_name: 'two devices' });
    const laptop = await exchange(client, await codeFor(client));
    const desktop = await exchange(client, await codeFor(client));
    const pending = await codeFor(client);
    await revoke(client, laptop.refresh_token!);
    assert.equal(await works(laptop.access_token), false);
    assert.equal(await works(desktop.access_token), true, "the other device's family lives on");
    assert.ok((await connected()).includes(client.client_id));
    await revoke(client, desktop.refresh_token!);
    assert.equal((await grantOf(client.client_id)).revokedAt, null, 'a code still waits to be redeemed');
    const last = await exchange(client, pending);
    await revoke(client, last.refresh_token!);
    signedOut.push(client.client_id);
    assert.ok(!(await connected()).includes(client.client_id), 'then the last sign-out ends it');
    // Revoking an access token alone ends that token, not the grant; an unknown token is answered 200 as well.
    const { client: other } = await registered({ client_name: 'access only' });
    const issued = await exchange(other, await codeFor(other));
    await revoke(other, issued.access_token);
    assert.equal(await works(issued.access_token), false);
    assert.ok((await connected()).includes(other.client_id));
    await revoke(other, 'svcr_unknown');
    const ended = (await s.database.db.select().from(audit).where(eq(audit.action, 'oauth.grant_end')).all()).filter((e) =>
      signedOut.includes(e.target!),
    );
    assert.deepEqual(
      ended.map((e) => [e.target, e.actor, e.via]),
      signedOut.map((id) => [id, 'alice', 'oauth']),
      'each sign-out that ended a grant is audited',
    );
  });

  // Last: it moves the clock past the browsers' sessions.
  test('a code, an access token and a refresh token each end at their own time by the server clock', async () => {
    const { client } = await registered();
    const late = await codeFor(client);
    clock.advance(10 * 60_000);
    await assert.rejects(() => exchange(client, late), invalidGrant, 'a code lives ten minutes');
    const first = await exchange(client, await codeFor(client));
    assert.equal(await works(first.access_token), true);
    clock.advance(3600_000);
    assert.equal(await works(first.access_token), false, 'past access_ttl (1h)');
    const next = await refresh(client, first.refresh_token!);
    assert.equal(await works(next.access_token), true, 'the refresh token outlives its access token');
    clock.advance(30 * DAY);
    await assert.rejects(() => refresh(client, next.refresh_token!), invalidGrant, 'past refresh_ttl (30d)');
    assert.equal(await works(next.access_token), false);
  });
});
