// Enterprise-managed authorization (CONTRACT §7.1) against a real identity provider: oidc-provider with RFC 8693
// token exchange issuing ID-JAGs signed by its own key. An agent signs in at the provider, exchanges its ID token
// for an ID-JAG for svc, exchanges that at svc's token endpoint, and reads through the MCP SDK client. Then every
// assertion svc must refuse is tried, each checked to create nothing.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { count, eq } from 'drizzle-orm';
import { exportSPKI, generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { startProvider, Agent, CLIENT_ID, CLIENT_SECRET, type TestProvider } from './helpers/oidc-provider.ts';
import { ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE, TOKEN_EXCHANGE } from './helpers/id-jag.ts';
import { freePort, DEFAULT_AUTH } from './helpers/workspace.ts';
import { bearer } from './helpers/http.ts';
import { putItem } from '../src/store/items.ts';
import { claimAssertion, USED_ASSERTION_KEPT_MS } from '../src/store/oauth-enterprise.ts';
import { oauthAssertions, oauthGrants, tokens, users } from '../src/db/schema.ts';
import { loadConfig } from '../src/config/load.ts';
import { startServer } from '../src/server.ts';
import { silentLogger } from '../src/log.ts';
import { itemRecord } from './helpers/records.ts';

const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const AGENT = {
  client_id: 'agent',
  client_secret: 'agent-secret-at-the-idp-0123456789',
  redirect_uris: ['http://127.0.0.1:9/agent-callback'],
};
const AT_SVC = 'agent-at-svc';

/** `uidClaim`: the enterprise block's own uid_claim, the only claim that may vouch for a pre-provisioned uid. */
function enterpriseAuth(issuer: string, baseUrl: string, jit: boolean, uidClaim = 'employee_id'): string {
  return `${DEFAULT_AUTH}oidc
    enabled true
    issuer ${issuer}
    client_id ${CLIENT_ID}
    client_secret_env SVC_OIDC_CLIENT_SECRET
    redirect_url ${baseUrl}/oidc/callback
    jit false
    uid_claim employee_id
groups
    enabled true
    map
        idp-eng eng
oauth
    enabled true
    enterprise
        issuer ${issuer}
        jit ${jit}
        default_acl staff
        uid_claim ${uidClaim}
`;
}

describe('enterprise-managed authorization with an ID-JAG from oidc-provider', () => {
  let s: TestServer;
  let idp: TestProvider;
  let secret = '';
  before(async () => {
    const idpPort = await freePort();
    const issuer = `http://127.0.0.1:${idpPort}`;
    s = await startTestServer({
      env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
      auth: ({ baseUrl }) => enterpriseAuth(issuer, baseUrl, false),
    });
    idp = await startProvider({
      port: idpPort,
      redirectUris: [`${s.url}/oidc/callback`],
      extraClients: [AGENT],
      idJag: { clientIds: { [AGENT.client_id]: AT_SVC } },
    });
    idp.accounts.set('carol-sub', { email: 'carol@corp.test', preferred_username: 'carol', name: 'Carol' });
    idp.accounts.set('stranger-sub', { email: 'stranger@corp.test', preferred_username: 'stranger' });
    await s.addUser({ uid: 'carol', email: 'carol@corp.test', labels: 'eng' });
    await s.addUser({ uid: 'boss', email: 'boss@corp.test', labels: 'finance', admin: true });
    for (const [id, labels] of [
      ['open', ''],
      ['eng/plan', 'eng'],
      ['fin/q1', 'finance'],
    ] as const) {
      await s.database.write((tx) => putItem(tx, id, itemRecord({ title: `${id} plan`, text: `the ${id} plan`, labels })));
    }
    const added = await s.ws.svc([
      'oauth',
      'client',
      'add',
      'Agent',
      '--redirect-uri',
      'http://127.0.0.1:9/cb',
      '--id',
      AT_SVC,
      '--secret',
    ]);
    assert.equal(added.code, 0, added.stderr);
    secret = /^client_secret: (\S+)/m.exec(added.stdout)![1]!;
    assert.equal(
      (await s.ws.svc(['oauth', 'client', 'add', 'Other', '--redirect-uri', 'http://127.0.0.1:9/cb', '--id', 'other-at-svc'])).code,
      0,
    );
  });
  after(async () => {
    await s?.stop();
    await idp?.stop();
  });

  const counts = async () => ({
    users: (await s.database.db.select({ n: count() }).from(users).get())!.n,
    tokens: (await s.database.db.select({ n: count() }).from(tokens).get())!.n,
    grants: (await s.database.db.select({ n: count() }).from(oauthGrants).get())!.n,
  });

  /** The agent's side at the provider: sign in, then exchange the ID token for an ID-JAG addressed to svc. */
  async function idJagFor(login: string, extra: Record<string, string> = {}): Promise<string> {
    const idToken = await idp.obtainIdToken({
      clientId: AGENT.client_id,
      clientSecret: AGENT.client_secret,
      redirectUri: AGENT.redirect_uris[0]!,
      nonce: 'n',
      login,
    });
    const res = await fetch(`${idp.issuer}/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${AGENT.client_id}:${AGENT.client_secret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        grant_type: TOKEN_EXCHANGE,
        requested_token_type: ID_JAG_TOKEN_TYPE,
        subject_token: idToken,
        subject_token_type: ID_TOKEN_TYPE,
        audience: s.url,
        resource: `${s.url}/oauth/mcp`,
        scope: 'mcp',
        ...extra,
      }),
    });
    const body = (await res.json()) as { access_token?: string; issued_token_type?: string };
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.issued_token_type, ID_JAG_TOKEN_TYPE);
    return body.access_token!;
  }

  /** The agent's side at svc: the jwt-bearer grant, authenticated as a confidential client (or as `clientId`). */
  async function exchange(
    url: string,
    assertion: string,
    client: { id: string; secret?: string } = { id: AT_SVC, secret },
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const auth: Record<string, string> = client.secret
      ? { authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}` }
      : {};
    const res = await fetch(`${url}/oauth/token`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: JWT_BEARER, assertion, ...(client.secret ? {} : { client_id: client.id }) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  async function refused(assertion: string, pattern: RegExp, what: string, client?: { id: string; secret?: string }): Promise<void> {
    const before = await counts();
    const r = await exchange(s.url, assertion, client);
    assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error, 'invalid_grant', what);
    assert.match(String(r.body.error_description), pattern, what);
    assert.deepEqual(await counts(), before, `${what}: nothing created`);
  }

  /** The MCP SDK client on /oauth/mcp with an access token from svc. */
  async function withMcp(token: string, use: (client: Client) => Promise<void>): Promise<void> {
    const client = new Client({ name: 'enterprise-agent', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/oauth/mcp`), { requestInit: { headers: bearer(token) } }));
    try {
      await use(client);
    } finally {
      await client.close();
    }
  }

  /** Claims as the provider would issue them for carol, changed by `over`. */
  const claims = (over: JWTPayload = {}): JWTPayload => {
    const now = Math.floor(Date.now() / 1000);
    return {
      iss: idp.issuer,
      sub: 'carol-sub',
      aud: s.url,
      client_id: AT_SVC,
      jti: `jti-${Math.random()}`,
      iat: now,
      exp: now + 120,
      resource: `${s.url}/oauth/mcp`,
      ...over,
    };
  };

  test('metadata advertises the grant and the ID-JAG profile', async () => {
    const meta = (await (await fetch(`${s.url}/.well-known/oauth-authorization-server`)).json()) as {
      grant_types_supported: string[];
      authorization_grant_profiles_supported: string[];
    };
    assert.ok(meta.grant_types_supported.includes(JWT_BEARER));
    assert.deepEqual(meta.authorization_grant_profiles_supported, ['urn:ietf:params:oauth:grant-profile:id-jag']);
  });

  test('an agent signed in at the provider gets an svc token for carol and reads exactly her documents', async () => {
    const jag = await idJagFor('carol-sub');
    const r = await exchange(s.url, jag);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(Object.keys(r.body).sort(), ['access_token', 'expires_in', 'scope', 'token_type']);
    assert.deepEqual([r.body.token_type, r.body.scope, r.body.expires_in], ['Bearer', 'mcp', 3600]);
    await withMcp(String(r.body.access_token), async (client) => {
      const found = (await client.callTool({ name: 'search', arguments: { query: 'plan', limit: 50 } })).structuredContent as {
        results: { id: string }[];
      };
      assert.deepEqual(found.results.map((x) => x.id).sort(), ['eng/plan', 'open']);
      const who = (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as {
        uid: string;
        scopes: string[];
        via: string;
      };
      assert.deepEqual([who.uid, who.via, who.scopes], ['carol', 'token', ['mcp']]);
    });
    // Only mcp: the token reaches nothing else.
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(String(r.body.access_token)) })).status, 403);
    const audit = await s.ws.svc(['audit', 'list', '--user', 'carol', '--json']);
    assert.ok(
      (JSON.parse(audit.stdout) as { action: string; target: string }[]).some((e) => e.action === 'oauth.assertion' && e.target === AT_SVC),
      audit.stdout,
    );
  });

  test('a client registers itself for the jwt-bearer grant, beside the others or alone, and exchanges an assertion', async () => {
    const register = (body: Record<string, unknown>) =>
      fetch(`${s.url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const both = await register({
      client_name: 'Enterprise agent',
      redirect_uris: ['http://127.0.0.1:9/cb'],
      grant_types: ['authorization_code', 'refresh_token', JWT_BEARER],
    });
    const made = (await both.json()) as { client_id: string; grant_types: string[] };
    assert.equal(both.status, 201, JSON.stringify(made));
    assert.deepEqual(made.grant_types, ['authorization_code', 'refresh_token', JWT_BEARER]);
    const alone = await register({ client_name: 'Headless agent', grant_types: [JWT_BEARER] });
    const headless = (await alone.json()) as { client_id: string; grant_types: string[]; redirect_uris: string[] };
    assert.equal(alone.status, 201, JSON.stringify(headless));
    assert.deepEqual([headless.grant_types, headless.redirect_uris], [[JWT_BEARER], []]);
    for (const client of [made.client_id, headless.client_id]) {
      const r = await exchange(s.url, await idp.idJag!.sign(claims({ client_id: client })), { id: client });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    // A grant svc does not serve, and a redirect-based grant without redirect URIs, are still refused.
    assert.equal((await register({ redirect_uris: ['http://127.0.0.1:9/cb'], grant_types: ['password'] })).status, 400);
    assert.equal((await register({ grant_types: ['authorization_code', JWT_BEARER] })).status, 400);
  });

  test('refused, each as invalid_grant, creating nothing', async () => {
    await refused(await idp.idJag!.sign(claims({ iss: 'http://127.0.0.1:1/elsewhere' })), /iss/, 'another issuer');
    const stranger = await generateKeyPair('RS256', { extractable: true });
    await refused(
      await new SignJWT(claims())
        .setProtectedHeader({ alg: 'RS256', kid: 'enterprise-idp-1', typ: 'oauth-id-jag+jwt' })
        .sign(stranger.privateKey),
      /signature/,
      'a key the provider does not publish, same kid',
    );
    await refused(
      await new SignJWT(claims())
        .setProtectedHeader({ alg: 'RS256', kid: 'another-kid', typ: 'oauth-id-jag+jwt' })
        .sign(stranger.privateKey),
      /does not publish/,
      'an unknown kid',
    );
    const unsecured = `${[{ alg: 'none', typ: 'oauth-id-jag+jwt' }, claims()].map((part) => Buffer.from(JSON.stringify(part)).toString('base64url')).join('.')}.`;
    await refused(unsecured, /asymmetric|well-formed/, 'alg none');
    const publicPem = await exportSPKI(
      (await import('node:crypto')).createPublicKey({ key: idp.idJag!.privateJwk as never, format: 'jwk' }) as never,
    );
    const hs = await new SignJWT(claims())
      .setProtectedHeader({ alg: 'HS256', kid: 'enterprise-idp-1', typ: 'oauth-id-jag+jwt' })
      .sign(new TextEncoder().encode(publicPem));
    await refused(hs, /asymmetric/, 'HS256 keyed with the public key');
    await refused(await idp.idJag!.sign(claims(), { typ: 'JWT' }), /typ/, 'wrong typ');
    await refused(await idp.idJag!.sign(claims({ aud: 'https://other.example' })), /aud/, 'wrong aud');
    await refused(await idp.idJag!.sign(claims({ client_id: 'other-at-svc' })), /another client/, 'a client_id of another client');
    await refused(await idp.idJag!.sign(claims()), /another client/, 'presented by another (public) client', { id: 'other-at-svc' });
    await refused(await idp.idJag!.sign(claims({ resource: 'https://other.example/mcp' })), /another resource/, 'another resource');
    const past = Math.floor(Date.now() / 1000) - 600;
    await refused(await idp.idJag!.sign(claims({ iat: past, exp: past + 120 })), /expired/, 'expired');
    await refused(await idp.idJag!.sign(claims({ exp: Math.floor(Date.now() / 1000) + 3600 })), /longer than 300/, 'too long-lived');
    await refused(
      await idp.idJag!.sign(
        claims({ sub: 'stranger-sub', preferred_username: 'stranger', email: 'stranger@corp.test', email_verified: true }),
      ),
      /not set up/,
      'an unknown user with jit off',
    );
    await refused(await idp.idJag!.sign(claims({ aud: [s.url, 'https://other.example'] })), /only audience/, 'svc among several audiences');
    const soon = Math.floor(Date.now() / 1000) + 30;
    await refused(await idp.idJag!.sign(claims({ iat: soon, exp: soon - 10 })), /expires before/, 'exp before iat');
    await refused(await idp.idJag!.sign(claims({ iat: soon, exp: soon })), /expires before/, 'exp equal to iat');
    const noClient = claims();
    delete noClient.client_id;
    await refused(await idp.idJag!.sign(noClient), /client_id/, 'no client_id');
  });

  test('the uid claim that vouches for a pre-provisioned user is the one configured, not a name the person may choose', async () => {
    // The enterprise block names employee_id; preferred_username (editable by its users at some providers) must
    // not link anyone to the unclaimed admin account "boss".
    const mallory = { sub: 'mallory-sub', email: 'mallory@corp.test', email_verified: true };
    await refused(
      await idp.idJag!.sign(claims({ ...mallory, preferred_username: 'boss' })),
      /not set up/,
      'preferred_username naming another account',
    );
    const boss = await s.database.db.select({ n: count() }).from(users).where(eq(users.uid, 'boss')).get();
    assert.equal(boss!.n, 1);
    const linked = await exchange(s.url, await idp.idJag!.sign(claims({ sub: 'boss-sub', employee_id: 'boss', email: 'boss@corp.test' })));
    assert.equal(linked.status, 200, 'the configured claim does vouch');
    await withMcp(String(linked.body.access_token), async (client) => {
      const who = (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string };
      assert.equal(who.uid, 'boss');
    });
  });

  test('a replayed assertion is refused, also by a second instance on the same database', async () => {
    const jag = await idJagFor('carol-sub');
    assert.equal((await exchange(s.url, jag)).status, 200);
    await refused(jag, /used already/, 'replay on the same instance');
    const port = await freePort();
    const text = readFileSync(s.ws.configPath, 'utf8').replace(`listen = 127.0.0.1:${s.ws.port}`, `listen = 127.0.0.1:${port}`);
    const second = await startServer(loadConfig(text, s.ws.env, { mode: 'serve' }), silentLogger);
    try {
      const again = await idJagFor('carol-sub');
      // Both instances at once: exactly one exchange of a fresh assertion wins.
      const both = await Promise.all([exchange(s.url, again), exchange(`http://127.0.0.1:${port}`, again)]);
      assert.deepEqual(both.map((r) => r.status).sort(), [200, 400]);
      const r = await exchange(`http://127.0.0.1:${port}`, jag);
      assert.equal(r.status, 400);
      assert.match(String(r.body.error_description), /used already/);
    } finally {
      await second.stop();
    }
    assert.ok((await s.database.db.select({ n: count() }).from(oauthAssertions).get())!.n >= 2);
  });

  test('a used assertion stays remembered past its expiry, so an exchange that judged it a moment earlier finds it used', async () => {
    // As two requests (or two instances with clocks a little apart) would: one past J's expiry clears old records,
    // then one that checked J just before its expiry claims it.
    const issuer = 'https://idp.example';
    const expiry = Date.now() + 60_000;
    const claim = (jti: string, expiresAt: number, now: number) =>
      s.database.write((tx) => claimAssertion(tx, issuer, jti, expiresAt, now));
    assert.equal(await claim('window-j', expiry, expiry - 5000), true, 'first use');
    assert.equal(await claim('window-k', expiry + 60_000, expiry + 1000), true, 'another assertion, after J expired');
    assert.equal(await claim('window-j', expiry, expiry - 1000), false, 'J again: still used');
    assert.equal(await claim('window-l', expiry + 600_000, expiry + USED_ASSERTION_KEPT_MS + 1000), true);
    assert.equal(await claim('window-j', expiry, expiry + USED_ASSERTION_KEPT_MS + 1000), true, 'long expired: forgotten');
  });

  test("an app that also signs in by browser: one installation's sign-out does not end the grant its assertions stand on", async () => {
    const reg = await fetch(`${s.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Two ways in',
        redirect_uris: ['http://127.0.0.1:9/cb'],
        grant_types: ['authorization_code', 'refresh_token', JWT_BEARER],
      }),
    });
    const app = ((await reg.json()) as { client_id: string }).client_id;
    // One installation exchanges assertions for carol, headless.
    const carolClaims = () => claims({ client_id: app, email: 'carol@corp.test', email_verified: true });
    const headless = await exchange(s.url, await idp.idJag!.sign(carolClaims()), { id: app });
    assert.equal(headless.status, 200, JSON.stringify(headless.body));
    // Another signs carol in through the browser, gets a refresh token, and later signs itself out.
    const browser = new Agent();
    assert.equal((await browser.signIn(s.url, 'carol-sub')).res.status, 303);
    const verifier = randomBytes(32).toString('base64url');
    const q = new URLSearchParams({
      client_id: app,
      redirect_uri: 'http://127.0.0.1:9/cb',
      response_type: 'code',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    });
    const consent = await (await browser.send(`${s.url}/oauth/authorize?${q}`, { method: 'GET', headers: { accept: 'text/html' } })).text();
    const request = /name="request" value="([^"]+)"/.exec(consent)?.[1];
    assert.ok(request, consent);
    const allowed = await browser.send(`${s.url}/oauth/authorize`, {
      method: 'POST',
      headers: { origin: s.url, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      body: new URLSearchParams({ request, decision: 'approve', access: 'all' }).toString(),
    });
    const code = new URL(allowed.headers.get('location')!).searchParams.get('code')!;
    const tokens = (await (
      await fetch(`${s.url}/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          client_id: app,
          code,
          redirect_uri: 'http://127.0.0.1:9/cb',
          code_verifier: verifier,
        }),
      })
    ).json()) as { refresh_token: string };
    const revoked = await fetch(`${s.url}/oauth/revoke`, {
      method: 'POST',
      body: new URLSearchParams({ client_id: app, token: tokens.refresh_token }),
    });
    assert.equal(revoked.status, 200);
    // The headless installation's token still works, and so do its next exchanges.
    await withMcp(String(headless.body.access_token), async (client) => {
      const who = (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string };
      assert.equal(who.uid, 'carol');
    });
    assert.equal((await exchange(s.url, await idp.idJag!.sign(carolClaims()), { id: app })).status, 200);
  });

  test('carol sees the app under Connected apps; revoking it ends its token and stops further exchanges', async () => {
    const first = await exchange(s.url, await idJagFor('carol-sub'));
    assert.equal(first.status, 200);
    const browser = new Agent();
    const signedIn = await browser.signIn(s.url, 'carol-sub');
    assert.equal(signedIn.res.status, 303);
    const grants = (await (await browser.get(`${s.url}/auth/grants`)).json()) as { id: string; client_id: string; client_name: string }[];
    const grant = grants.find((g) => g.client_id === AT_SVC);
    assert.ok(grant, JSON.stringify(grants));
    assert.equal(grant.client_name, 'Agent');
    const page = await (await browser.send(`${s.url}/`, { method: 'GET', headers: { accept: 'text/html' } })).text();
    assert.match(page, /data-grant-id="[^"]+"/);
    const revoke = await browser.send(`${s.url}/auth/grants/${grant.id}/revoke`, {
      method: 'POST',
      headers: { origin: s.url, accept: 'application/json' },
    });
    assert.equal(revoke.status, 200);
    assert.equal(
      (
        await fetch(`${s.url}/oauth/mcp`, {
          method: 'POST',
          headers: {
            ...bearer(String(first.body.access_token)),
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: '{}',
        })
      ).status,
      401,
    );
    await refused(await idJagFor('carol-sub'), /revoked/, 'after the grant was revoked');
    // A refused assertion changes nothing, not even the profile it brings.
    await refused(
      await idp.idJag!.sign(claims({ name: 'Mallory', email: 'mallory@corp.test' })),
      /revoked/,
      'with another name, after the revoke',
    );
    const carol = await s.database.db.select({ name: users.name, email: users.email }).from(users).where(eq(users.uid, 'carol')).get();
    assert.deepEqual(carol, { name: 'Carol', email: 'carol@corp.test' });
  });

  test('a removed user is refused and nothing is made for them', async () => {
    assert.equal((await s.ws.svc(['user', 'remove', 'carol'])).code, 0);
    await refused(await idJagFor('carol-sub'), /not set up/, 'a removed user');
    assert.equal((await s.database.db.select({ n: count() }).from(users).where(eq(users.email, 'carol@corp.test')).get())!.n, 0);
  });
});

/** svc with the [auth] that `auth` gives, oidc-provider as its enterprise identity provider, and the agent's client added. */
async function enterpriseServer(
  auth: (issuer: string, baseUrl: string) => string,
): Promise<{ s: TestServer; idp: TestProvider; issuer: string }> {
  const idpPort = await freePort();
  const issuer = `http://127.0.0.1:${idpPort}`;
  const s = await startTestServer({ env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET }, auth: ({ baseUrl }) => auth(issuer, baseUrl) });
  const idp = await startProvider({
    port: idpPort,
    redirectUris: [`${s.url}/oidc/callback`],
    extraClients: [AGENT],
    idJag: { clientIds: { [AGENT.client_id]: AT_SVC } },
  });
  const added = await s.ws.svc(['oauth', 'client', 'add', 'Agent', '--redirect-uri', 'http://127.0.0.1:9/cb', '--id', AT_SVC]);
  assert.equal(added.code, 0, added.stderr);
  return { s, idp, issuer };
}

