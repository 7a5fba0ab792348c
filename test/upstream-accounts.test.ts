// Upstreams that act for each person (CONTRACT §6.2), with real peers on loopback: oidc-provider as the upstream's
// authorization server (dynamic registration, resource indicators issuing JWT access tokens for the upstream's URL,
// refresh tokens, revocation), and an SDK MCP server as the upstream that accepts only those tokens, verified with
// jose against the provider's JWKS. svc registers itself by DCR (no client configured), each person connects their
// own account through the token page's Connect, and their calls carry their token and nobody else's.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { decodeJwt } from 'jose';
import { startTestServer, type TestServer } from './helpers/server.ts';
import type { Browser } from './helpers/http.ts';
import { atProvider, startOauthUpstream, type OauthUpstream } from './helpers/oauth-upstream.ts';
import { DEFAULT_AUTH, freePort, readDatabaseFile } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';
import { movableClock } from './helpers/clock.ts';
import { scrape } from './helpers/metrics.ts';
import type { User } from '../src/store/users.ts';
import { findClient, listAccounts } from '../src/store/upstream-accounts.ts';
import { and, eq, sql } from 'drizzle-orm';
import { upstreamAccounts, upstreamConnects, upstreamRevocations } from '../src/db/schema.ts';
import { agentOf, signedIn } from './helpers/agents.ts';

/** A client registered at the provider by hand, as an operator would for oauth_client_id. */
const CONFIGURED = { id: 'svc-configured', secret: 'svc-configured-secret-0123456789' };

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

interface AuditRow {
  action: string;
  actor: string;
  target: string;
  detail: { outcome?: string };
}

