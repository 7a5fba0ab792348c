// Client ID Metadata Documents: the MCP SDK client uses an https URL as its client_id, served here by a local https
// server under a test CA that svc trusts through NODE_EXTRA_CA_CERTS (svc runs as its own process for that). Every
// way a document can be unfit is refused, and with client_metadata_allow_private off, a local address is never
// even fetched.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:https';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { install, sourceRunner, type Installation, type Serving } from './helpers/installation.ts';
import { Browser } from './helpers/http.ts';
import { connect, Provider, REDIRECT } from './helpers/oauth-client.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';

const oauthAuth = (allowPrivate: boolean) => `${DEFAULT_AUTH}oauth\n    enabled true\n    client_metadata_allow_private ${allowPrivate}\n`;

describe('Client ID Metadata Documents', () => {
  let dir: string;
  let https: Server;
  let docs: string;
  const fetched: string[] = [];
  let flakyUp = true;
  let inst: Installation;
  let server: Serving;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-cimd-'));
    const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
    ssl(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '1',
      '-subj',
      '/CN=svc test CA',
    );
    ssl(
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'srv.key',
      '-out',
      'srv.csr',
      '-subj',
      '/CN=localhost',
    );
    writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost\n');
    ssl(
      'x509',
      '-req',
      '-in',
      'srv.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'srv.pem',
      '-days',
      '1',
      '-extfile',
      'ext.cnf',
    );
    const port = await freePort();
    docs = `https://localhost:${port}`;
    https = createServer({ key: readFileSync(join(dir, 'srv.key')), cert: readFileSync(join(dir, 'srv.pem')) }, (req, res) => {
      fetched.push(req.url!);
      const doc = (body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      const me = `${docs}${req.url}`;
      if (req.url === '/good.json')
        doc({ client_id: me, client_name: 'Metadata app', redirect_uris: [REDIRECT] }, { 'cache-control': 'max-age=600' });
      else if (req.url === '/flaky.json' && flakyUp)
        doc(
          { client_id: me, client_name: 'Flaky app', redirect_uris: [REDIRECT], application_type: 'native' },
          { 'cache-control': 'no-cache' },
        );
      else if (req.url === '/flaky.json') {
        res.writeHead(503);
        res.end();
      } else if (req.url === '/bidi.json') doc({ client_id: me, client_name: '\u202EMetadata\u200B app\u2066', redirect_uris: [REDIRECT] });
      else if (req.url === '/svc-name.json') doc({ client_id: me, client_name: 'ѕvс', redirect_uris: [REDIRECT] });
      else if (req.url === '/mismatch.json') doc({ client_id: `${docs}/other.json`, redirect_uris: [REDIRECT] });
      else if (req.url === '/big.json') doc({ client_id: me, redirect_uris: [REDIRECT], padding: 'x'.repeat(6000) });
      else if (req.url === '/bad-redirect.json') doc({ client_id: me, redirect_uris: ['javascript:alert(1)'] });
      else if (req.url === '/redirect.json') {
        res.writeHead(302, { location: '/good.json' });
        res.end();
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise<void>((resolve) => https.listen(port, '127.0.0.1', resolve));
    // The test itself is a trusted proxy, so it can speak for clients at other addresses (X-Forwarded-For).
    inst = await install(sourceRunner, {
      auth: oauthAuth(true),
      env: { NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') },
      server: 'trusted_proxies = 127.0.0.1\n',
    });
    const added = await inst.cli(['user', 'add', 'alice', '--email', 'alice@example.com', '--password-stdin'], 'alice password 1\n');
    assert.equal(added.code, 0, added.stderr);
    server = await inst.serve();
  });
  after(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    inst?.remove();
    https?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The server's JSON log lines, once one of them matches (svc writes its log a moment after answering). */
  const logged = async (match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>[]> => {
    const lines = () =>
      server
        .log()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    await waitFor('the expected line in the server log', () => lines().some(match), { everyMs: 20 });
    return lines().filter((l) => l.event === 'oauth_client_metadata_unreachable');
  };

  /** `forwardedFor`: the client address the (trusted) test says it forwards for. */
  const authorize = (browser: Browser, clientId: string, forwardedFor?: string) => {
    const challenge = createHash('sha256').update(randomBytes(32).toString('base64url')).digest('base64url');
    const q = new URLSearchParams({
      client_id: clientId,
      redirect_uri: REDIRECT,
      response_type: 'code',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    return browser.request(`/oauth/authorize?${q}`, {
      headers: { accept: 'text/html', ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
    });
  };

  test('the SDK client connects with its metadata URL as client_id; consent names the publishing host', async () => {
    const alice = new Browser(inst.url);
    assert.equal((await alice.login('alice', 'alice password 1')).status, 303);
    const meta = (await (await fetch(`${inst.url}/.well-known/oauth-authorization-server`)).json()) as {
      client_id_metadata_document_supported: boolean;
    };
    assert.equal(meta.client_id_metadata_document_supported, true);
    const page = await (await authorize(alice, `${docs}/good.json`)).text();
    assert.match(page, /Allow “Metadata app” to use svc as alice\?/);
    assert.match(page, new RegExp(`Published by <strong>localhost:${new URL(docs).port}</strong>`));
    assert.doesNotMatch(page, /registered itself/);
    const provider = new Provider(alice, `${docs}/good.json`);
    const client = await connect(inst.url, provider);
    assert.equal(((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string }).uid, 'alice');
    await client.close();
    assert.equal(provider.info?.client_id, `${docs}/good.json`, 'no registration');
  });

  test('unfit documents are refused with a page, never a redirect: wrong client_id, too big, redirected, bad redirect URIs, unreachable', async () => {
    const alice = new Browser(inst.url);
    await alice.login('alice', 'alice password 1');
    const closed = await freePort();
    for (const [url, reason] of [
      [`${docs}/mismatch.json`, /client_id is not its own URL/],
      [`${docs}/big.json`, /larger than 5 KB/],
      [`${docs}/redirect.json`, /does not follow redirects/],
      [`${docs}/bad-redirect.json`, /redirect_uris are missing or not acceptable/],
      [
        `${docs}/missing.json`,
        new RegExp(
          `could not fetch the metadata document of this app from localhost:${new URL(docs).port}\\. Ask the administrator of svc to let it fetch https://localhost:${new URL(docs).port}, or to set client_metadata_documents false`,
        ),
      ],
      [
        `https://localhost:${closed}/client.json`,
        new RegExp(
          `could not fetch the metadata document of this app from localhost:${closed}\\. Ask the administrator of svc to let it fetch https://localhost:${closed}, or to set client_metadata_documents false`,
        ),
      ],
    ] as const) {
      const res = await authorize(alice, url);
      assert.equal(res.status, 400, url);
      assert.equal(res.headers.get('location'), null);
      const text = await res.text();
      assert.match(text, reason, url);
      // Nothing about the connection: refused, reset and silent ports read the same (no port-probe oracle).
      assert.doesNotMatch(text, /ECONN|EHOST|ENET|ETIMEDOUT|refused|reset|timed? ?out|answered|404|within/i, url);
    }
    // The administrator's log says why, at warn, with the client id.
    const warned = await logged(
      (l) => l.event === 'oauth_client_metadata_unreachable' && l.client_id === `https://localhost:${closed}/client.json`,
    );
    assert.ok(
      warned.some(
        (l) => l.level === 'warn' && l.client_id === `https://localhost:${closed}/client.json` && /ECONNREFUSED/.test(String(l.reason)),
      ),
      JSON.stringify(warned),
    );
    assert.ok(warned.some((l) => l.client_id === `${docs}/missing.json` && /404/.test(String(l.reason))));
    assert.ok(!fetched.includes('/good.json?again'), 'nothing but the documents was fetched');
  });

  test('a document that cannot be fetched any more is served from the last good copy', async () => {
    const alice = new Browser(inst.url);
    await alice.login('alice', 'alice password 1');
    const first = await authorize(alice, `${docs}/flaky.json`);
    assert.equal(first.status, 200);
    assert.match(await first.text(), /Allow “Flaky app” to use svc as alice\?/);
    flakyUp = false;
    const before = fetched.length;
    const again = await authorize(alice, `${docs}/flaky.json`);
    assert.equal(fetched.length, before + 1, 'svc tried to fetch it again (the copy had expired)');
    assert.equal(again.status, 200);
    assert.match(await again.text(), /Allow “Flaky app” to use svc as alice\?/);
    const warned = await logged((l) => l.event === 'oauth_client_metadata_unreachable' && l.client_id === `${docs}/flaky.json`);
    assert.equal(warned.at(-1)?.served_last_copy, true);
    flakyUp = true;
  });

  test("names in documents are shown plainly: bidi and invisible characters dropped, and never svc's own", async () => {
    const alice = new Browser(inst.url);
    await alice.login('alice', 'alice password 1');
    const bidi = await (await authorize(alice, `${docs}/bidi.json`)).text();
    assert.match(bidi, /Allow “Metadata app” to use svc as alice\?/);
    assert.doesNotMatch(bidi, /[\u202A-\u202E\u2066-\u2069\u200B-\u200F]/);
    const impostor = await (await authorize(alice, `${docs}/svc-name.json`)).text();
    assert.match(impostor, new RegExp(`Allow “localhost:${new URL(docs).port}” to use svc as alice\\?`));
  });

  test("svc check warns (without failing) when documents are on and the well-known clients' hosts cannot be reached", async () => {
    // No network beyond loopback here, so the check can only fail to reach them.
    const check = await inst.cli(['check']);
    assert.equal(check.code, 0, check.stderr);
    assert.match(check.stdout, /is valid/);
    assert.match(
      check.stderr,
      /warning: auth\.oauth\.client_metadata_documents: svc cannot reach claude\.ai, chatgpt\.com, vscode\.dev;.*set client_metadata_documents false/,
    );
  });

  test('the documents one address can make svc fetch are limited; an IPv6 client counts by its /64', async () => {
    const alice = new Browser(inst.url);
    await alice.login('alice', 'alice password 1');
    const before = fetched.length;
    let limited = -1;
    // Each request from another address of one /64, as one IPv6 host may send them.
    for (let i = 0; i < 25 && limited < 0; i++) {
      const text = await (await authorize(alice, `${docs}/missing-${i}.json`, `2001:db8:0:5::${(i + 1).toString(16)}`)).text();
      if (/too many new apps from this address/.test(text)) limited = i;
    }
    assert.ok(limited >= 0 && limited <= 20, `limited after ${limited} fetches`);
    const after = fetched.length;
    await authorize(alice, `${docs}/missing-more.json`, '2001:db8:0:5:ffff::1');
    assert.equal(fetched.length, after, 'no fetch once limited');
    assert.ok(after - before <= 20);
    await authorize(alice, `${docs}/missing-other.json`, '2001:db8:0:6::1');
    assert.equal(fetched.length, after + 1, 'another /64 is not limited');
  });

  test('with client_metadata_allow_private off, a document on a local address is refused without being fetched', async () => {
    const strict = await install(sourceRunner, { auth: oauthAuth(false), env: { NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') } });
    const added = await strict.cli(['user', 'add', 'bob', '--email', 'bob@example.com', '--password-stdin'], 'bob password 1\n');
    assert.equal(added.code, 0);
    const strictServer = await strict.serve();
    try {
      const bob = new Browser(strict.url);
      await bob.login('bob', 'bob password 1');
      const before = fetched.length;
      for (const url of [
        `${docs}/good.json`,
        `https://127.0.0.1:${new URL(docs).port}/good.json`,
        'https://[::1]/client.json',
        'https://10.1.2.3/client.json',
        'https://169.254.169.254/latest.json',
        // IPv6 forms that embed an IPv4 address: compatible, translated, local-use NAT64, 6to4.
        `https://[::127.0.0.1]:${new URL(docs).port}/good.json`,
        `https://[::ffff:0:7f00:1]:${new URL(docs).port}/good.json`,
        'https://[64:ff9b:1::a00:1]/client.json',
        'https://[2002:7f00:1::]/client.json',
      ]) {
        const res = await authorize(bob, url);
        assert.equal(res.status, 400, url);
        assert.match(await res.text(), /private or local address/, url);
      }
      assert.equal(fetched.length, before, 'not one request reached the document server');
    } finally {
      strictServer.child.kill('SIGTERM');
      await strictServer.exited;
      strict.remove();
    }
  });
});
