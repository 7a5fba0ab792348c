// An approved app rendered by a host in headless Chromium, through svc (CONTRACT §6.3). Behind svc, the real MCP
// Apps example @modelcontextprotocol/server-basic-vanillajs (SDK v2, stdio, review = auto). A host page written here
// (bundled with esbuild from the stable line's client and @modelcontextprotocol/ext-apps' AppBridge) connects to svc's
// /mcp with alice's token, finds the tool basic__get-time's app in its _meta.ui, reads the app through svc, renders it
// in a sandboxed frame and bridges it with AppBridge. The app's own button calls its tool back by its bare name
// (get-time), which svc resolves to basic__get-time: the host's own origin reaches svc only through a small proxy on
// loopback that writes down every tools/call it carries, and svc's audit trail has alice's upstream.call. And an
// admin's preview on /admin/tools: the approved bytes render in a frame without svc's origin, whose scripts run and
// reach neither svc's page nor the network; opened as a page of its own, the preview is refused.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import type { Browser as Chromium, BrowserContext } from 'playwright-core';
import { launchChromium } from './helpers/chromium.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { DEFAULT_AUTH, ROOT } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';
import type { User } from '../src/store/users.ts';

const VANILLA = join(ROOT, 'node_modules/@modelcontextprotocol/server-basic-vanillajs/dist');
const VANILLA_HTML = readFileSync(join(VANILLA, 'mcp-app.html'), 'utf8');

/** The host: an MCP client of svc's /mcp (on the page's own origin), and AppBridge for the app it renders. */
const HOST_SOURCE = `
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { AppBridge, PostMessageTransport, getToolUiResourceUri } from '@modelcontextprotocol/ext-apps/app-bridge';

const token = new URLSearchParams(location.hash.slice(1)).get('token');
async function main() {
  const client = new Client({ name: 'svc-test-host', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL('/mcp', location.href), { requestInit: { headers: { Authorization: 'Bearer ' + token } } }),
  );
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === 'basic__get-time');
  const uri = getToolUiResourceUri(tool);
  const read = await client.readResource({ uri });
  const iframe = document.createElement('iframe');
  iframe.setAttribute('sandbox', 'allow-scripts');
  document.body.appendChild(iframe);
  const bridge = new AppBridge(client, { name: 'svc-test-host', version: '1.0.0' }, { serverTools: {}, openLinks: {}, logging: {} });
  bridge.oninitialized = () => { window.appInitialized = true; };
  // Listening before the app's page loads: its first message is its initialize.
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = read.contents[0].text;
  window.hostReady = { uri, html: read.contents[0].text };
}
main().catch((e) => { window.hostError = String((e && e.stack) || e); });
`;

const HOST_PAGE = '<!doctype html><meta charset="utf-8"><title>host</title><script type="module" src="/host.js"></script>';