describe('upstreams that act for each person (auth = oauth)', () => {
  let peers: OauthUpstream;
  let svc: TestServer;
  let alice: User;
  let bob: User;
  const clock = movableClock();
  let metricsUrl: string;

  const mcp = (user: User) => agentOf(svc, user);
  const browserOf = (uid: string) => signedIn(svc.url, uid);
  /** Connect as far as the provider's answer: the callback URL it sends the browser to. */
  const startConnect = async (b: Browser, login: string, upstream = 'code') => {
    const start = await b.request(`/upstreams/${upstream}/connect`, { headers: { accept: 'text/html' } });
    assert.equal(start.status, 302, await start.text());
    const authorization = new URL(start.headers.get('location')!);
    assert.equal(authorization.searchParams.get('resource'), peers.upstreamUrl);
    assert.equal(authorization.searchParams.get('code_challenge_method'), 'S256');
    return atProvider(authorization.href, login, svc.url);
  };
  const callback = (b: Browser, url: URL) => b.request(url.pathname + url.search, { headers: { accept: 'text/html' } });

  before(async () => {
    // svc first, on the ports the peers will take: the provider's hand-registered client names svc's callback.
    const [asPort, upPort] = [await freePort(), await freePort()];
    const upstreamUrl = `http://127.0.0.1:${upPort}/mcp`;
    metricsUrl = `http://127.0.0.1:${await freePort()}/metrics`;
    svc = await startTestServer({
      clock: clock.now,
      serverExtra: `metrics_listen = ${new URL(metricsUrl).host}\n`,
      env: { CODE2_SECRET: CONFIGURED.secret },
      auth: `${DEFAULT_AUTH}
[upstream code]
url = ${upstreamUrl}
auth = oauth
oauth_scopes = tools
review = auto

[upstream code2]
url = ${upstreamUrl}
auth = oauth
oauth_client_id = ${CONFIGURED.id}
oauth_client_secret_env = CODE2_SECRET
oauth_scopes = tools
review = auto

[upstream code3]
url = ${upstreamUrl}
auth = oauth
oauth_scopes = tools
labels = eng
review = auto
`,
    });
    peers = await startOauthUpstream({
      ports: { as: asPort, upstream: upPort },
      client: { ...CONFIGURED, redirectUri: `${svc.url}/upstreams/code2/callback` },
      // Token requests take a moment, as over a network: calls that need a refresh at the same time overlap it.
      tokenDelayMs: 300,
    });
    alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1', labels: 'eng' });
    bob = await svc.addUser({ uid: 'bob', email: 'bob@example.com', password: 'bob password 1', labels: '' });
  });
  after(async () => {
    await svc?.stop();
    await peers?.stop();
  });

  test('before connecting: the caller sees code__connect, a call says where to connect, and no request reaches the upstream', async () => {
    const agent = await mcp(alice);
    try {
      const names = (await agent.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('code__connect'), JSON.stringify(names));
      const answer = (await agent.callTool({ name: 'code__connect' })) as CallToolResult;
      assert.equal(answer.isError, true);
      assert.match(text(answer), new RegExp(`connect it at ${svc.url}/upstreams/code/connect$`));
      // Before anyone has connected no tool of the upstream is known: any of its names says where to connect.
      const anyName = (await agent.callTool({ name: 'code__whoami' })) as CallToolResult;
      assert.equal(anyName.isError, true);
      assert.equal(text(anyName), text(answer));
    } finally {
      await agent.close();
    }
    assert.deepEqual(peers.seen, [], 'nothing reached the upstream');
    // Audited counted: one row for alice, the upstream and the outcome this minute, however many names she tries.
    const flood = await mcp(alice);
    try {
      for (let i = 0; i < 30; i++) assert.match(text(await flood.callTool({ name: `code__made-up-${i}` })), /not_connected/);
    } finally {
      await flood.close();
    }
    const calls = (JSON.parse((await svc.ws.svc(['audit', 'list', '--json'])).stdout) as AuditRow[]).filter(
      (e) => e.action === 'upstream.call',
    );
    assert.deepEqual(
      calls.map((e) => [e.actor, e.target, e.detail.outcome]),
      [['alice', 'code', 'not_connected']],
    );
    const page = await (await browserOf('alice')).request('/', { headers: { accept: 'text/html' } });
    const html = await page.text();
    assert.match(html, /data-upstream="code" data-state="none"/);
    assert.match(html, /href="\/upstreams\/code\/connect"/);
    // svc's client metadata document for servers that take one (CIMD): public, naming itself and its callback.
    const doc = await fetch(`${svc.url}/upstreams/code/client.json`);
    assert.equal(doc.status, 200);
    const metadata = (await doc.json()) as Record<string, unknown>;
    assert.equal(metadata.client_id, `${svc.url}/upstreams/code/client.json`);
    assert.deepEqual(metadata.redirect_uris, [`${svc.url}/upstreams/code/callback`]);
    assert.equal(metadata.token_endpoint_auth_method, 'none');
    assert.equal((await fetch(`${svc.url}/upstreams/nope/client.json`)).status, 404);
  });

  test("after connecting (svc registered itself by DCR), alice's calls carry her token, the upstream sees her, and bob rides on nothing", async () => {
    const browser = await browserOf('alice');
    const back = await startConnect(browser, 'alice-at-code');
    const done = await callback(browser, back);
    assert.equal(done.status, 303, await done.text());
    assert.equal(done.headers.get('location'), '/?connected=code');
    assert.ok((peers.counts.get('authorization_code') ?? 0) >= 1);
    const registration = await findClient(svc.database.db, 'code');
    assert.equal(registration?.kind, 'dcr', 'no client configured and no CIMD at this server: svc registered by DCR');
    assert.equal((await listAccounts(svc.database.db, { userId: alice.id }))[0]!.clientId, registration.clientId);
    await waitFor('the upstream listed with her token', async () => (await svc.ws.svc(['tool', 'list'])).stdout.includes('code\twhoami'), {
      everyMs: 200,
    });
    const agent = await mcp(alice);
    try {
      const names = (await agent.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('code__whoami') && !names.includes('code__connect'), JSON.stringify(names));
      assert.equal(text(await agent.callTool({ name: 'code__whoami' })), 'alice-at-code');
    } finally {
      await agent.close();
    }
    const token = peers.seen.at(-1)!.replace(/^Bearer /, '');
    assert.equal(decodeJwt(token).aud, peers.upstreamUrl);
    assert.ok(!peers.seen.some((h) => h.includes('svc_')), "svc's own tokens never reach the upstream");

    const before = peers.seen.length;
    const bobs = await mcp(bob);
    try {
      const names = (await bobs.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('code__connect') && !names.includes('code__whoami'), JSON.stringify(names));
      const answer = (await bobs.callTool({ name: 'code__whoami' })) as CallToolResult;
      assert.equal(answer.isError, true);
      assert.match(text(answer), /not_connected/);
    } finally {
      await bobs.close();
    }
    assert.equal(peers.seen.length, before, "bob's call reached no upstream");

    // The stored row holds no token: the database file does not contain it.
    const db = join(svc.ws.dir, 'svc.db');
    const files = [db, `${db}-wal`].filter((f) => existsSync(f));
    for (const f of files) assert.ok(!readDatabaseFile(f).includes(token), `${f} does not contain the access token`);
    await waitFor('the last use stamped', async () => (await listAccounts(svc.database.db, { userId: alice.id }))[0]!.lastUsedAt !== null, {
      everyMs: 100,
    });
    const [row] = await listAccounts(svc.database.db, { userId: alice.id });
    assert.equal(row!.state, 'connected');
    assert.equal(row!.scope, 'tools');

    // Admins see who is connected to the upstream, never a token.
    await svc.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', labels: '', admin: true });
    const admin = await (await browserOf('boss')).request('/admin/tools', { headers: { accept: 'text/html' } });
    const adminHtml = await admin.text();
    assert.equal(admin.status, 200);
    assert.match(adminHtml, /<span data-connected="alice">alice \(since /);
    assert.ok(!adminHtml.includes('data-connected="bob"'));
    assert.ok(!adminHtml.includes(token));
    assert.ok(!JSON.stringify(row).includes(token));
  });

  test('a client that declared URL elicitation gets -32042 with the Connect URL; a session id cannot claim it afterwards', async () => {
    const token = await svc.tokenFor(bob);
    const transport = new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    const client = new Client({ name: 'eliciting-agent', version: '1' }, { capabilities: { elicitation: { url: {} } } });
    await client.connect(transport);
    try {
      const before = peers.seen.length;
      await assert.rejects(client.callTool({ name: 'code__whoami' }), (e: unknown) => {
        assert.ok(e instanceof McpError, String(e));
        assert.equal(e.code, -32042);
        // The message names the URL too (clients that do not show elicitations show it), without a code of its own.
        assert.equal(e.message, `MCP error -32042: Connect your account at code to use its tools: ${svc.url}/upstreams/code/connect`);
        const [elicitation] = (e.data as { elicitations: { mode: string; url: string; elicitationId: string }[] }).elicitations;
        assert.equal(elicitation!.mode, 'url');
        assert.equal(elicitation!.url, `${svc.url}/upstreams/code/connect`);
        assert.ok(elicitation!.elicitationId.length > 0);
        return true;
      });
      await assert.rejects(client.callTool({ name: 'code__connect' }), (e: unknown) => e instanceof McpError && e.code === -32042);
      assert.equal(peers.seen.length, before, 'nothing reached the upstream');
    } finally {
      await client.close();
    }
    // A session opened without URL elicitation: its id with the mark added is another session's, refused.
    const plain = await fetch(`${svc.url}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      }),
    });
    const id = plain.headers.get('mcp-session-id')!;
    assert.match(id, /^[a-z2-7]{24}\.[a-z2-7]{24}$/);
    const forged = await fetch(`${svc.url}/mcp`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': `${id}.u`,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'code__whoami', arguments: {} } }),
    });
    assert.equal(forged.status, 403);
    // A 2026-07-28 client that declares URL elicitation is not answered with the 2025 era's error (that revision asks
    // through input_required): it gets the call's isError result, naming the URL, and nothing of the SDK's words.
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'modern', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
    };
    const modern = await fetch(`${svc.url}/mcp`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': 'code__whoami',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'code__whoami', arguments: {}, _meta: meta } }),
    });
    assert.equal(modern.status, 200);
    const { result } = (await modern.json()) as { result: CallToolResult };
    assert.equal(result.isError, true);
    assert.match(text(result), new RegExp(`connect it at ${svc.url}/upstreams/code/connect$`));
  });

  test('a Connect link followed from another site asks the person first; the confirmation is a same-origin POST', async () => {
    const browser = await browserOf('bob');
    const pending = async () => (await svc.database.db.select().from(upstreamConnects).all()).length;
    const before = await pending();
    const asked = await browser.request('/upstreams/code/connect', { headers: { accept: 'text/html', 'sec-fetch-site': 'cross-site' } });
    assert.equal(asked.status, 200);
    assert.match(await asked.text(), /<form method="post" action="\/upstreams\/code\/connect">/);
    assert.equal(await pending(), before, 'nothing started');
    const forged = await browser.request('/upstreams/code/connect', { method: 'POST', form: {}, origin: 'https://evil.example' });
    assert.equal(forged.status, 403);
    assert.equal(await pending(), before, 'nothing started by a cross-site post');
    const confirmed = await browser.request('/upstreams/code/connect', { method: 'POST', form: {} });
    assert.equal(confirmed.status, 302);
    assert.equal(new URL(confirmed.headers.get('location')!).origin, peers.issuer);
    assert.equal(await pending(), before + 1);
  });

  test("a callback in another person's session, replayed, with a bad state or with the provider's error connects no one", async () => {
    const aliceBrowser = await browserOf('alice');
    const bobBrowser = await browserOf('bob');
    const accountsOf = async (u: User) => (await listAccounts(svc.database.db, { userId: u.id })).length;

    const aliceBack = await startConnect(aliceBrowser, 'alice-at-code');
    const stolen = await callback(bobBrowser, aliceBack);
    assert.equal(stolen.status, 403, 'bob presents the callback of a connection alice started');
    assert.equal(await accountsOf(bob), 0);
    const replay = await callback(aliceBrowser, aliceBack);
    assert.equal(replay.status, 400, 'the state was used up by the refused attempt');

    const bad = await callback(aliceBrowser, new URL(`${svc.url}/upstreams/code/callback?code=x&state=not-a-state`));
    assert.equal(bad.status, 400);

    const refusedAtProvider = await bobBrowser.request('/upstreams/code/connect');
    const state = new URL(refusedAtProvider.headers.get('location')!).searchParams.get('state')!;
    const denied = await callback(
      bobBrowser,
      new URL(`${svc.url}/upstreams/code/callback?error=access_denied&state=${state}&iss=${encodeURIComponent(peers.issuer)}`),
    );
    assert.equal(denied.status, 400);
    assert.match(await denied.text(), /did not connect your account \(access_denied\)/);
    assert.equal(await accountsOf(bob), 0);

    const twice = await startConnect(aliceBrowser, 'alice-at-code');
    assert.equal((await callback(aliceBrowser, twice)).status, 303);
    assert.equal((await callback(aliceBrowser, twice)).status, 400, 'a callback is good once');
  });

  test("a callback after the connection's 10 minutes connects no one, and its state is used up", async () => {
    const bobBrowser = await browserOf('bob');
    const back = await startConnect(bobBrowser, 'bob-at-code');
    const accountsBefore = (await listAccounts(svc.database.db, { userId: bob.id })).length;
    clock.advance(10 * 60_000 + 1_000);
    const late = await callback(bobBrowser, back);
    assert.equal(late.status, 400, await late.text());
    assert.match(await (await callback(bobBrowser, back)).text(), /was used already or took too long/);
    assert.equal((await listAccounts(svc.database.db, { userId: bob.id })).length, accountsBefore, 'bob is not connected');
    assert.equal(accountsBefore, 0);
  });

  test('an expired access token is refreshed once under 20 concurrent calls', async () => {
    const refreshesBefore = peers.counts.get('refresh_token') ?? 0;
    clock.advance(2 * 3600_000);
    const agents = await Promise.all(Array.from({ length: 4 }, () => mcp(alice)));
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => agents[i % 4]!.callTool({ name: 'code__whoami' })));
      for (const a of answers) assert.equal(text(a), 'alice-at-code');
    } finally {
      await Promise.all(agents.map((a) => a.close()));
    }
    assert.equal((peers.counts.get('refresh_token') ?? 0) - refreshesBefore, 1, 'one refresh request reached the provider');
  });

  test('a token the upstream refuses before its time (401) is refreshed once and the call sent again', async () => {
    const last = peers.seen.at(-1)!.replace(/^Bearer /, '');
    peers.refusedJti.add(String(decodeJwt(last).jti));
    const refreshesBefore = peers.counts.get('refresh_token') ?? 0;
    const agent = await mcp(alice);
    try {
      assert.equal(text(await agent.callTool({ name: 'code__whoami' })), 'alice-at-code');
    } finally {
      await agent.close();
    }
    assert.equal((peers.counts.get('refresh_token') ?? 0) - refreshesBefore, 1);
    assert.notEqual(peers.seen.at(-1), `Bearer ${last}`, 'the call went again with the new token');
  });

  // Another instance's claim, as it stores one: until the database's clock is 1.5 s further. This instance waits
  // for it with reads; a write every 100 ms (a claim tried again and again) would add ~45 write statements.
  test('a refresh another instance holds is waited for with reads, then taken over: a few writes, not one every 100 ms', async () => {
    const agent = await mcp(alice);
    try {
      clock.advance(2 * 3600_000);
      await svc.database.write((tx) =>
        tx
          .update(upstreamAccounts)
          .set({ refreshingUntil: sql`CAST(unixepoch('subsec') * 1000 AS INTEGER) + 1500` })
          .where(and(eq(upstreamAccounts.userId, alice.id), eq(upstreamAccounts.upstream, 'code'))),
      );
      const writes = async () => (await scrape(metricsUrl)).value('svc_database_statements_total', { kind: 'write' });
      const [refreshesBefore, writesBefore, started] = [peers.counts.get('refresh_token') ?? 0, await writes(), Date.now()];
      assert.equal(text(await agent.callTool({ name: 'code__whoami' })), 'alice-at-code');
      const [waited, written] = [Date.now() - started, (await writes()) - writesBefore];
      assert.ok(waited >= 1400, `the call waited for the claim to lapse (${waited} ms)`);
      assert.equal((peers.counts.get('refresh_token') ?? 0) - refreshesBefore, 1, 'then this instance refreshed, once');
      assert.ok(written <= 30, `${written} write statements during a ${waited} ms wait`);
    } finally {
      await agent.close();
    }
  });

  test('an upstream that names another authorization server later gets nothing: no token, no secret, no revocation', async () => {
    const heard: string[] = [];
    const rogue = createServer((req, res) => {
      heard.push(`${req.method} ${req.url}`);
      const base = `http://127.0.0.1:${(rogue.address() as { port: number }).port}`;
      if (req.url === '/.well-known/oauth-authorization-server')
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            issuer: base,
            authorization_endpoint: `${base}/auth`,
            token_endpoint: `${base}/token`,
            revocation_endpoint: `${base}/revoke`,
            registration_endpoint: `${base}/reg`,
            response_types_supported: ['code'],
            code_challenge_methods_supported: ['S256'],
          }),
        );
      else res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"invalid_request"}');
    });
    await new Promise<void>((r) => rogue.listen(0, '127.0.0.1', r));
    peers.namedIssuer = `http://127.0.0.1:${(rogue.address() as { port: number }).port}`;
    try {
      await svc.restart(); // the server's metadata is read again
      clock.advance(2 * 3600_000); // every token due for a refresh
      const agent = await mcp(alice);
      try {
        const answer = (await agent.callTool({ name: 'code__whoami' })) as CallToolResult;
        assert.equal(answer.isError, true);
        assert.match(text(answer), /upstream "code" unavailable/);
        const connect = await (await browserOf('alice')).request('/upstreams/code/connect', { headers: { accept: 'text/html' } });
        assert.equal(connect.status, 503);
        assert.match(await connect.text(), /names the authorization server .* svc sends nothing there/);
      } finally {
        await agent.close();
      }
      assert.deepEqual(
        heard.filter((h) => !h.startsWith('GET /.well-known/')),
        [],
        'nothing but its metadata was asked of the other server',
      );
    } finally {
      peers.namedIssuer = null;
      await new Promise<void>((r) => rogue.close(() => r()));
      await svc.restart();
    }
    const agent = await mcp(alice);
    try {
      assert.equal(text(await agent.callTool({ name: 'code__whoami' })), 'alice-at-code', 'back to the pinned server, refreshed there');
    } finally {
      await agent.close();
    }
  });

  test('Disconnect deletes the tokens and revokes them at the provider', async () => {
    const browser = await browserOf('alice');
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    const r = await browser.request('/upstreams/code/disconnect', { method: 'POST', form: {} });
    assert.equal(r.status, 303);
    assert.equal((await listAccounts(svc.database.db, { userId: alice.id })).length, 0);
    await waitFor('the grant was revoked at the provider', async () => (peers.counts.get('revoked') ?? 0) > revokedBefore);
    const agent = await mcp(alice);
    try {
      const answer = (await agent.callTool({ name: 'code__whoami' })) as CallToolResult;
      assert.equal(answer.isError, true);
      assert.match(text(answer), /not_connected/);
    } finally {
      await agent.close();
    }
  });

  test('with oauth_client_id, svc connects as that client (its secret at the token endpoint) and registers nothing', async () => {
    const browser = await browserOf('alice');
    const start = await browser.request('/upstreams/code2/connect', { headers: { accept: 'text/html' } });
    assert.equal(start.status, 302);
    const authorization = new URL(start.headers.get('location')!);
    assert.equal(authorization.searchParams.get('client_id'), CONFIGURED.id);
    const before = peers.counts.get(`client:${CONFIGURED.id}`) ?? 0;
    const back = await atProvider(authorization.href, 'alice-at-code', svc.url);
    assert.equal((await callback(browser, back)).status, 303);
    assert.equal((peers.counts.get(`client:${CONFIGURED.id}`) ?? 0) - before, 1, 'the code was exchanged by the configured client');
    const pinned = await findClient(svc.database.db, 'code2');
    assert.equal(pinned?.kind, 'configured', 'nothing registered: the configured client, pinned to its server');
    assert.equal(pinned.clientSecretSealed, null);
    assert.equal(pinned.issuer, peers.issuer);
    assert.equal((await fetch(`${svc.url}/upstreams/code2/client.json`)).status, 404, 'no metadata document either');
    const account = (await listAccounts(svc.database.db, { userId: alice.id })).find((a) => a.upstream === 'code2');
    assert.equal(account?.clientId, CONFIGURED.id);
  });

  test('a refused refresh marks the connection reconnect: the call says to connect again, and so does the page', async () => {
    const browser = await browserOf('alice');
    assert.equal((await callback(browser, await startConnect(browser, 'alice-at-code'))).status, 303);
    peers.refuseTokens = true;
    try {
      clock.advance(2 * 3600_000);
      const agent = await mcp(alice);
      try {
        const answer = (await agent.callTool({ name: 'code__whoami' })) as CallToolResult;
        assert.equal(answer.isError, true);
        assert.match(text(answer), /must be connected again/);
      } finally {
        await agent.close();
      }
    } finally {
      peers.refuseTokens = false;
    }
    assert.equal((await listAccounts(svc.database.db, { userId: alice.id }))[0]!.state, 'reconnect');
    assert.match(
      await (await browser.request('/', { headers: { accept: 'text/html' } })).text(),
      /data-upstream="code" data-state="reconnect"/,
    );
    const audit = JSON.parse((await svc.ws.svc(['audit', 'list', '--json'])).stdout) as { action: string; target: string }[];
    assert.ok(audit.some((r) => r.action === 'upstream.reconnect' && r.target === 'code'));
  });

  test("removing a user deletes their connections and revokes them at the provider; another person's stay", async () => {
    const carol = await svc.addUser({ uid: 'carol', email: 'carol@example.com', password: 'carol password 1', labels: '' });
    const browser = await browserOf('carol');
    assert.equal((await callback(browser, await startConnect(browser, 'carol-at-code'))).status, 303);
    const root = await svc.addUser({ uid: 'root', email: 'root@example.com', labels: '', admin: true });
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    const aliceBefore = await listAccounts(svc.database.db, { userId: alice.id });
    const removed = await fetch(`${svc.url}/admin/api/users/carol`, {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${await svc.tokenFor(root, undefined, 'admin')}` },
    });
    assert.equal(removed.status, 204);
    assert.equal((await listAccounts(svc.database.db, { userId: carol.id })).length, 0);
    await waitFor("carol's grant was revoked at the provider", async () => (peers.counts.get('revoked') ?? 0) > revokedBefore);
    assert.deepEqual(await listAccounts(svc.database.db, { userId: alice.id }), aliceBefore);
  });

  test('svc user remove on the command line: the running svc revokes the connections at the provider', async () => {
    const dave = await svc.addUser({ uid: 'dave', email: 'dave@example.com', password: 'dave password 1', labels: '' });
    const browser = await browserOf('dave');
    assert.equal((await callback(browser, await startConnect(browser, 'dave-at-code'))).status, 303);
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    const removed = await svc.ws.svc(['user', 'remove', 'dave']);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, /deleted the user's connections to code; svc serve revokes them at those servers within a minute/);
    assert.equal((await listAccounts(svc.database.db, { userId: dave.id })).length, 0);
    await waitFor(
      'the running svc to revoke what the command line deleted',
      async () => (peers.counts.get('revoked') ?? 0) > revokedBefore,
      {
        everyMs: 200,
        timeoutMs: 30_000,
      },
    );
    await waitFor('the queue to be empty', async () => (await svc.database.db.select().from(upstreamRevocations).all()).length === 0);
  });

  test('a revocation the provider cannot take just now is tried again later, and then done', async () => {
    const erin = await svc.addUser({ uid: 'erin', email: 'erin@example.com', password: 'erin password 1', labels: '' });
    const browser = await browserOf('erin');
    assert.equal((await callback(browser, await startConnect(browser, 'erin-at-code'))).status, 303);
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    peers.refuseRevocations = true;
    try {
      const r = await browser.request('/upstreams/code/disconnect', { method: 'POST', form: {} });
      assert.equal(r.status, 303, 'Disconnect holds: her tokens are deleted here whatever the provider says');
      assert.equal((await listAccounts(svc.database.db, { userId: erin.id })).length, 0);
      assert.ok((peers.counts.get('revocation refused') ?? 0) > 0, 'svc tried');
      const [queued] = await svc.database.db.select().from(upstreamRevocations).all();
      assert.equal(queued?.userId, erin.id);
      assert.equal(queued.attempts, 1);
      assert.ok(queued.nextAt > clock.now(), 'to be tried again later');
    } finally {
      peers.refuseRevocations = false;
    }
    assert.equal(peers.counts.get('revoked') ?? 0, revokedBefore);
    clock.advance(61_000);
    await waitFor('the next sweep to revoke her grant', async () => (peers.counts.get('revoked') ?? 0) > revokedBefore, {
      everyMs: 200,
      timeoutMs: 30_000,
    });
    await waitFor('the queue to be empty', async () => (await svc.database.db.select().from(upstreamRevocations).all()).length === 0);
  });

  test('a revocation for a server this instance does not know waits for one that does, and is sent nowhere', async () => {
    // As another instance of a rollout would queue it: an upstream, or a server of it, that this one is not configured with.
    const rows = [
      { upstream: 'elsewhere', server: 'http://127.0.0.1:9/mcp' },
      { upstream: 'code', server: 'http://127.0.0.1:9/moved' },
    ];
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    const ids = await svc.database.write(async (tx) =>
      Promise.all(
        rows.map(async (r) => {
          const [row] = await tx
            .insert(upstreamRevocations)
            .values({
              userId: alice.id,
              ...r,
              issuer: 'http://127.0.0.1:9',
              clientId: 'another',
              accessSealed: 'sealed elsewhere',
              refreshSealed: null,
              queuedAt: clock.now(),
              nextAt: clock.now(),
            })
            .returning({ id: upstreamRevocations.id });
          return row!.id;
        }),
      ),
    );
    try {
      await svc.restart(); // svc sweeps the queue as it starts
      const queued = async () => (await svc.database.db.select().from(upstreamRevocations).all()).filter((q) => ids.includes(q.id));
      await waitFor('both rows to be tried', async () => (await queued()).every((q) => q.attempts === 1), { everyMs: 100 });
      const after = await queued();
      assert.equal(after.length, 2, 'kept for an instance that knows their server, not dropped');
      for (const q of after) assert.ok(q.nextAt > clock.now(), 'to be tried again later');
      assert.equal(peers.counts.get('revoked') ?? 0, revokedBefore, 'and sent to no server meanwhile');
    } finally {
      await svc.database.write(async (tx) => {
        for (const id of ids) await tx.delete(upstreamRevocations).where(eq(upstreamRevocations.id, id));
      });
    }
  });

  test('Disconnect answers while the authorization server is slow to revoke, and the revocation goes on after', async () => {
    const fay = await svc.addUser({ uid: 'fay', email: 'fay@example.com', password: 'fay password 1', labels: '' });
    const browser = await browserOf('fay');
    assert.equal((await callback(browser, await startConnect(browser, 'fay-at-code'))).status, 303);
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    const gate = peers.holdRevocations();
    try {
      const r = await browser.request('/upstreams/code/disconnect', { method: 'POST', form: {} });
      assert.equal(r.status, 303, await r.text());
      assert.ok(gate.held > 0, 'svc asked the server to revoke');
      const [queued] = (await svc.database.db.select().from(upstreamRevocations).all()).filter((q) => q.userId === fay.id);
      assert.equal(queued?.attempts, 0, 'Disconnect answered while that request was still on its way, not after it failed');
      assert.equal(peers.counts.get('revoked') ?? 0, revokedBefore);
    } finally {
      gate.release();
    }
    await waitFor('the revocation to go through', async () => (peers.counts.get('revoked') ?? 0) > revokedBefore, { everyMs: 100 });
    await waitFor(
      'her row to leave the queue',
      async () => !(await svc.database.db.select().from(upstreamRevocations).all()).some((q) => q.userId === fay.id),
    );
  });

  test('someone who lost access to the upstream keeps Disconnect, and their connection is still theirs to end', async () => {
    const browser = await browserOf('alice');
    assert.equal((await callback(browser, await startConnect(browser, 'alice-at-code', 'code3'))).status, 303);
    // Through the command line, as an operator would: another process, whose change the running svc sees at once.
    const changed = await svc.ws.svc(['user', 'set', 'alice', '--labels', '']);
    assert.equal(changed.code, 0, changed.stderr);
    const page = await (await browser.request('/', { headers: { accept: 'text/html' } })).text();
    assert.match(page, /data-upstream="code3" data-state="connected"/, 'her own connection is still shown');
    const again = await browser.request('/upstreams/code3/connect', { headers: { accept: 'text/html' } });
    assert.equal(again.status, 404, `but she cannot connect again: ${again.headers.get('location')}`);
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    const gone = await browser.request('/upstreams/code3/disconnect', { method: 'POST', form: {} });
    assert.equal(gone.status, 303, await gone.text());
    assert.ok(!(await listAccounts(svc.database.db, { userId: alice.id })).some((a) => a.upstream === 'code3'));
    await waitFor('her grant revoked at the provider', async () => (peers.counts.get('revoked') ?? 0) > revokedBefore);
  });
});
