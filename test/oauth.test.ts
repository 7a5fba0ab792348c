// svc as an OAuth 2.1 authorization server (CONTRACT §7), judged by real clients: the MCP SDK client's own OAuth
// support, and oauth4webapi (strict) for the protocol details. The browser step (sign-in and consent) is an HTTP
// user agent with a session.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { count, eq } from 'drizzle-orm';
import * as oauth from 'oauth4webapi';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { DEFAULT_AUTH } from './helpers/workspace.ts';
import { putItem } from '../src/store/items.ts';
import { oauthClients, oauthGrants, tokens } from '../src/db/schema.ts';

import { consentAs, connect, Provider, REDIRECT } from './helpers/oauth-client.ts';
import { itemRecord } from './helpers/records.ts';

const OAUTH = `${DEFAULT_AUTH}oauth\n    enabled true\n    refresh_grace 2s\n`;

/** How /oauth/mcp answers a token: the scope every OAuth access token carries. */
const mcpStatus = async (url: string, token: string) => {
  const r = await fetch(`${url}/oauth/mcp`, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
  });
  await r.body?.cancel();
  return r.status;
};
const whoami = async (client: Client) =>
  (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string; via: string };

describe('OAuth for MCP clients', () => {
  let s: TestServer;
  let alice: Browser;
  before(async () => {
    s = await startTestServer({ auth: OAUTH });
    await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1', labels: 'finance' });
    await s.addUser({ uid: 'bob', email: 'bob@example.com', password: 'bob password 1' });
    await s.database.write((tx) => putItem(tx, 'fin', itemRecord({ title: 'Finance plan', text: 'the finance plan', labels: 'finance' })));
    alice = new Browser(s.url);
    assert.equal((await alice.login('alice', 'alice password 1')).status, 303);
  });
  after(() => s.stop());

  test('metadata: the authorization server and /oauth/mcp are described; /mcp announces nothing; other paths are JSON 404s', async () => {
    const as = (await (await fetch(`${s.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    assert.equal(as.issuer, s.url);
    assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(as.token_endpoint_auth_methods_supported, ['none', 'client_secret_post', 'client_secret_basic']);
    assert.equal(as.authorization_response_iss_parameter_supported, true);
    assert.equal(as.registration_endpoint, `${s.url}/oauth/register`);
    // Enterprise-managed authorization is not configured: neither its grant nor its profile is announced.
    assert.deepEqual(as.grant_types_supported, ['authorization_code', 'refresh_token']);
    assert.equal(as.authorization_grant_profiles_supported, undefined);
    const prm = (await (await fetch(`${s.url}/.well-known/oauth-protected-resource/oauth/mcp`)).json()) as Record<string, unknown>;
    assert.deepEqual(prm, {
      resource: `${s.url}/oauth/mcp`,
      authorization_servers: [s.url],
      scopes_supported: ['mcp'],
      bearer_methods_supported: ['header'],
      resource_name: 'svc',
    });
    for (const path of [
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-protected-resource',
      '/.well-known/openid-configuration',
      '/.well-known/anything',
    ]) {
      const r = await fetch(`${s.url}${path}`);
      assert.equal(r.status, 404, path);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/, path);
    }
    const plain = await fetch(`${s.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{}',
    });
    assert.equal(plain.status, 401);
    assert.equal(plain.headers.get('www-authenticate'), 'Bearer realm="svc"');
    const announced = await fetch(`${s.url}/oauth/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{}',
    });
    assert.equal(announced.status, 401);
    assert.equal(
      announced.headers.get('www-authenticate'),
      `Bearer realm="svc", resource_metadata="${s.url}/.well-known/oauth-protected-resource/oauth/mcp", scope="mcp"`,
    );
  });

  test('the MCP SDK client connects by URL alone: 401, metadata, registration, consent, code, tools/call; refresh; revoke', async () => {
    const provider = new Provider(alice);
    const client = await connect(s.url, provider);
    assert.deepEqual(await whoami(client), { ...(await whoami(client)), uid: 'alice', via: 'token' });
    const found = await client.callTool({ name: 'search', arguments: { query: 'finance plan' } });
    assert.deepEqual(
      (found.structuredContent as { results: { id: string }[] }).results.map((r) => r.id),
      ['fin'],
    );
    assert.equal(provider.redirects.length, 1);
    assert.ok(provider.saved?.refresh_token && provider.saved.expires_in === 3600 && provider.saved.token_type.toLowerCase() === 'bearer');
    await client.close();

    // Listed with its app, not among the personal tokens.
    assert.deepEqual(await (await alice.request('/auth/tokens')).json(), []);
    // The access token works on /mcp as well, like a personal token.
    const mcp = await fetch(`${s.url}/mcp`, {
      method: 'POST',
      headers: {
        ...bearer(provider.saved!.access_token),
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    assert.equal(mcp.status, 200);

    // The access token revoked: the SDK client refreshes by itself, with no new consent.
    const before = provider.saved!;
    const revoked = await fetch(`${s.url}/oauth/revoke`, {
      method: 'POST',
      body: new URLSearchParams({ token: before.access_token, client_id: provider.info!.client_id }),
    });
    assert.equal(revoked.status, 200);
    assert.equal(await mcpStatus(s.url, before.access_token), 401);
    const refreshed = await connect(s.url, provider);
    assert.equal((await whoami(refreshed)).uid, 'alice');
    assert.notEqual(provider.saved!.refresh_token, before.refresh_token, 'rotated');
    assert.equal(provider.redirects.length, 1, 'no new consent');
    await refreshed.close();

    // The grant revoked on the token page ("Connected apps", a plain form): its tokens stop at once, and the
    // refresh token with them.
    const grants = (await (await alice.request('/auth/grants')).json()) as { id: string; client_name: string }[];
    assert.deepEqual(
      grants.map((g) => g.client_name),
      ['SDK test client'],
    );
    const page = await (await alice.request('/', { headers: { accept: 'text/html' } })).text();
    assert.match(page, new RegExp(`<tr data-grant-id="${grants[0]!.id}"><td>SDK test client<div class="muted">self-registered</div></td>`));
    assert.match(page, new RegExp(`<form method="post" action="/auth/grants/${grants[0]!.id}/revoke" class="inline">`));
    const revokedByForm = await alice.request(`/auth/grants/${grants[0]!.id}/revoke`, { form: {}, headers: { accept: 'text/html' } });
    assert.equal(revokedByForm.status, 303);
    assert.deepEqual(await (await alice.request('/auth/grants')).json(), []);
    assert.equal(await mcpStatus(s.url, provider.saved!.access_token), 401);
    const refresh = await fetch(`${s.url}/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: provider.saved!.refresh_token!,
        client_id: provider.info!.client_id,
      }),
    });
    assert.equal(refresh.status, 400);
    assert.equal(((await refresh.json()) as { error: string }).error, 'invalid_grant');
  });

  test('a public loopback client is asked every time (RFC 8252 §8.6), even by the same user; another user is asked too', async () => {
    const provider = new Provider(alice);
    (await connect(s.url, provider)).close();
    const again = new Provider(alice);
    again.info = provider.info;
    const client = await connect(s.url, again);
    assert.equal((await whoami(client)).uid, 'alice');
    await client.close();
    // Someone who knows the client_id sends alice's browser with their own challenge and port: she is asked.
    const hijack = new URL(again.redirects[0]!);
    hijack.searchParams.set('redirect_uri', 'http://127.0.0.1:40999/callback');
    hijack.searchParams.set('code_challenge', createHash('sha256').update('attacker verifier '.repeat(4)).digest('base64url'));
    const page = await alice.request(hijack.pathname + hijack.search, { headers: { accept: 'text/html' } });
    assert.equal(page.status, 200, 'a consent page, not a code');
    assert.equal(page.headers.get('location'), null);
    assert.match(await page.text(), /Allow “SDK test client” to use svc as alice\?/);
    const bob = new Browser(s.url);
    await bob.login('bob', 'bob password 1');
    const asked = await bob.request(again.redirects[0]!.pathname + again.redirects[0]!.search, { headers: { accept: 'text/html' } });
    assert.equal(asked.status, 200);
    assert.match(await asked.text(), /Allow “SDK test client” to use svc as bob\?/);
  });
});

