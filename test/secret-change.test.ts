// After the session secret changes (CONTRACT §6.1): svc is started with one secret, a person connects an `auth = oauth`
// upstream and calls an `identity = jwt` upstream that verifies svc's assertion against its JWKS; then svc starts again
// on the same database with another secret. `svc check` (the CLI as a process) and the start say so, naming what is
// affected and no secret; the identity upstream is called with a new key the JWKS lists; the person's account shows
// and answers `reconnect`; the tokens of that account, once disconnected, stay queued rather than dropped unsent; and
// connecting again works under the new secret. The upstream's provider makes svc's registration a confidential client
// (it issues a client secret, which svc keeps sealed): under the new secret svc registers again rather than asking for
// tokens as a public client, which the provider would refuse; two instances doing so at once end with one client.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { atProvider, startOauthUpstream, type OauthUpstream } from './helpers/oauth-upstream.ts';
import { DEFAULT_AUTH, newSecret } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';
import type { User } from '../src/store/users.ts';
import { eq } from 'drizzle-orm';
import { findClient, listAccounts, putClient, type UpstreamClientRow } from '../src/store/upstream-accounts.ts';
import { upstreamClients, upstreamRevocations } from '../src/db/schema.ts';
import { OauthClients } from '../src/upstream/oauth.ts';
import type { Fields, Logger } from '../src/log.ts';
import { agentOf, signedIn } from './helpers/agents.ts';

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

/**
 * An HTTP MCP server with identity = jwt in front of it, as an operator's would be: a request with X-Svc-Identity is
 * served only when the assertion verifies against svc's JWKS (else 401); its tool `whoami` answers the verified
 * subject and the key that signed, `anonymous` for a request without one (svc lists tools without a caller).
 */