describe('enterprise-managed authorization with jit', () => {
  test('an unknown user is provisioned as single sign-on would: default_acl and the group map', async () => {
    const { s, idp, issuer } = await enterpriseServer((issuer, baseUrl) => enterpriseAuth(issuer, baseUrl, true));
    try {
      const now = Math.floor(Date.now() / 1000);
      const jag = await idp.idJag!.sign({
        iss: issuer,
        sub: 'dave-sub',
        aud: s.url,
        client_id: AT_SVC,
        jti: 'dave-1',
        iat: now,
        exp: now + 60,
        email: 'dave@corp.test',
        email_verified: true,
        preferred_username: 'dave',
        groups: ['idp-eng', 'idp-unknown'],
      });
      const res = await fetch(`${s.url}/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: JWT_BEARER, assertion: jag, client_id: AT_SVC }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const listed = JSON.parse((await s.ws.svc(['user', 'list', '--json'])).stdout) as {
        uid: string;
        labels: string[];
        has_password: boolean;
      }[];
      assert.deepEqual(
        listed.find((u) => u.uid === 'dave'),
        { ...listed.find((u) => u.uid === 'dave')!, labels: ['eng', 'staff'], has_password: false },
      );
      // The same jti for another person: refused as a replay, and that person is not provisioned on the way.
      const replay = await idp.idJag!.sign({
        iss: issuer,
        sub: 'erin-sub',
        aud: s.url,
        client_id: AT_SVC,
        jti: 'dave-1',
        iat: now,
        exp: now + 60,
        email: 'erin@corp.test',
        email_verified: true,
        preferred_username: 'erin',
      });
      const again = await fetch(`${s.url}/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: JWT_BEARER, assertion: replay, client_id: AT_SVC }),
      });
      assert.equal(again.status, 400);
      assert.match(await again.text(), /used already/);
      const after = JSON.parse((await s.ws.svc(['user', 'list', '--json'])).stdout) as { uid: string }[];
      assert.deepEqual(after.map((u) => u.uid).sort(), ['dave']);
    } finally {
      await s.stop();
      await idp.stop();
    }
  });
});