describe('OAuth judged by oauth4webapi', () => {
  let s: TestServer;
  let alice: Browser;
  let as: oauth.AuthorizationServer;
  before(async () => {
    s = await startTestServer({ auth: OAUTH });
    await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
    alice = new Browser(s.url);
    await alice.login('alice', 'alice password 1');
    const issuer = new URL(s.url);
    as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true }),
    );
  });
  after(() => s.stop());
  const insecure = { [oauth.allowInsecureRequests]: true } as const;
  const invalidGrant = (e: unknown) => e instanceof oauth.ResponseBodyError && e.error === 'invalid_grant';

  async function register(body: Record<string, unknown>): Promise<Response> {
    return fetch(as.registration_endpoint!, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  async function authorize(client: oauth.Client, options: { verifier?: string; resource?: string } = {}) {
    const verifier = options.verifier ?? oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: client.client_id,
      redirect_uri: REDIRECT,
      response_type: 'code',
      scope: 'mcp unknown-scope',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      ...(options.resource ? { resource: options.resource } : {}),
    }).toString();
    const back = await consentAs(alice, url);
    return { verifier, state, back };
  }

  test('public client: registration, authorization with iss, PKCE code exchange, refresh rotation with grace, reuse revokes the family', async () => {
    const reg = await oauth.processDynamicClientRegistrationResponse(
      await register({ client_name: 'strict', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }),
    );
    const client: oauth.Client = { client_id: reg.client_id, token_endpoint_auth_method: 'none' };
    const auth = oauth.None();
    const { verifier, state, back } = await authorize(client);
    const params = oauth.validateAuthResponse(as, client, back, state);
    const tokens = await oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(as, client, auth, params, REDIRECT, verifier, insecure),
    );
    assert.equal(tokens.scope, 'mcp', 'unknown scopes dropped');
    assert.equal(tokens.expires_in, 3600);
    const first = tokens.refresh_token!;
    const second = (
      await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, first, insecure))
    ).refresh_token!;
    // A racing process uses the old one within the grace period: once.
    const raced = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, auth, first, insecure),
    );
    assert.ok(raced.access_token);
    // Again, or after the grace period: the whole family is revoked.
    await assert.rejects(
      async () => oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, first, insecure)),
      invalidGrant,
    );
    assert.equal(await mcpStatus(s.url, raced.access_token), 401, "the family's access tokens end too");
    await assert.rejects(
      async () => oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, second, insecure)),
      invalidGrant,
    );
  });

  test('confidential client: the secret is shown once and required, by Basic or in the body', async () => {
    const reg = await oauth.processDynamicClientRegistrationResponse(
      await register({ client_name: 'confidential', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_basic' }),
    );
    assert.match(String(reg.client_secret), /^svcs_/);
    const client: oauth.Client = { client_id: reg.client_id };
    const { verifier, state, back } = await authorize(client);
    const params = oauth.validateAuthResponse(as, client, back, state);
    await assert.rejects(
      async () =>
        oauth.processAuthorizationCodeResponse(
          as,
          client,
          await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic('wrong'), params, REDIRECT, verifier, insecure),
        ),
      (e) => e instanceof oauth.WWWAuthenticateChallengeError && e.status === 401,
    );
    const again = await authorize(client);
    const ok = await oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(
        as,
        client,
        oauth.ClientSecretBasic(String(reg.client_secret)),
        oauth.validateAuthResponse(as, client, again.back, again.state),
        REDIRECT,
        again.verifier,
        insecure,
      ),
    );
    assert.ok(ok.access_token);
  });

  test('a client registered ahead with svc oauth client: its secret once, a working flow, removal ends its tokens', async () => {
    const added = await s.ws.svc(['oauth', 'client', 'add', 'Team bot', '--redirect-uri', REDIRECT, '--id', 'team-bot', '--secret']);
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stdout, /^client_id: team-bot$/m);
    const secret = /^client_secret: (svcs_\S+)/m.exec(added.stdout)![1]!;
    const client: oauth.Client = { client_id: 'team-bot' };
    const a = await authorize(client);
    const issued = await oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(
        as,
        client,
        oauth.ClientSecretPost(secret),
        oauth.validateAuthResponse(as, client, a.back, a.state),
        REDIRECT,
        a.verifier,
        insecure,
      ),
    );
    assert.equal(await mcpStatus(s.url, issued.access_token), 200);
    const listed = JSON.parse((await s.ws.svc(['oauth', 'client', 'list', '--json'])).stdout) as {
      client_id: string;
      kind: string;
      confidential: boolean;
    }[];
    assert.deepEqual(
      listed.find((c) => c.client_id === 'team-bot'),
      { ...listed.find((c) => c.client_id === 'team-bot')!, kind: 'static', confidential: true },
    );
    assert.doesNotMatch(JSON.stringify(listed), /svcs_/, 'no secret is listed');
    assert.equal((await s.ws.svc(['oauth', 'client', 'remove', 'team-bot'])).code, 0);
    assert.equal(await mcpStatus(s.url, issued.access_token), 401);
    const again = await s.ws.svc(['oauth', 'client', 'remove', 'team-bot']);
    assert.equal(again.code, 1);
    const bad = await s.ws.svc(['oauth', 'client', 'add', 'Bad', '--redirect-uri', 'javascript:alert(1)']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /javascript: redirect URIs are refused/);
  });

  test('bad input at the token endpoint: a code used twice (revoking what it issued), a wrong verifier, redirect_uri or resource', async () => {
    const reg = await oauth.processDynamicClientRegistrationResponse(await register({ client_name: 'bad', redirect_uris: [REDIRECT] }));
    const client: oauth.Client = { client_id: reg.client_id, token_endpoint_auth_method: 'none' };
    const exchange = (fields: Record<string, string>) =>
      fetch(as.token_endpoint!, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: 'authorization_code', client_id: client.client_id, ...fields }),
      });
    const code = async () => {
      const a = await authorize(client);
      return { verifier: a.verifier, code: a.back.searchParams.get('code')! };
    };
    let c = await code();
    const good = (await (await exchange({ code: c.code, code_verifier: c.verifier, redirect_uri: REDIRECT })).json()) as {
      access_token: string;
    };
    const replay = await exchange({ code: c.code, code_verifier: c.verifier, redirect_uri: REDIRECT });
    assert.equal(((await replay.json()) as { error: string }).error, 'invalid_grant');
    assert.equal(await mcpStatus(s.url, good.access_token), 401, 'what the first use issued is revoked');
    c = await code();
    assert.equal(
      (
        (await (await exchange({ code: c.code, code_verifier: oauth.generateRandomCodeVerifier(), redirect_uri: REDIRECT })).json()) as {
          error: string;
        }
      ).error,
      'invalid_grant',
    );
    c = await code();
    assert.equal(
      ((await (await exchange({ code: c.code, redirect_uri: REDIRECT })).json()) as { error: string }).error,
      'invalid_grant',
      'no verifier',
    );
    c = await code();
    assert.equal(
      (
        (await (await exchange({ code: c.code, code_verifier: c.verifier, redirect_uri: 'http://127.0.0.1:9/other' })).json()) as {
          error: string;
        }
      ).error,
      'invalid_grant',
    );
    c = await code();
    assert.equal(
      (
        (await (
          await exchange({ code: c.code, code_verifier: c.verifier, redirect_uri: REDIRECT, resource: 'https://elsewhere.example/mcp' })
        ).json()) as { error: string }
      ).error,
      'invalid_target',
    );
    assert.equal(
      ((await (await exchange({ code: 'not-a-code', code_verifier: c.verifier, redirect_uri: REDIRECT })).json()) as { error: string })
        .error,
      'invalid_grant',
    );
    assert.equal(
      (
        await fetch(as.token_endpoint!, {
          method: 'POST',
          body: new URLSearchParams({ grant_type: 'authorization_code', client_id: 'oc_unknown', code: 'x' }),
        })
      ).status,
      401,
    );
  });
});