async function startTeller(jwksUrl: () => URL) {
  const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  let jwks: ReturnType<typeof createRemoteJWKSet> | null = null;
  const refused: string[] = [];
  let url = '';
  const http = createServer(async (req, res) => {
    const assertion = req.headers['x-svc-identity'];
    let who = 'anonymous';
    if (typeof assertion === 'string') {
      // A key the set has not seen is fetched at once: a new key signs from svc's restart on.
      jwks ??= createRemoteJWKSet(jwksUrl(), { cooldownDuration: 0 });
      try {
        const { payload, protectedHeader } = await jwtVerify(assertion, jwks, { audience: url, algorithms: ['ES256'] });
        who = `${payload.sub} ${protectedHeader.kid}`;
      } catch (e) {
        refused.push(`${decodeProtectedHeader(assertion).kid}: ${(e as Error).message}`);
        res.writeHead(401).end();
        return;
      }
    }
    const server = new McpServer({ name: 'teller', version: '1.0.0' });
    server.registerTool('whoami', { description: 'Who svc says is calling.' }, async () => ({ content: [{ type: 'text', text: who }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((ok) => http.listen(0, '127.0.0.1', ok));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
  return { url, refused, stop: () => new Promise<void>((ok) => http.close(() => ok())) };
}

describe('after the session secret changes', () => {
  let peers: OauthUpstream;
  let teller: Awaited<ReturnType<typeof startTeller>>;
  let svc: TestServer;
  let alice: User;
  const firstSecret = newSecret();
  const secondSecret = newSecret();
  const logged: { event: string; fields: Fields }[] = [];
  const log: Logger = {
    info: (event, fields = {}) => logged.push({ event, fields }),
    warn: (event, fields = {}) => logged.push({ event, fields }),
    error: (event, fields = {}) => logged.push({ event, fields }),
  };
  let firstKid = '';
  /** svc's registration at code's provider as the first secret sealed it */
  let firstClient: UpstreamClientRow;
  const registeredAgain = () => logged.filter((l) => l.event === 'upstream_client_registered_again');
  const noSecretLogged = () => {
    for (const secret of [firstSecret, secondSecret, ...peers.issuedSecrets])
      assert.ok(!JSON.stringify(logged).includes(secret), 'no secret is logged');
  };

  const mcp = (user: User) => agentOf(svc, user);
  const browserOf = (uid: string) => signedIn(svc.url, uid);
  const connectAlice = async () => {
    const browser = await browserOf('alice');
    const start = await browser.request('/upstreams/code/connect', { headers: { accept: 'text/html' } });
    assert.equal(start.status, 302, await start.text());
    const back = await atProvider(start.headers.get('location')!, 'alice-at-code', svc.url);
    const done = await browser.request(back.pathname + back.search, { headers: { accept: 'text/html' } });
    assert.equal(done.status, 303, await done.text());
    return browser;
  };
  const jwksKids = async () =>
    ((await (await fetch(`${svc.url}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
  const check = (secret: string) => svc.ws.svc(['check'], { env: { SVC_SESSION_SECRET: secret } });
  const queued = async () => (await svc.database.db.select().from(upstreamRevocations).all()).filter((q) => q.userId === alice.id);

  before(async () => {
    // svc asks to register as a public client (`none`); this provider makes it client_secret_post and issues a secret.
    peers = await startOauthUpstream({ registersAs: 'client_secret_post' });
    teller = await startTeller(() => new URL(`${svc.url}/.well-known/jwks.json`));
    svc = await startTestServer({
      log,
      env: { SVC_SESSION_SECRET: firstSecret },
      auth: `${DEFAULT_AUTH}
[upstream code]
url = ${peers.upstreamUrl}
auth = oauth
oauth_scopes = tools
review = auto

[upstream teller]
url = ${teller.url}
identity = jwt
review = auto
`,
    });
    alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1', labels: '' });
    await svc.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', labels: '', admin: true });
    await waitFor('the teller listed', async () => (await svc.ws.svc(['tool', 'list'])).stdout.includes('teller\twhoami'), {
      everyMs: 200,
    });
  });
  after(async () => {
    await svc?.stop();
    await teller?.stop();
    await peers?.stop();
  });

  test('under the first secret: alice is connected to code and the teller verifies who calls', async () => {
    await connectAlice();
    await waitFor('code listed with her token', async () => (await svc.ws.svc(['tool', 'list'])).stdout.includes('code\twhoami'), {
      everyMs: 200,
    });
    const agent = await mcp(alice);
    try {
      assert.equal(text(await agent.callTool({ name: 'code__whoami' })), 'alice-at-code');
      const [sub, kid] = text(await agent.callTool({ name: 'teller__whoami' })).split(' ');
      assert.equal(sub, 'alice');
      firstKid = kid!;
    } finally {
      await agent.close();
    }
    assert.deepEqual(await jwksKids(), [firstKid]);
    firstClient = (await findClient(svc.database.db, 'code'))!;
    assert.equal(firstClient.kind, 'dcr');
    assert.notEqual(firstClient.clientSecretSealed, null, 'the client secret the provider issued is kept, sealed');
    assert.equal(peers.issuedSecrets.length, 1);
    assert.ok((peers.counts.get(`client:${firstClient.clientId}`) ?? 0) > 0, 'svc asked for tokens with it');
    const same = await check(firstSecret);
    assert.equal(same.code, 0, same.stderr);
    assert.ok(!same.stderr.includes('auth.session'), `nothing to say while the secret is the same: ${same.stderr}`);
  });

  test('svc check with another secret warns, naming the signing key and the accounts affected, and no secret', async () => {
    // Registrations that keep no secret (a public client, a client metadata document) are not named: nothing to open.
    const keptless = { server: 'elsewhere', issuer: peers.issuer, clientSecretSealed: null, registeredAt: 0 };
    await svc.database.write(async (tx) => {
      await putClient(tx, { ...keptless, upstream: 'public', clientId: 'public-client', kind: 'dcr' });
      await putClient(tx, { ...keptless, upstream: 'document', clientId: 'https://svc.example/client.json', kind: 'cimd' });
    });
    const r = await check(secondSecret);
    assert.equal(r.code, 0, 'a warning, not a failure');
    assert.match(r.stderr, /svc: check: warning: auth\.session: the session secret is not the one that sealed/);
    assert.match(r.stderr, new RegExp(`identity signing key ${firstKid} cannot be opened`));
    assert.match(r.stderr, /1 person's account at code \(1\) cannot be opened; svc serve will mark them reconnect/);
    assert.match(
      r.stderr,
      /svc's own registration at the authorization server of code cannot be opened .*svc serve will register again as a new client/,
    );
    assert.match(r.stderr, /put the previous one back before svc serve starts/);
    for (const secret of [firstSecret, secondSecret, ...peers.issuedSecrets])
      assert.ok(!(r.stdout + r.stderr).includes(secret), 'no secret is printed');
    assert.equal((await listAccounts(svc.database.db, { userId: alice.id }))[0]!.state, 'connected', 'svc check changes nothing');
  });

  test('started with the other secret: it says so, signs with a new key the JWKS lists, and alice must reconnect', async () => {
    logged.length = 0;
    await svc.restart({ SVC_SESSION_SECRET: secondSecret });
    const said = logged.filter((l) => l.event === 'session_secret_changed');
    assert.equal(said.length, 1, JSON.stringify(logged));
    assert.equal(said[0]!.fields.signing_key, firstKid);
    assert.equal(said[0]!.fields.accounts, 1);
    assert.equal(said[0]!.fields.registrations, 1);
    assert.match(String(said[0]!.fields.message), /svc will register again as a new client/);
    noSecretLogged();

    const agent = await mcp(alice);
    try {
      const answer = text(await agent.callTool({ name: 'teller__whoami' }));
      const [sub, kid] = answer.split(' ');
      assert.equal(sub, 'alice', `the teller verified the assertion: ${answer} ${JSON.stringify(teller.refused)}`);
      assert.notEqual(kid, firstKid, 'a new key signs');
      const kids = await jwksKids();
      assert.ok(kids.includes(kid!) && kids.includes(firstKid), `the JWKS lists the new key, and the old one for a day: ${kids}`);

      const names = (await agent.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('code__connect') && !names.includes('code__whoami'), JSON.stringify(names));
      const call = (await agent.callTool({ name: 'code__whoami' })) as CallToolResult;
      assert.equal(call.isError, true);
      assert.match(text(call), /your account at code must be connected again; connect it at .*\/upstreams\/code\/connect$/);
    } finally {
      await agent.close();
    }
    assert.equal((await listAccounts(svc.database.db, { userId: alice.id }))[0]!.state, 'reconnect');
    const page = await (await browserOf('alice')).request('/', { headers: { accept: 'text/html' } });
    assert.match(await page.text(), /data-upstream="code" data-state="reconnect"/);
    const admin = await (await browserOf('boss')).request('/admin/tools', { headers: { accept: 'text/html' } });
    assert.match(await admin.text(), /<span data-connected="alice">alice \(must connect again\)/);
    const audit = JSON.parse((await svc.ws.svc(['audit', 'list', '--json'])).stdout) as { action: string; target: string }[];
    assert.ok(audit.some((r) => r.action === 'upstream.reconnect' && r.target === 'code'));
    assert.ok(audit.some((r) => r.action === 'keys.rotate'));

    const after = await check(secondSecret);
    assert.ok(!/signing key|account/.test(after.stderr), `settled but for the registration: ${after.stderr}`);
    assert.match(
      after.stderr,
      /svc's own registration at the authorization server of code cannot be opened/,
      'made again when next needed',
    );
    assert.equal(peers.issuedSecrets.length, 1, 'not yet registered again');
  });

  test('her old tokens, once disconnected, stay queued for an instance with the previous secret; svc check says so', async () => {
    const revokedBefore = peers.counts.get('revoked') ?? 0;
    const browser = await browserOf('alice');
    const r = await browser.request('/upstreams/code/disconnect', { method: 'POST', form: {} });
    assert.equal(r.status, 303, await r.text());
    await waitFor('the sweep to try them', async () => (await queued()).some((q) => q.attempts === 1), { everyMs: 100 });
    assert.equal((await queued()).length, 1, 'kept, not dropped unsent');
    assert.equal(peers.counts.get('revoked') ?? 0, revokedBefore, 'and sent nowhere');
    assert.equal(logged.filter((l) => l.event === 'upstream_revoke_postponed').length, 1, 'said once');
    const told = await check(secondSecret);
    assert.match(told.stderr, /queued revocations at code \(1\) cannot be opened/);
    assert.ok(!told.stderr.includes('signing key'), told.stderr);
  });

  test('alice connects again under the new secret: svc registers again, once, and her calls work', async () => {
    const browser = await connectAlice();
    const registered = (await findClient(svc.database.db, 'code'))!;
    assert.notEqual(registered.clientId, firstClient.clientId, 'a new client');
    assert.equal(peers.issuedSecrets.length, 2, 'registered once more');
    assert.notEqual(registered.clientSecretSealed, null);
    assert.equal((await listAccounts(svc.database.db, { userId: alice.id }))[0]!.clientId, registered.clientId);
    assert.ok((peers.counts.get(`client:${registered.clientId}`) ?? 0) > 0, 'her tokens were asked for as the new client');
    assert.equal(registeredAgain().length, 1, JSON.stringify(logged));
    assert.deepEqual(registeredAgain()[0]!.fields, {
      upstream: 'code',
      client_id: registered.clientId,
      replaced: firstClient.clientId,
      reason: 'its client secret was sealed under another session secret',
    });
    noSecretLogged();
    const agent = await mcp(alice);
    try {
      assert.equal(text(await agent.callTool({ name: 'code__whoami' })), 'alice-at-code');
    } finally {
      await agent.close();
    }
    const page = await browser.request('/', { headers: { accept: 'text/html' } });
    assert.match(await page.text(), /data-upstream="code" data-state="connected"/);
    const settled = await check(secondSecret);
    assert.ok(!settled.stderr.includes('registration'), `nothing more to say of svc's registration: ${settled.stderr}`);
  });

  // Two instances (two OauthClients on the one database) find the registration sealed under the previous secret at
  // the same moment: the provider holds each registration until the other has arrived, so both register; the first
  // stored replaces the old row, the other instance uses that client, and only the first says so.
  test('two instances registering again at once: the first stored stands and both use it, said once', async () => {
    await svc.database.write((tx) => tx.update(upstreamClients).set(firstClient).where(eq(upstreamClients.upstream, 'code')));
    logged.length = 0;
    const upstream = svc.config.upstreams.find((u) => u.name === 'code')!;
    const requestsBefore = peers.registrationRequests;
    peers.registrationsTogether = true;
    try {
      const [a, b] = await Promise.all([0, 1].map(() => new OauthClients(svc.config, svc.database, log).party(upstream)));
      assert.equal(peers.registrationRequests - requestsBefore, 2, 'both registered');
      const stored = (await findClient(svc.database.db, 'code'))!;
      assert.notEqual(stored.clientId, firstClient.clientId);
      assert.notEqual(stored.clientSecretSealed, null);
      assert.equal(a!.client.client_id, stored.clientId);
      assert.equal(b!.client.client_id, stored.clientId);
      assert.equal(registeredAgain().length, 1, JSON.stringify(logged));
      assert.equal(registeredAgain()[0]!.fields.client_id, stored.clientId);
      noSecretLogged();
    } finally {
      peers.registrationsTogether = false;
    }
  });
});