describe('an enterprise block without uid_claim', () => {
  // oidc for the same provider names employee_id, or no uid_claim (its default is preferred_username); the enterprise
  // block names none of its own either way.
  const configs = {
    "oidc's employee_id": (auth: string) => auth,
    "oidc's default preferred_username": (auth: string) => auth.replace('    uid_claim employee_id\n', ''),
  };
  for (const [what, oidcClaim] of Object.entries(configs))
    test(`with ${what}: links a pre-provisioned admin only by a verified email, never by a uid claim`, async () => {
      const { s, idp, issuer } = await enterpriseServer((issuer, baseUrl) =>
        oidcClaim(enterpriseAuth(issuer, baseUrl, false).replace(/\n {8}uid_claim employee_id\n$/, '\n')),
      );
      try {
        await s.addUser({ uid: 'boss', email: 'boss@corp.test', admin: true });
        const now = Math.floor(Date.now() / 1000);
        const send = async (over: JWTPayload) => {
          const jag = await idp.idJag!.sign({
            iss: issuer,
            aud: s.url,
            client_id: AT_SVC,
            jti: `j-${Math.random()}`,
            iat: now,
            exp: now + 60,
            ...over,
          });
          const res = await fetch(`${s.url}/oauth/token`, {
            method: 'POST',
            body: new URLSearchParams({ grant_type: JWT_BEARER, assertion: jag, client_id: AT_SVC }),
          });
          return { status: res.status, body: (await res.json()) as Record<string, unknown> };
        };
        const tokenCount = async () => (await s.database.db.select({ n: count() }).from(tokens).get())!.n;
        // Each names boss by a claim no one configured, or by an email the provider does not say it verified.
        for (const claim of [{ preferred_username: 'boss' }, { employee_id: 'boss' }, { email: 'boss@corp.test', email_verified: false }]) {
          const r = await send({ sub: 'mallory-sub', email: 'mallory@corp.test', ...claim });
          assert.equal(r.status, 400, JSON.stringify(claim));
          assert.equal(r.body.error, 'invalid_grant');
          assert.match(String(r.body.error_description), /not set up/);
        }
        assert.equal(await tokenCount(), 0, 'no token was made');
        assert.equal(s.config.auth.oauth!.enterprise!.uidClaim, null);
        const verified = await send({ sub: 'boss-sub', email: 'boss@corp.test', email_verified: true, preferred_username: 'someone' });
        assert.equal(verified.status, 200, JSON.stringify(verified.body));
        const who = await fetch(`${s.url}/oauth/mcp`, {
          method: 'POST',
          headers: {
            ...bearer(String(verified.body.access_token)),
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
        });
        assert.match(await who.text(), /\\"uid\\":\\"boss\\"/);
      } finally {
        await s.stop();
        await idp.stop();
      }
    });
});

describe('enterprise-managed authorization while the identity provider is away', () => {
  test('an exchange is 503 temporarily_unavailable with Retry-After, and creates nothing', async () => {
    const idpPort = await freePort();
    const issuer = `http://127.0.0.1:${idpPort}`;
    // Nothing listens at the issuer: its discovery document, and so its keys, cannot be fetched.
    const s = await startTestServer({
      env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
      auth: ({ baseUrl }) => enterpriseAuth(issuer, baseUrl, true),
    });
    try {
      assert.equal(
        (await s.ws.svc(['oauth', 'client', 'add', 'Agent', '--redirect-uri', 'http://127.0.0.1:9/cb', '--id', AT_SVC])).code,
        0,
      );
      const res = await fetch(`${s.url}/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: JWT_BEARER, assertion: 'eyJhbGciOiJSUzI1NiJ9.e30.sig', client_id: AT_SVC }),
      });
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '30');
      const body = (await res.json()) as { error: string; error_description: string };
      assert.equal(body.error, 'temporarily_unavailable');
      assert.match(body.error_description, /cannot be reached/);
      assert.equal((await s.database.db.select({ n: count() }).from(users).get())!.n, 0);
    } finally {
      await s.stop();
    }
  });
});