describe('an approved app rendered through svc by an ext-apps host, in Chromium', () => {
  let svc: TestServer;
  let alice: User;
  let host: Server;
  let hostUrl: string;
  let hostScript: string;
  let chromium: Chromium;
  let context: BrowserContext;
  /** the names of the tools/call requests the host's page sent to svc */
  const called: string[] = [];

  /** Serves the host page and its script, and passes /mcp to svc as it is, writing down each tools/call. */
  const serveHost = () =>
    createServer((req, res) => {
      if (req.url === '/') return void res.writeHead(200, { 'content-type': 'text/html' }).end(HOST_PAGE);
      if (req.url === '/host.js') return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(hostScript);
      if (!req.url?.startsWith('/mcp')) return void res.writeHead(404).end();
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        try {
          const message = JSON.parse(body.toString('utf8')) as { method?: string; params?: { name?: string } };
          if (message.method === 'tools/call') called.push(String(message.params?.name));
        } catch {
          // not JSON (a GET): nothing to write down
        }
        const target = new URL(req.url!, svc.url);
        const upstream = httpRequest(target, { method: req.method, headers: { ...req.headers, host: target.host } }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        upstream.on('error', () => res.destroy());
        res.on('close', () => upstream.destroy());
        upstream.end(body);
      });
    });

  before(async () => {
    const bundled = await build({
      stdin: { contents: HOST_SOURCE, resolveDir: ROOT, loader: 'js', sourcefile: 'host.js' },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      logLevel: 'silent',
    });
    hostScript = bundled.outputFiles[0]!.text;
    host = serveHost();
    await new Promise<void>((ok) => host.listen(0, '127.0.0.1', ok));
    hostUrl = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
    svc = await startTestServer({
      serverExtra: `allowed_origins = ${hostUrl}\n`,
      auth: `${DEFAULT_AUTH}
[upstream basic]
command = "${process.execPath}" "${join(VANILLA, 'index.js')}" --stdio
labels = eng
review = auto
timeout = 20s
`,
    });
    alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: 'eng' });
    await svc.addUser({ uid: 'root', email: 'root@example.com', labels: '', admin: true, password: 'root password 1' });
    await waitFor(
      "basic's tool and app approved",
      async () => {
        const apps = JSON.parse((await svc.ws.svc(['app', 'list', '--json'])).stdout) as { state: string }[];
        const tools = JSON.parse((await svc.ws.svc(['tool', 'list', '--json'])).stdout) as { state: string }[];
        return apps.length === 1 && apps[0]!.state === 'approved' && tools.length === 1 && tools[0]!.state === 'approved';
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
    chromium = await launchChromium();
    context = await chromium.newContext();
  });

  after(async () => {
    await context?.close();
    await chromium?.close();
    await svc?.stop();
    host?.closeAllConnections();
    await new Promise((ok) => host?.close(ok));
  });

  test("the app is read through svc, rendered, and its button calls get-time by its bare name, as alice's upstream.call", async () => {
    const page = await context.newPage();
    const token = await svc.tokenFor(alice);
    await page.goto(`${hostUrl}/#token=${token}`);
    await page.waitForFunction(() => 'hostReady' in window || 'hostError' in window, null, { timeout: 30_000 });
    assert.equal(await page.evaluate(() => (window as unknown as { hostError?: string }).hostError), undefined);
    const ready = (await page.evaluate(() => (window as unknown as { hostReady: { uri: string; html: string } }).hostReady))!;
    assert.equal(ready.uri, 'ui://basic+get-time/mcp-app.html', "the tool's app, mapped by svc");
    assert.equal(ready.html, VANILLA_HTML, 'the approved bytes, through svc');
    await page.waitForFunction(() => 'appInitialized' in window, null, { timeout: 30_000 });

    const calls = async () =>
      (JSON.parse((await svc.ws.svc(['audit', 'list', '--json'])).stdout) as { action: string; actor: string; target: string }[]).filter(
        (e) => e.action === 'upstream.call',
      );
    assert.deepEqual(await calls(), [], 'no call yet');
    assert.deepEqual(called, []);
    const app = page.frameLocator('iframe');
    await app.locator('#get-time-btn').click();
    await waitFor('the time shown by the app', async () =>
      /^\d{4}-\d\d-\d\dT/.test((await app.locator('#server-time').textContent()) ?? ''),
    );
    assert.deepEqual(called, ['get-time'], 'the app called its tool by its bare name');
    const made = await calls();
    assert.deepEqual(
      made.map((e) => [e.actor, e.target]),
      [['alice', 'basic/get-time']],
    );
  });

  test("an admin's preview renders the app's bytes in a sandboxed frame: its scripts run without svc's origin and reach nothing", async () => {
    const page = await context.newPage();
    const refused: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Blocked/i.test(m.text())) refused.push(m.text());
    });
    // What svc's page hears from the frame: the app's script, running, asks its host to initialize.
    await page.addInitScript(() => {
      const heard: unknown[] = [];
      (window as unknown as { heard: unknown[] }).heard = heard;
      window.addEventListener('message', (e) => heard.push(e.data));
    });
    await page.goto(`${svc.url}/login?next=%2Fadmin%2Ftools%3Fkind%3Dapp`);
    await page.getByLabel('Username').fill('root');
    await page.getByLabel('Password').fill('root password 1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Upstream tools, prompts and apps' }).waitFor();
    await page.waitForLoadState('load');
    assert.ok(!page.frames().some((f) => f.url().includes('/preview')), 'no preview is read until it is asked for');
    await page.getByText('Preview its contents (sandboxed)').click();
    const frame = page.frameLocator('iframe.app-preview');
    await frame.locator('#get-time-btn').waitFor({ timeout: 30_000 });
    await page.waitForFunction(
      () => (window as unknown as { heard: { method?: string }[] }).heard.some((m) => m?.method === 'ui/initialize'),
      null,
      { timeout: 30_000 },
    );
    const preview = page.frames().find((f) => f.url().includes('/preview?fingerprint='))!;
    assert.ok(preview, 'the preview frame');
    assert.equal(await preview.evaluate(() => window.origin), 'null', "an opaque origin, not svc's");
    assert.equal(
      await preview.evaluate(() => {
        try {
          return String(window.parent.document.title);
        } catch {
          return 'refused';
        }
      }),
      'refused',
      "svc's page is out of its reach",
    );
    const reached = await preview.evaluate(async (url) => {
      try {
        await fetch(url);
        return 'reached';
      } catch {
        return 'refused';
      }
    }, `${svc.url}/admin/tools`);
    assert.equal(reached, 'refused', 'its policy lets it make no request');
    assert.ok(
      refused.some((m) => /connect-src|default-src/.test(m)),
      `the policy refused it: ${JSON.stringify(refused)}`,
    );

    // Opened as a page of its own (a link to it, followed by the signed-in admin), it is refused: the app's bytes never
    // load as a document at svc's address.
    const opened = await context.newPage();
    try {
      const answer = await opened.goto(preview.url());
      assert.equal(answer?.status(), 403);
      assert.equal(await opened.locator('#get-time-btn').count(), 0);
      assert.match((await opened.textContent('body')) ?? '', /shown only in its frame on \/admin\/tools/);
    } finally {
      await opened.close();
    }
  });
});
