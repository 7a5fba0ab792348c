// mcp-remote, a real MCP client, given nothing but svc's URL: its whole life against /oauth/mcp. It registers
// itself and opens "the browser" for sign-in and consent; here the browser it opens is a stand-in `xdg-open` that
// hands the address to this test, where a person in headless Chromium signs in and presses Allow. Then it calls
// `search`; a second run lives on its stored tokens (refreshing them, as access tokens here last 30 seconds) and
// opens no browser; and after the person revokes the grant, its refresh is refused with invalid_grant and it sends
// the person back to the consent page. mcp-remote is driven over stdio by the MCP SDK's client, with its own
// config folder inside the test's temp folder; it talks only to svc on loopback.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { mkdirSync, writeFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Browser as Chromium, BrowserContext } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { launchChromium } from './helpers/chromium.ts';
import { allowInChromium, type Person, type Visit } from './helpers/consent.ts';
import { listening, waitFor } from './helpers/wait.ts';
import { Browser } from './helpers/http.ts';
import { DEFAULT_AUTH } from './helpers/workspace.ts';
import { createLogger } from '../src/log.ts';
import { putItem } from '../src/store/items.ts';
import { itemRecord } from './helpers/records.ts';

const require = createRequire(import.meta.url);
const MCP_REMOTE = join(dirname(require.resolve('mcp-remote/package.json')), 'dist', 'proxy.js');
const PETRA: Person = { uid: 'petra', password: 'petra password 1' };
/** How long one run of mcp-remote may take, browser step included, before the test gives up on it. */
const RUN_LIMIT_MS = 60_000;
/** How much of mcp-remote's (debug) log a failure message carries. */
const LOG_TAIL = 6000;

/** What the stand-in browser was asked to open, and what the person saw there. */
interface Opened {
  readonly url: URL;
  readonly visit: Promise<Visit>;
}

function urlOrNull(text: string): URL | null {
  try {
    return new URL(text);
  } catch {
    return null;
  }
}

interface SvcRequest {
  method: string;
  path: string;
  status: number;
}

