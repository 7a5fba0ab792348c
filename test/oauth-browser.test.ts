// The MCP SDK client connecting by URL, with the browser step in headless Chromium: a person signs in (once by
// password, once through oidc-provider), reads the consent page and presses Allow; the client's redirect is
// caught where a local callback server would be.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser as Chromium, Page } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { startProvider, CLIENT_ID, CLIENT_SECRET, type TestProvider } from './helpers/oidc-provider.ts';
import { launchChromium } from './helpers/chromium.ts';
import { Provider, REDIRECT } from './helpers/oauth-client.ts';
import { Browser } from './helpers/http.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';

/** The SDK client's provider with a person at the wheel of Chromium: `signIn` answers the sign-in page. */
class ChromiumProvider extends Provider {
  constructor(
    private readonly page: Page,
    private readonly signIn: (page: Page) => Promise<void>,
    private readonly asked = true,
  ) {
    super(new Browser('http://unused.invalid'));
  }
  override async redirectToAuthorization(url: URL): Promise<void> {
    this.redirects.push(url);
    let landed: URL | null = null;
    await this.page.route(`${REDIRECT}**`, async (route) => {
      landed = new URL(route.request().url());
      await route.fulfill({ status: 200, contentType: 'text/html', body: '<p>You can close this window.</p>' });
    });
    await this.page.goto(url.href);
    await this.signIn(this.page);
    if (this.asked) {
      await this.page.getByRole('heading', { name: /^Allow “Chromium client” to use svc as / }).waitFor();
      await this.page.getByRole('button', { name: 'Allow' }).click();
    }
    await this.page.getByText('You can close this window.').waitFor();
    assert.ok(landed, 'redirected back to the client');
    this.lastCode = (landed as URL).searchParams.get('code');
  }
  override get clientMetadata() {
    return { ...super.clientMetadata, client_name: 'Chromium client' };
  }
}

async function connectByUrl(url: string, provider: Provider): Promise<Client> {
  const endpoint = new URL(`${url}/oauth/mcp`);
  const transport = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
  await assert.rejects(new Client({ name: 'c', version: '1' }).connect(transport), UnauthorizedError);
  await transport.finishAuth(provider.lastCode!);
  const client = new Client({ name: 'c', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(endpoint, { authProvider: provider }));
  return client;
}

describe('connect by URL, the browser step in Chromium', () => {
  let s: TestServer;
  let idp: TestProvider;
  let chromium: Chromium;
  before(async () => {
    const idpPort = await freePort();
    const issuer = `http://127.0.0.1:${idpPort}`;
    s = await startTestServer({
      env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
      auth: ({ baseUrl }) =>
        `${DEFAULT_AUTH}oidc\n    enabled true\n    issuer ${issuer}\n    client_id ${CLIENT_ID}\n    client_secret_env SVC_OIDC_CLIENT_SECRET\n    redirect_url ${baseUrl}/oidc/callback\n    jit true\noauth\n    enabled true\n`,
    });
    idp = await startProvider({ port: idpPort, redirectUris: [`${s.url}/oidc/callback`] });
    await s.addUser({ uid: 'petra', email: 'petra@example.com', password: 'petra password 1' });
    await waitFor('svc to finish OIDC discovery', async () => (await fetch(`${s.url}/oidc/login`, { redirect: 'manual' })).status === 302, {
      everyMs: 100,
    });
    chromium = await launchChromium();
  });
  after(async () => {
    await chromium?.close();
    await s?.stop();
    await idp?.stop();
  });

  test('signed in by password', async () => {
    const page = await chromium.newPage();
    const provider = new ChromiumProvider(page, async (p) => {
      await p.getByLabel('Username').fill('petra');
      await p.getByLabel('Password').fill('petra password 1');
      await p.getByRole('button', { name: 'Sign in' }).click();
    });
    const client = await connectByUrl(s.url, provider);
    assert.deepEqual(
      (({ uid, via }) => ({ uid, via }))(
        (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string; via: string },
      ),
      { uid: 'petra', via: 'token' },
    );
    await client.close();
    await page.close();
  });

  test('a public loopback client allowed before: after signing in by password, asked again (RFC 8252 §8.6), told it was allowed', async () => {
    const first = await chromium.newPage();
    const signIn = async (p: Page) => {
      await p.getByLabel('Username').fill('petra');
      await p.getByLabel('Password').fill('petra password 1');
      await p.getByRole('button', { name: 'Sign in' }).click();
    };
    const provider = new ChromiumProvider(first, signIn);
    await (await connectByUrl(s.url, provider)).close();
    await first.close();
    const again = await chromium.newPage();
    const second = new ChromiumProvider(again, async (p) => {
      await signIn(p);
      await p.getByText('You allowed this app before').waitFor();
    });
    second.info = provider.info;
    const client = await connectByUrl(s.url, second);
    assert.equal(((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string }).uid, 'petra');
    await client.close();
    await again.close();
  });

  test('signed in through the single sign-on provider', async () => {
    idp.accounts.set('sub-quinn', { email: 'quinn@example.com', name: 'Quinn', preferred_username: 'quinn' });
    const page = await chromium.newPage();
    const provider = new ChromiumProvider(page, async (p) => {
      await p.getByRole('link', { name: 'Sign in with single sign-on' }).click();
      await p.locator('input[name="login"]').fill('sub-quinn');
      await p.locator('input[name="password"]').fill('any');
      await p.locator('button[type="submit"]').click();
      await p.getByRole('button', { name: 'Continue' }).click();
    });
    const client = await connectByUrl(s.url, provider);
    assert.equal(((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string }).uid, 'quinn');
    await client.close();
    await page.close();
  });
});
