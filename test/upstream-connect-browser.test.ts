// The two ways a person reaches Connect for an `auth = oauth` upstream (CONTRACT §6.2) without starting from the token
// page, walked in headless Chromium, which holds a form submission's whole redirect chain to the form's page's
// `form-action`: the Connect URL an agent was given, opened while signed out (svc's sign-in form, then on to the
// upstream's authorization server on another origin), and a link to Connect on another site (svc's confirmation page,
// whose form's answer goes there too). Each must land on the authorization server's own pages (oidc-provider's login
// and consent), come back to the token page connected, and leave the person's agent acting as them at the upstream.
// A page whose policy refuses the way on leaves the person where they were: the test fails at once on Chromium's
// report of the refusal instead of waiting for a page that never comes.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Browser as Chromium, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from './helpers/chromium.ts';
import { bearer } from './helpers/http.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';
import { startOauthUpstream, type OauthUpstream } from './helpers/oauth-upstream.ts';
import { waitFor } from './helpers/wait.ts';
import { listAccounts } from '../src/store/upstream-accounts.ts';
import type { User } from '../src/store/users.ts';

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

describe('reaching Connect from outside the token page, in Chromium', () => {
  let peers: OauthUpstream;
  let svc: TestServer;
  let alice: User;
  let bob: User;
  let chromium: Chromium;
  /** another site, on another loopback address: a page with a link to svc's Connect for `code` */
  let elsewhere: Server;
  let elsewhereUrl: string;
  const contexts: BrowserContext[] = [];

  /** A browser of its own (no cookies), whose refusals by a page's form-action are collected. */
  const freshPage = async () => {
    const context = await chromium.newContext();
    contexts.push(context);
    const page = await context.newPage();
    const refused: string[] = [];
    page.on('console', (m) => {
      if (m.text().includes('form-action')) refused.push(m.text());
    });
    return { page, refused };
  };

  /** Waits for the browser to reach `where`, failing as soon as Chromium reports a policy refusal on the way. */
  const reach = async (page: Page, refused: string[], where: (u: URL) => boolean, what: string) => {
    await waitFor(what, () => {
      assert.deepEqual(refused, [], `Chromium refused the way on, at ${page.url()}`);
      return where(new URL(page.url()));
    });
    await page.waitForLoadState('load');
  };

  /** The authorization server's own pages: any login and password, then its consent; back to svc's token page. */
  const atProvider = async (page: Page, refused: string[], login: string) => {
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill('any password');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
    await reach(page, refused, (u) => u.origin === svc.url && u.pathname === '/', "svc's token page");
    assert.equal(new URL(page.url()).searchParams.get('connected'), 'code');
    const row = page.locator('tr[data-upstream="code"]');
    assert.equal(await row.getAttribute('data-state'), 'connected');
    assert.notEqual((await row.locator('td').nth(1).textContent())?.trim(), 'not connected');
  };

  /** The person's agent, through svc's /mcp with a token of theirs: `code__whoami` once the upstream is listed. */
  const whoami = async (user: User) => {
    const agent = new Client({ name: 'agent', version: '1' });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), { requestInit: { headers: bearer(await svc.tokenFor(user)) } }),
    );
    try {
      await waitFor('the upstream listed with a connected token', async () =>
        (await agent.listTools()).tools.some((t) => t.name === 'code__whoami'),
      );
      return text(await agent.callTool({ name: 'code__whoami' }));
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
    bob = await svc.addUser({ uid: 'bob', email: 'bob@example.com', password: 'bob password 1', labels: '' });
    // 127.0.0.2 is another site than svc's 127.0.0.1 for the browser (Sec-Fetch-Site: cross-site).
    const port = await freePort();
    elsewhereUrl = `http://127.0.0.2:${port}`;
    elsewhere = createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(`<!doctype html><title>Elsewhere</title><a href="${svc.url}/upstreams/code/connect">Connect code</a>`);
    });
    await new Promise<void>((r) => elsewhere.listen(port, '127.0.0.2', r));
    chromium = await launchChromium();
  });
  after(async () => {
    for (const c of contexts) await c.close();
    await chromium?.close();
    await new Promise((r) => elsewhere?.close(r));
    await svc?.stop();
    await peers?.stop();
  });

  test("the Connect URL opened while signed out: svc's sign-in form, then the upstream's login and consent, back connected", async () => {
    const { page, refused } = await freshPage();
    await page.goto(`${svc.url}/upstreams/code/connect`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/login');
    await page.getByLabel('Username').fill('alice');
    await page.getByLabel('Password').fill('alice password 1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await reach(page, refused, (u) => u.origin === peers.issuer, "the upstream's authorization server");
    await atProvider(page, refused, 'alice-at-code');
    assert.equal((await listAccounts(svc.database.db, { userId: alice.id }))[0]?.state, 'connected');
    assert.equal(await whoami(alice), 'alice-at-code', 'her agent is herself at the upstream, with her token there');
  });

  test('a link to Connect on another site: the confirmation page, Connect, the same login and consent, back connected', async () => {
    const { page, refused } = await freshPage();
    await page.goto(`${svc.url}/login`);
    await page.getByLabel('Username').fill('bob');
    await page.getByLabel('Password').fill('bob password 1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Personal access tokens' }).waitFor();

    await page.goto(elsewhereUrl);
    await page.getByRole('link', { name: 'Connect code' }).click();
    await page.getByRole('heading', { name: 'Connect your account at code?' }).waitFor();
    assert.equal(new URL(page.url()).origin, svc.url);
    assert.deepEqual(await listAccounts(svc.database.db, { userId: bob.id }), [], 'nothing connected before he confirms');
    await page.getByRole('button', { name: 'Connect' }).click();
    await reach(page, refused, (u) => u.origin === peers.issuer, "the upstream's authorization server");
    await atProvider(page, refused, 'bob-at-code');
    assert.equal(await whoami(bob), 'bob-at-code', 'his agent is himself at the upstream, with his token there');
  });

  test("the authorization server's origin is allowed on the confirmation page alone; sign-in lands on svc and goes on within it", async () => {
    const { page } = await freshPage();
    const formAction = (r: { headers(): Record<string, string> }) =>
      /form-action ([^;]*);/.exec(r.headers()['content-security-policy'] ?? '')?.[1];
    for (const path of ['/login', '/login?next=%2Fupstreams%2Fcode%2Fconnect', '/upstreams/code/connect']) {
      assert.equal(formAction(await page.request.get(`${svc.url}${path}`)), "'self'", path);
    }
    const signedIn = await page.request.post(`${svc.url}/login`, {
      headers: { origin: svc.url },
      form: { username: 'alice', password: 'alice password 1', next: '/upstreams/code/connect' },
      maxRedirects: 0,
    });
    assert.equal(signedIn.status(), 303);
    assert.equal(signedIn.headers().location, '/login/onward?next=%2Fupstreams%2Fcode%2Fconnect');
    const onward = await page.request.get(`${svc.url}/login/onward?next=%2Fupstreams%2Fcode%2Fconnect`, { maxRedirects: 0 });
    assert.equal(onward.headers().refresh, '0; url=/upstreams/code/connect');
    assert.equal(formAction(onward), "'self'");
    const away = await page.request.get(`${svc.url}/login/onward?next=${encodeURIComponent('//evil.example/x')}`, { maxRedirects: 0 });
    assert.equal(away.headers().refresh, '0; url=/', 'only ever on within svc');

    const confirm = await page.request.get(`${svc.url}/upstreams/code/connect`, { headers: { 'sec-fetch-site': 'cross-site' } });
    assert.equal(confirm.status(), 200);
    assert.equal(formAction(confirm), `'self' ${peers.issuer}`);
    const home = await page.request.get(`${svc.url}/`);
    assert.equal(formAction(home), "'self'", 'the token page');
  });
});