describe('mcp-remote by URL alone: sign-in, stored tokens, refresh, revocation, consent again', () => {
  let s: TestServer;
  let chromium: Chromium;
  /** one browser profile for the whole life, as a person's own browser keeps its svc session */
  let profile: BrowserContext;
  let handOff: Server;
  let env: Record<string, string>;
  const opened: Opened[] = [];
  const requests: SvcRequest[] = [];
  let clientName = '';

  before(async () => {
    const log = createLogger((line) => {
      const e = JSON.parse(line) as { event: string } & SvcRequest;
      if (e.event === 'request') requests.push({ method: e.method, path: e.path, status: e.status });
    });
    s = await startTestServer({ auth: `${DEFAULT_AUTH}oauth\n    enabled true\n    access_ttl 30s\n`, log });
    await s.addUser({ uid: PETRA.uid, email: 'petra@example.com', password: PETRA.password });
    await s.database.write((tx) =>
      putItem(tx, 'notes/remote', itemRecord({ title: 'Remote notes', text: 'what mcp-remote should find', labels: '' })),
    );
    chromium = await launchChromium();
    profile = await chromium.newContext();

    // The stand-in browser posts the address here; the person answers it in Chromium.
    handOff = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d));
      req.on('end', () => {
        const url = urlOrNull(body.trim()) ?? new URL('about:blank');
        const visit = (async () => {
          const callback = urlOrNull(url.searchParams.get('redirect_uri') ?? '');
          if (!callback) throw new Error(`mcp-remote opened ${JSON.stringify(body)}, which has no redirect_uri`);
          // mcp-remote opens the address before its callback listener may be up: the browser must not come back first.
          await waitFor('mcp-remote listening for its callback', () => listening(Number(callback.port)), { timeoutMs: 20_000 });
          const page = await profile.newPage();
          try {
            return await allowInChromium(page, url.href, PETRA, callback.origin);
          } finally {
            await page.close();
          }
        })();
        visit.catch(() => {});
        opened.push({ url, visit });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => handOff.listen(0, '127.0.0.1', resolve));

    const bin = join(s.ws.dir, 'bin');
    mkdirSync(bin);
    const opener = join(bin, 'xdg-open');
    writeFileSync(
      opener,
      `#!${process.execPath}\n` +
        `fetch('http://127.0.0.1:${(handOff.address() as AddressInfo).port}/open', { method: 'POST', body: process.argv[2] })\n` +
        `  .then((r) => process.exit(r.status === 204 ? 0 : 1), () => process.exit(1));\n`,
      { mode: 0o755 },
    );
    // mcp-remote opens the browser through the `open` package, whose bundled xdg-open (like /usr/bin/xdg-open, which
    // mcp-remote tries next) hands the address to BROWSER when no desktop is running; the stand-in also comes first
    // on PATH for an `open` that calls the system's xdg-open by name. No DISPLAY: no real browser can start.
    env = {
      PATH: `${bin}:${dirname(process.execPath)}:/usr/bin:/bin`,
      HOME: s.ws.dir,
      BROWSER: opener,
      MCP_REMOTE_CONFIG_DIR: join(s.ws.dir, 'mcp-auth'),
    };
  });

  after(async () => {
    await chromium?.close();
    await new Promise((resolve) => (handOff ? handOff.close(resolve) : resolve(undefined)));
    await s?.stop();
  });

  /** Starts mcp-remote with only svc's MCP URL, connects to it over stdio, and calls `search`; returns the ids found. */
  async function searchThroughMcpRemote(): Promise<{ ids: string[]; stderr: string }> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MCP_REMOTE, `${s.url}/oauth/mcp`, '--debug'],
      env,
      stderr: 'pipe',
      cwd: s.ws.dir,
    });
    let stderr = '';
    transport.stderr?.on('data', (d: Buffer) => (stderr += d));
    const client = new Client({ name: 'stdio host', version: '1' });
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`mcp-remote did not answer in ${RUN_LIMIT_MS / 1000}s`)), RUN_LIMIT_MS);
    });
    try {
      return await Promise.race([
        limit,
        (async () => {
          await client.connect(transport);
          const found = (await client.callTool({ name: 'search', arguments: { query: 'mcp-remote should find' } })) as {
            structuredContent?: { results: { id: string }[] };
            isError?: boolean;
            content?: unknown;
          };
          assert.ok(found.structuredContent, `search gave no results object: ${JSON.stringify(found)}`);
          return { ids: found.structuredContent.results.map((r) => r.id), stderr };
        })(),
      ]);
    } catch (e) {
      // A browser step that went wrong is the likelier story than what mcp-remote saw of it.
      const steps = await Promise.allSettled(opened.map((o) => o.visit));
      const failed = steps.flatMap((r) => (r.status === 'rejected' ? [`the browser step failed: ${(r.reason as Error).message}`] : []));
      throw new Error([(e as Error).message, ...failed, `the end of mcp-remote's log:\n${stderr.slice(-LOG_TAIL)}`].join('\n'), {
        cause: e,
      });
    } finally {
      clearTimeout(timer);
      await client.close().catch(() => {});
    }
  }

  test('first run: it registers itself, the person signs in and allows it in the browser, and search answers', async () => {
    const { ids, stderr } = await searchThroughMcpRemote();
    assert.deepEqual(ids, ['notes/remote']);
    assert.equal(opened.length, 1, `the browser was opened ${opened.length} times:\n${stderr.slice(-LOG_TAIL)}`);
    const visit = await opened[0]!.visit;
    assert.equal(visit.signedIn, true, 'the person signed in first');
    assert.match(visit.consent ?? '', /^Allow “(.+)” to use svc as petra\?$/, 'then saw the consent page');
    clientName = /^Allow “(.+)”/.exec(visit.consent!)![1]!;
    const url = opened[0]!.url;
    assert.equal(url.origin + url.pathname, `${s.url}/oauth/authorize`);
    assert.equal(url.searchParams.get('resource'), `${s.url}/oauth/mcp`);
    assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
    assert.ok(
      requests.some((r) => r.method === 'POST' && r.path === '/oauth/register' && r.status === 201),
      'it registered itself',
    );
    const files = readdirSync(join(env.MCP_REMOTE_CONFIG_DIR!, 'mcp-remote-v1'));
    assert.ok(
      files.some((f) => f.endsWith('_tokens.json')),
      `tokens kept in its config folder: ${files.join(', ')}`,
    );
  });

  test('second run: it lives on its stored tokens, refreshing them, and opens no browser', async () => {
    const since = requests.length;
    const { ids, stderr } = await searchThroughMcpRemote();
    assert.deepEqual(ids, ['notes/remote']);
    assert.equal(
      opened.length,
      1,
      `no browser the second time, but it opened ${opened
        .slice(1)
        .map((o) => o.url.href)
        .join(', ')}\n${stderr.slice(-LOG_TAIL)}`,
    );
    const later = requests.slice(since);
    assert.ok(
      !later.some((r) => r.path === '/oauth/register' || r.path === '/oauth/authorize'),
      `no new registration or authorization: ${JSON.stringify(later)}`,
    );
    assert.ok(
      later.some((r) => r.method === 'POST' && r.path === '/oauth/token' && r.status === 200),
      `its 30-second access token was refreshed: ${JSON.stringify(later)}`,
    );
  });

  test('after the person revokes its grant: invalid_grant on refresh, and back to the consent page', async () => {
    const person = new Browser(s.url);
    assert.equal((await person.login(PETRA.uid, PETRA.password)).status, 303);
    const grants = (await (await person.request('/auth/grants')).json()) as { id: string; client_name: string }[];
    const grant = grants.find((g) => g.client_name === clientName);
    assert.ok(grant, `petra's connected apps list mcp-remote: ${JSON.stringify(grants)}`);
    const revoked = await person.request(`/auth/grants/${grant.id}/revoke`, { method: 'POST' });
    assert.equal(revoked.status, 200, await revoked.text());

    const since = requests.length;
    const { ids, stderr } = await searchThroughMcpRemote();
    assert.deepEqual(ids, ['notes/remote']);
    const later = requests.slice(since);
    const refused = later.findIndex((r) => r.method === 'POST' && r.path === '/oauth/token' && r.status === 400);
    assert.ok(refused >= 0, `its refresh was refused: ${JSON.stringify(later)}`);
    assert.match(stderr, /invalid_grant/, 'and the refusal it got was invalid_grant');
    assert.equal(opened.length, 2, `the browser opened once more:\n${stderr.slice(-LOG_TAIL)}`);
    const visit = await opened[1]!.visit;
    assert.equal(visit.consent, `Allow “${clientName}” to use svc as petra?`, 'the person was asked again');
    assert.equal(visit.signedIn, false, "the person's browser still had its svc session");
    const authorizedAt = later.findIndex((r) => r.path === '/oauth/authorize');
    assert.ok(authorizedAt > refused, `the browser step came after the refusal: ${JSON.stringify(later)}`);
    const after = (await (await person.request('/auth/grants')).json()) as { id: string; client_name: string }[];
    assert.ok(
      after.some((g) => g.client_name === clientName && g.id !== grant.id),
      `a new grant replaced the revoked one: ${JSON.stringify(after)}`,
    );
  });
});