describe('OAuth authorization requests that must not get a code', () => {
  let s: TestServer;
  let alice: Browser;
  let clientId: string;
  before(async () => {
    s = await startTestServer({ auth: OAUTH });
    await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
    alice = new Browser(s.url);
    await alice.login('alice', 'alice password 1');
    const reg = await fetch(`${s.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'app', redirect_uris: [REDIRECT, 'https://app.example/cb'] }),
    });
    clientId = ((await reg.json()) as { client_id: string }).client_id;
  });
  after(() => s.stop());
  const challenge = createHash('sha256').update(randomBytes(32).toString('base64url')).digest('base64url');
  const authorize = (params: Record<string, string>, who = alice) =>
    who.request(
      `/oauth/authorize?${new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', code_challenge: challenge, code_challenge_method: 'S256', state: 'st', ...params })}`,
      { headers: { accept: 'text/html' } },
    );
  /** An authorization request of the test client with a fresh PKCE verifier, as its app would build it. */
  const pkceRequest = async () => {
    const verifier = oauth.generateRandomCodeVerifier();
    const url = new URL(`${s.url}/oauth/authorize`);
    url.search = new URLSearchParams({
      client_id: clientId,
      redirect_uri: REDIRECT,
      response_type: 'code',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();
    return { verifier, url };
  };
  /** POST /oauth/token as the test client (a public one: no credentials). */
  const tokenEndpoint = (fields: Record<string, string>) =>
    fetch(`${s.url}/oauth/token`, { method: 'POST', body: new URLSearchParams({ client_id: clientId, ...fields }) });
  /** Redeems the code on the redirect `back` with its PKCE verifier. */
  const redeem = (back: URL, verifier: string) =>
    tokenEndpoint({
      grant_type: 'authorization_code',
      code: back.searchParams.get('code')!,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
    });

  test('an unknown client or an unregistered redirect: an error page, never a redirect', async () => {
    for (const params of [
      { client_id: 'oc_nope' },
      { redirect_uri: 'https://evil.example/cb' },
      { redirect_uri: 'http://127.0.0.1:33418/other' },
      { redirect_uri: 'http://evil.example:33418/callback' },
    ] as Record<string, string>[]) {
      const r = await authorize(params);
      assert.equal(r.status, 400, JSON.stringify(params));
      assert.equal(r.headers.get('location'), null);
    }
  });

  test('loopback redirects match on any port, and only on the port; https ones exactly', async () => {
    assert.equal((await authorize({ redirect_uri: 'http://127.0.0.1:50123/callback' })).status, 200);
    assert.equal((await authorize({ redirect_uri: 'https://app.example/cb' })).status, 200);
    assert.equal((await authorize({ redirect_uri: 'https://app.example:8443/cb' })).status, 400);
    // User information or a fragment (even an empty one) never matches a registered loopback redirect: a page, no redirect.
    for (const redirect of [
      'http://evil@127.0.0.1:50123/callback',
      'http://a:b@127.0.0.1:33418/callback',
      'http://@127.0.0.1:50123/callback',
      'http://127.0.0.1:50123/callback#x',
      'http://127.0.0.1:33418/callback#',
      'https://user@app.example/cb',
      // Spellings the URL parser also reads as user information on the loopback host.
      'http:evil.example@127.0.0.1:50123/callback',
      'http:/evil.example@127.0.0.1:50123/callback',
      'http:\\\\evil.example@127.0.0.1:50123/callback',
      ' http://evil.example@127.0.0.1:50123/callback',
    ]) {
      const r = await authorize({ redirect_uri: redirect });
      assert.equal(r.status, 400, redirect);
      assert.equal(r.headers.get('location'), null, redirect);
    }
  });

  test('plain or missing PKCE, another resource, another response type of a self-registered client: a 400 page, never a redirect', async () => {
    for (const redirect of [REDIRECT, 'https://app.example/cb']) {
      for (const params of [
        { code_challenge_method: 'plain' },
        { code_challenge: '' },
        { resource: 'https://elsewhere.example/mcp' },
        { response_type: 'token' },
      ] as Record<string, string>[]) {
        // Signed in or not: the browser is never sent to an address only the app itself vouched for.
        for (const who of [alice, new Browser(s.url)]) {
          const r = await authorize({ ...params, redirect_uri: redirect }, who);
          assert.equal(r.status, 400, JSON.stringify(params));
          assert.equal(r.headers.get('location'), null);
          assert.match(await r.text(), /This app sent a request svc cannot answer/);
        }
      }
    }
  });

  test('the same errors of a client an administrator registered: redirected back with the error, and iss', async () => {
    assert.equal((await s.ws.svc(['oauth', 'client', 'add', 'Vetted', '--redirect-uri', REDIRECT, '--id', 'vetted'])).code, 0);
    for (const [params, error] of [
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ code_challenge: '' }, 'invalid_request'],
      [{ resource: 'https://elsewhere.example/mcp' }, 'invalid_target'],
      [{ response_type: 'token' }, 'unsupported_response_type'],
    ] as const) {
      const r = await authorize({ ...params, client_id: 'vetted' });
      assert.equal(r.status, 302, JSON.stringify(params));
      const back = new URL(r.headers.get('location')!);
      assert.equal(back.origin + back.pathname, REDIRECT);
      assert.equal(back.searchParams.get('error'), error);
      assert.equal(back.searchParams.get('state'), 'st');
      assert.equal(back.searchParams.get('iss'), s.url);
      assert.equal(back.searchParams.get('code'), null);
    }
  });

  test('not signed in: to the login page first; deny: access_denied; a consent posted cross-site: 403, nothing granted', async () => {
    const anonymous = await authorize({}, new Browser(s.url));
    assert.equal(anonymous.status, 303);
    assert.match(anonymous.headers.get('location')!, /^\/login\?next=%2Foauth%2Fauthorize%3F/);
    // The sign-in page lets its form lead back to the app's registered redirect, and to nothing else.
    const csp = async (next: string) =>
      (await fetch(`${s.url}/login?next=${encodeURIComponent(next)}`)).headers.get('content-security-policy')!;
    assert.match(
      await csp(`/oauth/authorize?client_id=${clientId}&redirect_uri=${encodeURIComponent(REDIRECT)}`),
      /form-action 'self' http:\/\/127\.0\.0\.1:33418;/,
    );
    assert.match(await csp(`/oauth/authorize?client_id=${clientId}&redirect_uri=https%3A%2F%2Fevil.example%2Fcb`), /form-action 'self';/);
    assert.match(await csp('/oauth/authorize?client_id=oc_unknown&redirect_uri=https%3A%2F%2Fevil.example%2Fcb'), /form-action 'self';/);
    const page = await (await authorize({})).text();
    const request = /name="request" value="([^"]+)"/.exec(page)![1]!;
    const cross = await alice.request('/oauth/authorize', {
      form: { request, decision: 'approve' },
      origin: 'https://evil.example',
      headers: { accept: 'text/html' },
    });
    assert.equal(cross.status, 403);
    const denied = await alice.request('/oauth/authorize', { form: { request, decision: 'deny' }, headers: { accept: 'text/html' } });
    assert.equal(new URL(denied.headers.get('location')!).searchParams.get('error'), 'access_denied');
    assert.equal((await s.database.db.select({ n: count() }).from(oauthGrants).get())!.n, 0);
    const replayed = await alice.request('/oauth/authorize', { form: { request, decision: 'approve' }, headers: { accept: 'text/html' } });
    assert.equal(replayed.status, 400, 'a request is answered once');
    assert.match((await authorize({})).headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
  });

  test('registration refuses what it cannot trust', async () => {
    const reg = (body: unknown) =>
      fetch(`${s.url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const before = (await s.database.db.select({ n: count() }).from(oauthClients).get())!.n;
    const schemes = [
      'ms-msdt:/id?PCWDiagnostic',
      'search-ms:query=x',
      'vnd.ms-excel:ofe|u|https://x.example/a.xls',
      'jar:https://x.example/a.jar!/',
      'view-source:https://x.example/',
      'mailto:a@x.example',
      'tel:+1555',
      'sms:+1555',
      'chrome://settings',
      'filesystem:https://x.example/temporary/a',
      'ms-settings:',
      'ftp://x.example/cb',
      'wss://x.example/cb',
      'myapp://cb',
      'x-web-search.x:/q',
    ];
    for (const uri of [
      'javascript:alert(1)',
      'data:text/html,x',
      'file:///etc/passwd',
      'http://evil.example/cb',
      'http://127.0.0.2/cb',
      'http://localhost.evil.example/cb',
      'https://user:pw@app.example/cb',
      'https://app.example/cb#frag',
      'http://user@127.0.0.1:3000/cb',
      'http://@[::1]/cb',
      'http://localhost/cb#',
      'http://127.0.0.1/cb#x',
      'http:evil@127.0.0.1/cb',
      'http:/evil@127.0.0.1/cb',
      'http:\\\\evil@localhost/cb',
      ' http://127.0.0.1/cb',
      'not a uri',
      ...schemes,
    ]) {
      const r = await reg({ redirect_uris: [REDIRECT, uri] });
      assert.equal(r.status, 400, uri);
      assert.equal(((await r.json()) as { error: string }).error, 'invalid_redirect_uri', uri);
    }
    for (const name of [
      'Good\u202Eppa.exe',
      'Zero\u200Bwidth',
      'Iso\u2066late',
      'Tab\there',
      'svc',
      'SVC',
      'ѕvс',
      'ｓｖｃ',
      ' s v c ',
      'S.V.C',
    ]) {
      const r = await reg({ client_name: name, redirect_uris: [REDIRECT] });
      assert.equal(r.status, 400, JSON.stringify(name));
      assert.equal(((await r.json()) as { error: string }).error, 'invalid_client_metadata', name);
    }
    assert.equal(
      ((await (await reg({ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'private_key_jwt' })).json()) as { error: string }).error,
      'invalid_client_metadata',
    );
    assert.equal(
      ((await (await reg({ redirect_uris: [REDIRECT], application_type: 'browser' })).json()) as { error: string }).error,
      'invalid_client_metadata',
    );
    // The jwt-bearer grant only where enterprise-managed authorization is configured (not here).
    const jwtBearer = await reg({
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'urn:ietf:params:oauth:grant-type:jwt-bearer'],
    });
    assert.equal(((await jwtBearer.json()) as { error: string }).error, 'invalid_client_metadata');
    assert.equal((await s.database.db.select({ n: count() }).from(oauthClients).get())!.n, before, 'nothing refused was kept');
    // Cursor's mix of schemes is fine, and so is an app's own reverse-domain scheme; application_type (SEP-837) too.
    assert.equal(
      (
        await reg({
          client_name: 'Cursor',
          redirect_uris: [
            'cursor://anysphere.cursor-retrieval/oauth/callback',
            'https://www.cursor.com/oauth/callback',
            'http://localhost:8787/callback',
          ],
        })
      ).status,
      201,
    );
    const native = await reg({
      client_name: 'Native app',
      application_type: 'native',
      redirect_uris: ['com.example.app:/oauth/cb', 'http://127.0.0.1/cb'],
    });
    assert.equal(native.status, 201);
    assert.equal(((await native.json()) as { application_type: string }).application_type, 'native');
  });

  test("a name that holds svc's name among other words registers (Claude Code's for a server added as svc); svc's own does not", async () => {
    // What Claude Code sends for `claude mcp add --transport http svc …` (README), its client name from the server's.
    const claudeCode = (client_name: string) =>
      fetch(`${s.url}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          client_name,
          redirect_uris: ['http://localhost:54212/callback'],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        }),
      });
    const clients = async () => (await s.database.db.select({ n: count() }).from(oauthClients).get())!.n;
    const before = await clients();
    const refused = await claudeCode('svc');
    assert.equal(refused.status, 400);
    assert.deepEqual(await refused.json(), {
      error: 'invalid_client_metadata',
      error_description: 'client_name: an app may not call itself svc',
    });
    assert.equal(await clients(), before, 'nothing created');
    for (const name of ['Claude Code (svc)', 'svc helper', 'SVC admin', 'my-svc']) {
      const r = await claudeCode(name);
      assert.equal(r.status, 201, name);
      assert.equal(((await r.json()) as { client_name: string }).client_name, name);
    }
    assert.equal(await clients(), before + 4);
  });

  test('consent can restrict what the app reads: the grant keeps the labels and every token issued under it carries them', async () => {
    await s.addUser({ uid: 'carl', email: 'carl@example.com', password: 'carl password 1', labels: 'eng, finance' });
    await s.database.write(async (tx) => {
      await putItem(tx, 'eng-doc', itemRecord({ title: 'Eng', text: 'shared words', labels: 'eng' }));
      await putItem(tx, 'fin-doc', itemRecord({ title: 'Fin', text: 'shared words', labels: 'finance' }));
    });
    const carl = new Browser(s.url);
    await carl.login('carl', 'carl password 1');
    const { verifier, url } = await pkceRequest();
    const page = await (await carl.request(`${url.pathname}${url.search}`, { headers: { accept: 'text/html' } })).text();
    assert.match(page, /<input type="checkbox" name="labels" value="finance"\/>/);
    const request = /name="request" value="([^"]+)"/.exec(page)![1]!;
    const mixed = await carl.request('/oauth/authorize', {
      method: 'POST',
      body: new URLSearchParams([
        ['request', request],
        ['decision', 'approve'],
        ['access', 'all'],
        ['labels', 'eng'],
      ]).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    });
    assert.equal(mixed.status, 400, 'checked labels with "everything" chosen is refused');
    const answer = await carl.request('/oauth/authorize', {
      method: 'POST',
      body: new URLSearchParams([
        ['request', request],
        ['decision', 'approve'],
        ['access', 'labels'],
        ['labels', 'finance'],
      ]).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    });
    assert.equal(answer.status, 302, 'the request was still open after the refused answer');
    const code = new URL(answer.headers.get('location')!).searchParams.get('code')!;
    const exchange = (fields: Record<string, string>) =>
      tokenEndpoint(fields).then((r) => r.json() as Promise<{ access_token: string; refresh_token: string }>);
    const first = await exchange({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT });
    const refreshed = await exchange({ grant_type: 'refresh_token', refresh_token: first.refresh_token });
    for (const token of [first.access_token, refreshed.access_token]) {
      const client = new Client({ name: 'restricted', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/oauth/mcp`), { requestInit: { headers: bearer(token) } }));
      const found = await client.callTool({ name: 'search', arguments: { query: 'shared words' } });
      assert.deepEqual(
        (found.structuredContent as { results: { id: string }[] }).results.map((r) => r.id),
        ['fin-doc'],
      );
      assert.deepEqual(
        ((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { restriction: string[] }).restriction,
        ['finance'],
      );
      await client.close();
    }
  });

  test("an admin sees a user's connected apps and can revoke one", async () => {
    await s.addUser({ uid: 'ops', email: 'ops@example.com', password: 'ops password 1', admin: true });
    const ops = new Browser(s.url);
    await ops.login('ops', 'ops password 1');
    const carl = new Browser(s.url);
    await carl.login('carl', 'carl password 1');
    const { verifier, url } = await pkceRequest();
    const known = await consentAs(carl, url);
    const issued = (await (await redeem(known, verifier)).json()) as { access_token: string };
    assert.equal(await mcpStatus(s.url, issued.access_token), 200);
    const page = await (await ops.request('/admin/users/carl', { headers: { accept: 'text/html' } })).text();
    const grant = /<li data-grant-id="([^"]+)">app <span class="muted">granted [^<]*, only finance<\/span>/.exec(page)?.[1];
    assert.ok(grant, page);
    assert.equal((await ops.request(`/admin/users/carl/grants/${grant}/revoke`, { form: {} })).status, 303);
    assert.equal(await mcpStatus(s.url, issued.access_token), 401);
    assert.equal((await ops.request(`/admin/users/carl/grants/${grant}/revoke`, { form: {} })).status, 404, 'once');
  });

  test("a removed user's grants and tokens are gone", async () => {
    const leaving = await s.addUser({ uid: 'leaving', email: 'leaving@example.com', password: 'leaving password 1' });
    const b = new Browser(s.url);
    await b.login('leaving', 'leaving password 1');
    const { verifier, url } = await pkceRequest();
    const back = await consentAs(b, url);
    const issued = (await (await redeem(back, verifier)).json()) as { access_token: string; refresh_token: string };
    assert.equal(await mcpStatus(s.url, issued.access_token), 200);
    const held = await consentAs(b, url);
    assert.equal((await s.ws.svc(['user', 'remove', 'leaving'])).code, 0);
    assert.equal(await mcpStatus(s.url, issued.access_token), 401);
    const refreshed = await tokenEndpoint({ grant_type: 'refresh_token', refresh_token: issued.refresh_token });
    assert.equal(((await refreshed.json()) as { error: string }).error, 'invalid_grant');
    const redeemed = await redeem(held, verifier);
    assert.equal(((await redeemed.json()) as { error: string }).error, 'invalid_grant', 'a code issued before the removal');
    const grantsLeft = await s.database.db.select({ n: count() }).from(oauthGrants).where(eq(oauthGrants.userId, leaving.id)).get();
    assert.equal(grantsLeft!.n, 0);
    const tokensLeft = await s.database.db.select({ n: count() }).from(tokens).where(eq(tokens.userId, leaving.id)).get();
    assert.equal(tokensLeft!.n, 0);
  });
});

describe('advertise_on_mcp: /mcp itself announces OAuth', () => {
  test("metadata at /mcp's path and the root, its 401 names it, and the SDK client connects to /mcp by URL", async () => {
    const s = await startTestServer({ auth: `${OAUTH}    advertise_on_mcp true\n` });
    try {
      await s.addUser({ uid: 'dora', email: 'dora@example.com', password: 'dora password 1' });
      for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
        assert.equal(((await (await fetch(`${s.url}${path}`)).json()) as { resource: string }).resource, `${s.url}/mcp`, path);
      }
      const r = await fetch(`${s.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: '{}',
      });
      assert.equal(
        r.headers.get('www-authenticate'),
        `Bearer realm="svc", resource_metadata="${s.url}/.well-known/oauth-protected-resource/mcp", scope="mcp"`,
      );
      const dora = new Browser(s.url);
      await dora.login('dora', 'dora password 1');
      const provider = new Provider(dora);
      const endpoint = new URL(`${s.url}/mcp`);
      const first = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
      await assert.rejects(new Client({ name: 'x', version: '1' }).connect(first));
      assert.equal(new URL(provider.redirects[0]!).searchParams.get('resource'), `${s.url}/mcp`);
      await first.finishAuth(provider.lastCode!);
      const client = new Client({ name: 'x', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(endpoint, { authProvider: provider }));
      assert.equal(((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string }).uid, 'dora');
      await client.close();
    } finally {
      await s.stop();
    }
  });
});
