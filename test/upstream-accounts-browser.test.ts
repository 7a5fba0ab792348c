// Connecting a person's own account at an `auth = oauth` upstream (CONTRACT §6.2) in headless Chromium, as a person
// does it: signed in to svc, the token page's "Connected services" lists the upstream `code` not connected; Connect
// takes the browser to the upstream's authorization server (oidc-provider: dynamic registration, resource indicators
// issuing JWT access tokens for the upstream's URL, refresh tokens, revocation), whose own login and consent pages the
// person fills in; the browser comes back to svc's token page, which shows the upstream connected with its scopes,
// and the person's agent is then themselves at the upstream (an SDK MCP server that verifies the tokens with jose).
// Disconnect returns it to not connected, and the grant is revoked at the provider.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Browser as Chromium, Page } from 'playwright-core';
import { launchChromium } from './helpers/chromium.ts';
import { bearer } from './helpers/http.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { DEFAULT_AUTH } from './helpers/workspace.ts';
import { startOauthUpstream, type OauthUpstream } from './helpers/oauth-upstream.ts';
import { waitFor } from './helpers/wait.ts';
import { findClient, listAccounts } from '../src/store/upstream-accounts.ts';
import type { User } from '../src/store/users.ts';

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

describe('connecting an account at an auth = oauth upstream in Chromium', () => {
  let peers: OauthUpstream;
  let svc: TestServer;
  let alice: User;
  let chromium: Chromium;
  let page: Page;

  const row = () => page.locator('tr[data-upstream="code"]');
  /** The row's cells: service, connected, last used, scopes, action. */
  const cells = async () => (await row().locator('td').allTextContents()).map((t) => t.trim());
  const whoami = async () => {
    const agent = new Client({ name: 'agent', version: '1' });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), { requestInit: { headers: bearer(await svc.tokenFor(alice)) } }),
    );
    try {
      const names = (await agent.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('code__'));
      return { names, answer: await agent.callTool({ name: names.includes('code__whoami') ? 'code__whoami' : 'code__connect' }) };
    } finally {
      await agent.close();
    }
  };

  before(async () => {
    peers = await startOauthUpstream();
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream code]
url = ${peers.upstreamUrl}
auth = oauth
oauth_scopes = tools
review = auto
`,
    });
    alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1', labels: '' });
    chromium = await launchChromium();
    page = await chromium.newPage();
  });
  after(async () => {
    await chromium?.close();
    await svc?.stop();
    await peers?.stop();
  });

  test('signed in, the token page lists the upstream under Connected services, not connected', async () => {
    await page.goto(`${svc.url}/login`);
    await page.getByLabel('Username').fill('alice');
    await page.getByLabel('Password').fill('alice password 1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Personal access tokens' }).waitFor();
    await page.getByRole('heading', { name: 'Connected services' }).waitFor();
    assert.equal(await row().getAttribute('data-state'), 'none');
    const [service, connected] = await cells();
    assert.equal(service, 'code');
    assert.equal(connected, 'not connected');
    assert.equal(await page.getByRole('link', { name: 'Connect code' }).getAttribute('href'), '/upstreams/code/connect');
    assert.equal(await page.getByRole('button', { name: 'Disconnect code' }).count(), 0);
  });

  test("Connect, the provider's login and consent pages, and back on the token page: connected, with its scopes", async () => {
    await page.getByRole('link', { name: 'Connect code' }).click();
    await page.waitForURL((u) => u.origin === peers.issuer, { waitUntil: 'load' });
    // oidc-provider's own pages (devInteractions): any login and password, then its consent.
    await page.locator('input[name="login"]').fill('alice-at-code');
    await page.locator('input[name="password"]').fill('any password');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.waitForURL((u) => u.origin === svc.url && u.pathname === '/', { waitUntil: 'load' });
    assert.equal(new URL(page.url()).searchParams.get('connected'), 'code');

    assert.equal(await row().getAttribute('data-state'), 'connected');
    const [service, connected, lastUsed, scopes] = await cells();
    assert.equal(service, 'code');
    assert.notEqual(connected, 'not connected', 'when it was connected');
    assert.notEqual(connected, '');
    assert.equal(lastUsed, '—', 'not used yet');
    assert.equal(scopes, 'tools');
    assert.equal(await page.getByRole('link', { name: 'Connect code' }).count(), 0);
    await page.getByRole('button', { name: 'Disconnect code' }).waitFor();

    assert.equal(peers.counts.get('registration'), 1, 'svc registered itself at the provider by DCR');
    assert.equal((await findClient(svc.database.db, 'code'))?.kind, 'dcr');
    const [account] = await listAccounts(svc.database.db, { userId: alice.id });
    assert.equal(account?.state, 'connected');
    const html = await page.content();
    assert.ok(!peers.seen.some((h) => h !== '' && html.includes(h.replace(/^Bearer /, ''))), 'no token is on the page');

    // Her agent is now herself at the upstream.
    await waitFor('the upstream listed with her token', async () => (await whoami()).names.includes('code__whoami'), { everyMs: 200 });
    assert.equal(text((await whoami()).answer), 'alice-at-code');
  });

  test('Disconnect: back to not connected, the grant revoked at the provider, and her agent told to connect', async () => {
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    await page.getByRole('button', { name: 'Disconnect code' }).click();
    await page.getByRole('link', { name: 'Connect code' }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/');
    assert.equal(await row().getAttribute('data-state'), 'none');
    assert.equal((await cells())[1], 'not connected');
    assert.equal(await page.getByRole('button', { name: 'Disconnect code' }).count(), 0);

    assert.deepEqual(await listAccounts(svc.database.db, { userId: alice.id }), []);
    await waitFor('the grant was revoked at the provider', async () => (peers.counts.get('revoked') ?? 0) > revokedBefore);
    const { names, answer } = await whoami();
    assert.deepEqual(names, ['code__connect']);
    assert.equal((answer as CallToolResult).isError, true);
    assert.match(text(answer), /not_connected/);
  });
});
