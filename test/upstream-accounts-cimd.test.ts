// An `auth = oauth` upstream (CONTRACT §6.2) whose authorization server takes client metadata documents (CIMD), with
// no client configured: svc's client id there is the https URL of the document svc publishes, the provider
// (oidc-provider with its CIMD feature) fetches it from svc, and nothing is registered. svc's base_url is https, as
// CIMD requires; the provider reaches that name on loopback, where svc listens.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser } from './helpers/http.ts';
import { atProvider, startOauthUpstream, type OauthUpstream } from './helpers/oauth-upstream.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';
import type { User } from '../src/store/users.ts';
import { findClient, listAccounts } from '../src/store/upstream-accounts.ts';

const BASE = 'https://svc.example.com';
const DOCUMENT = `${BASE}/upstreams/code/client.json`;
const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

describe('an upstream whose authorization server takes client metadata documents (CIMD)', () => {
  let peers: OauthUpstream;
  let svc: TestServer;
  let alice: User;
  let authorization: URL;

  before(async () => {
    const [asPort, upPort] = [await freePort(), await freePort()];
    svc = await startTestServer({
      baseUrl: BASE,
      auth: `${DEFAULT_AUTH}
[upstream code]
url = http://127.0.0.1:${upPort}/mcp
auth = oauth
oauth_scopes = tools
review = auto
`,
    });
    // Access tokens live 30 s: svc refreshes a token a minute before it expires, so every call refreshes first, as
    // the client the document describes.
    peers = await startOauthUpstream({
      ports: { as: asPort, upstream: upPort },
      clientMetadataFrom: { origin: BASE, reach: svc.url },
      accessTokenTtl: 30,
    });
    alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
  });
  after(async () => {
    await svc?.stop();
    await peers?.stop();
  });

  test('svc sends the person to the provider with its document URL as client id, and registers nothing', async () => {
    const browser = new Browser(svc.url);
    const login = await browser.request('/login', { form: { username: 'alice', password: 'alice password 1' }, origin: BASE });
    assert.equal(login.status, 303);
    const start = await browser.request('/upstreams/code/connect', { headers: { accept: 'text/html' } });
    assert.equal(start.status, 302, await start.text());
    authorization = new URL(start.headers.get('location')!);
    assert.equal(authorization.origin, peers.issuer);
    assert.equal(authorization.searchParams.get('client_id'), DOCUMENT);
    assert.equal(authorization.searchParams.get('redirect_uri'), `${BASE}/upstreams/code/callback`);

    const callback = await atProvider(authorization.href, 'alice-at-code', BASE);
    assert.ok((peers.counts.get('metadata document fetched') ?? 0) >= 1, "the provider fetched svc's document");
    const done = await browser.request(callback.pathname + callback.search, { headers: { accept: 'text/html' } });
    assert.equal(done.status, 303, await done.text());
    assert.equal(done.headers.get('location'), '/?connected=code');

    assert.equal(peers.registrationRequests, 0, 'no registration request reached the provider');
    const stored = await findClient(svc.database.db, 'code');
    assert.equal(stored?.kind, 'cimd');
    assert.equal(stored.clientId, DOCUMENT);
    assert.equal(stored.clientSecretSealed, null);
    const [account] = await listAccounts(svc.database.db, { userId: alice.id, upstream: 'code' });
    assert.equal(account?.clientId, DOCUMENT);
    // The code was exchanged, and her token refreshed as svc listed the upstream's tools with it (it lives 30 s), as
    // that client: every token request.
    assert.equal(peers.counts.get('authorization_code'), 1);
    const tokenRequests = 1 + (peers.counts.get('refresh_token') ?? 0);
    assert.equal(peers.counts.get(`client:${DOCUMENT}`), tokenRequests, 'every token request was made as that client');
  });

  test('the document svc publishes names only its https callback, and no secret', async () => {
    const document = (await (await fetch(`${svc.url}/upstreams/code/client.json`)).json()) as Record<string, unknown>;
    assert.equal(document.client_id, DOCUMENT);
    assert.deepEqual(document.redirect_uris, [`${BASE}/upstreams/code/callback`]);
    assert.equal(document.token_endpoint_auth_method, 'none');
    assert.equal(
      Object.keys(document).some((k) => k.includes('secret')),
      false,
    );
  });

  test("her calls carry her token, refreshed as the document's client", async () => {
    const agent = new Client({ name: 'agent', version: '1' });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${await svc.tokenFor(alice)}` } },
      }),
    );
    try {
      await waitFor('code__whoami listed with her token', async () =>
        (await agent.listTools()).tools.some((t) => t.name === 'code__whoami'),
      );
      const refreshesBefore = peers.counts.get('refresh_token') ?? 0;
      const answer = await agent.callTool({ name: 'code__whoami' });
      assert.equal(answer.isError, undefined, text(answer));
      assert.equal(text(answer), 'alice-at-code');
      assert.ok((peers.counts.get('refresh_token') ?? 0) > refreshesBefore, 'the call refreshed her token first');
      assert.ok((peers.counts.get(`client:${DOCUMENT}`) ?? 0) >= 2, 'as the client the document describes');
      assert.equal(peers.counts.get('registration') ?? 0, 0);
    } finally {
      await agent.close();
    }
  });
});

describe('the same server, with svc on an http base_url (no https client id possible)', () => {
  test('svc registers by DCR instead of naming an http document', async () => {
    const [asPort, upPort] = [await freePort(), await freePort()];
    const svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream code]
url = http://127.0.0.1:${upPort}/mcp
auth = oauth
oauth_scopes = tools
`,
    });
    const peers = await startOauthUpstream({
      ports: { as: asPort, upstream: upPort },
      clientMetadataFrom: { origin: BASE, reach: svc.url },
    });
    try {
      const browser = new Browser(svc.url);
      assert.equal((await browser.login('bob', 'bob password 1')).status, 401, 'no such user yet');
      await svc.addUser({ uid: 'bob', email: 'bob@example.com', password: 'bob password 1' });
      assert.equal((await browser.login('bob', 'bob password 1')).status, 303);
      const start = await browser.request('/upstreams/code/connect', { headers: { accept: 'text/html' } });
      assert.equal(start.status, 302, await start.text());
      const clientId = new URL(start.headers.get('location')!).searchParams.get('client_id');
      assert.equal(peers.registrationRequests, 1, 'svc registered');
      assert.equal((await findClient(svc.database.db, 'code'))?.kind, 'dcr');
      assert.equal(clientId, (await findClient(svc.database.db, 'code'))?.clientId);
      assert.ok(!clientId?.startsWith('http'), clientId ?? '');
    } finally {
      await svc.stop();
      await peers.stop();
    }
  });
});
