// Upstreams that act for each person (CONTRACT §6.2) on several instances (§5 Durability): two `svc serve`
// processes on one real sqld, started from one configuration file with the same `[upstream code] auth = oauth`
// section and one environment (the same session secret), in front of oidc-provider (the upstream's authorization
// server: dynamic registration, resource indicators issuing JWT access tokens for the upstream's URL, refresh tokens,
// revocation) and an SDK MCP server that accepts only those tokens, verified with jose against the provider's JWKS.
// Both instances share one base_url, as behind a load balancer; the test addresses each directly. A person connects
// through one instance and is themselves at the upstream through the other; svc registers itself at the provider
// once for both; a Disconnect through one holds on the other's very next call. A second pair of instances connects
// its first two people at the same moment, one through each, and must still end with one client at the provider.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { and, eq } from 'drizzle-orm';
import { decodeJwt } from 'jose';
import { install, serveTogether, sourceRunner, type Installation, type ServeProcess } from './helpers/installation.ts';
import { startSqld, type Sqld } from './helpers/sqld.ts';
import { Browser, bearer } from './helpers/http.ts';
import { atProvider, startOauthUpstream, type OauthUpstream, type OauthUpstreamOptions } from './helpers/oauth-upstream.ts';
import { tokenRecord, userRecord } from './helpers/records.ts';
import { DEFAULT_AUTH } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';
import { hashPassword } from '../src/auth/passwords.ts';
import { openDatabase, type Database } from '../src/db/open.ts';
import { upstreamAccounts } from '../src/db/schema.ts';
import { createToken } from '../src/store/tokens.ts';
import { findClient, listAccounts } from '../src/store/upstream-accounts.ts';
import { createUser, getUser } from '../src/store/users.ts';

type Instance = 'a' | 'b';
const PEOPLE = ['alice', 'bob', 'carol'] as const;
type Uid = (typeof PEOPLE)[number];

/** A person at a browser: one cookie jar, whichever instance a request goes to. */
class Person {
  readonly cookies = new Map<string, string>();
  constructor(
    private readonly cluster: Cluster,
    readonly uid: Uid,
  ) {}

  /** A request to one instance; state-changing ones come from base_url's origin, as a browser's would. */
  async on(at: Instance, path: string, init: Parameters<Browser['request']>[1] = {}): Promise<Response> {
    const b = new Browser(this.cluster.servers[at].url);
    for (const [k, v] of this.cookies) b.cookies.set(k, v);
    const r = await b.request(path, { origin: this.cluster.baseUrl, headers: { accept: 'text/html' }, ...init });
    this.cookies.clear();
    for (const [k, v] of b.cookies) this.cookies.set(k, v);
    return r;
  }

  async login(at: Instance): Promise<this> {
    const r = await this.on(at, '/login', { form: { username: this.uid, password: `${this.uid} password 1` } });
    assert.equal(r.status, 303, `${this.uid} signs in through ${at}`);
    return this;
  }

  /** Connect through `at`: the authorization URL svc sends the browser to. */
  async startConnect(at: Instance): Promise<URL> {
    const r = await this.on(at, '/upstreams/code/connect');
    assert.equal(r.status, 302, await r.text());
    const authorization = new URL(r.headers.get('location')!);
    assert.equal(authorization.origin, this.cluster.peers.issuer);
    assert.equal(authorization.searchParams.get('redirect_uri'), `${this.cluster.baseUrl}/upstreams/code/callback`, 'the shared base_url');
    assert.equal(authorization.searchParams.get('resource'), this.cluster.peers.upstreamUrl);
    return authorization;
  }

  /** The provider's pages walked as `login`, and the callback brought back to `at`. */
  async finishConnect(authorization: URL, login: string, at: Instance): Promise<Response> {
    const callback = await atProvider(authorization.href, login, this.cluster.baseUrl);
    return this.on(at, callback.pathname + callback.search);
  }

  /** Connect started through `start` and finished through `back`; the authorization URL svc sent the browser to. */
  async connect(login: string, start: Instance, back: Instance): Promise<URL> {
    const authorization = await this.startConnect(start);
    const done = await this.finishConnect(authorization, login, back);
    assert.equal(done.status, 303, await done.text());
    assert.equal(done.headers.get('location'), '/?connected=code');
    return authorization;
  }
}

interface Cluster {
  readonly sqld: Sqld;
  readonly peers: OauthUpstream;
  readonly inst: Installation;
  /** the base_url both instances are configured with (nothing listens there: requests go to each instance) */
  readonly baseUrl: string;
  /** this test's own connection to the database, for what svc stored */
  readonly database: Database;
  readonly servers: Record<Instance, ServeProcess>;
  /** a personal token (scope mcp) of each person */
  readonly tokens: Record<Uid, string>;
  person(uid: Uid): Person;
  /** An MCP client of `uid`'s agent on instance `at`, closed at stop(). */
  mcp(uid: Uid, at: Instance): Promise<Client>;
  /** The person's account at the upstream as stored, or null. */
  accountOf(uid: Uid): Promise<{ clientId: string; state: string } | null>;
  stop(): Promise<void>;
}

/** libfaketime (Debian's `libfaketime`): preloaded into a process, it moves that process's wall clock, as on a host set wrong. */
const FAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

/** The environment that runs a process with its host's clock `ahead` (e.g. `+90s`); timers keep the real monotonic clock. */
function clockAhead(env: NodeJS.ProcessEnv, ahead: string): NodeJS.ProcessEnv {
  assert.ok(existsSync(FAKETIME), `${FAKETIME} is missing: install Debian's libfaketime (.ci/run does)`);
  return { ...env, LD_PRELOAD: FAKETIME, FAKETIME: ahead, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_NO_CACHE: '1' };
}

/**
 * sqld, the peers, and two `svc serve` processes on it from one configuration file and one environment; with
 * `clockOfB`, instance B's host clock is that far off (A's and sqld's are right).
 */
async function startCluster(options: OauthUpstreamOptions & { clockOfB?: string } = {}): Promise<Cluster> {
  const sqld = await startSqld({ auth: true });
  const peers = await startOauthUpstream(options);
  const section = `
[upstream code]
url = ${peers.upstreamUrl}
auth = oauth
oauth_scopes = tools
review = auto
`;
  const inst = await install(sourceRunner, { auth: `${DEFAULT_AUTH}${section}`, remote: { url: sqld.url, token: sqld.token } });
  const migrated = await inst.cli(['migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const database = await openDatabase(sqld.url, sqld.token);
  const tokens = {} as Record<Uid, string>;
  for (const uid of PEOPLE) {
    const passwordHash = await hashPassword(`${uid} password 1`);
    const user = await database.write((tx) => createUser(tx, userRecord({ uid, email: `${uid}@example.com`, passwordHash })));
    tokens[uid] = (await database.write(async (tx) => createToken(tx, user.id, tokenRecord('agent'), await database.tokenEpoch(tx)))).token;
  }

  // One configuration file for both, byte for byte, listening on port 0; one environment (inst.env: the same
  // SVC_SESSION_SECRET, so each instance opens the tokens and the sessions the other sealed, and the database token).
  const config = join(inst.dir, 'serve.ini');
  writeFileSync(
    config,
    `[server]\nlisten = 127.0.0.1:0\nbase_url = ${inst.url}\ndatabase = ${inst.database}\ndatabase_token_env = SVC_DATABASE_TOKEN\n[auth]\n${DEFAULT_AUTH}${section}`,
  );
  const { clockOfB } = options;
  const envOf = (name: Instance) => (name === 'b' && clockOfB !== undefined ? clockAhead(inst.env, clockOfB) : inst.env);
  const servers: Cluster['servers'] = await serveTogether(sourceRunner, config, ['a', 'b'] as const, envOf);

  const clients: Client[] = [];
  const cluster: Cluster = {
    sqld,
    peers,
    inst,
    baseUrl: inst.url,
    database,
    servers,
    tokens,
    person: (uid) => new Person(cluster, uid),
    async mcp(uid, at) {
      const client = new Client({ name: `agent of ${uid} at ${at}`, version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${servers[at].url}/mcp`), { requestInit: { headers: bearer(tokens[uid]) } }),
      );
      clients.push(client);
      return client;
    },
    async accountOf(uid) {
      return (await listAccounts(database.db, { userId: (await getUser(database.db, uid)).id, upstream: 'code' }))[0] ?? null;
    },
    async stop() {
      await Promise.allSettled(clients.map((c) => c.close()));
      for (const s of Object.values(servers)) s.child.kill('SIGTERM');
      await Promise.all(
        Object.values(servers).map(
          (s) =>
            new Promise<void>((ok) => (s.child.exitCode !== null || s.child.signalCode !== null ? ok() : s.child.once('exit', () => ok()))),
        ),
      );
      database.close();
      await peers.stop();
      inst.remove();
      await sqld.remove();
    },
  };
  return cluster;
}

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;
const subOf = (authorization: string) => String(decodeJwt(authorization.replace(/^Bearer /, '')).sub);
const names = async (client: Client) => (await client.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('code__'));

describe('people connected to an auth = oauth upstream through either of two instances on one sqld', () => {
  let c: Cluster;

  before(async () => {
    c = await startCluster();
  });
  after(async () => {
    await c?.stop();
  });

  test('alice connects through A (svc registers itself by DCR) and, through B, is herself at the upstream with the token A sealed', async () => {
    const alice = await c.person('alice').login('a');
    const page = await alice.on('b', '/');
    assert.match(await page.text(), /data-upstream="code" data-state="none"/, "B's token page, with the session made on A: not connected");
    assert.deepEqual(await names(await c.mcp('alice', 'b')), ['code__connect'], 'before connecting, B offers only code__connect');

    const authorization = await alice.connect('alice-at-code', 'a', 'a');
    assert.equal(c.peers.counts.get('registration'), 1, 'svc registered itself at the provider');
    assert.equal(c.peers.registrationRequests, 1);
    const registration = await findClient(c.database.db, 'code');
    assert.equal(registration?.kind, 'dcr');
    assert.equal(registration.clientId, authorization.searchParams.get('client_id'));
    assert.equal((await c.accountOf('alice'))?.clientId, registration.clientId);

    // A lists the upstream's tools with her token once she has connected (review = auto approves them); the tool
    // rows are in the database, so B offers them to her as soon as they are there.
    const agent = await c.mcp('alice', 'b');
    await waitFor('B to offer code__whoami to alice', async () => (await names(agent)).includes('code__whoami'), { everyMs: 100 });
    assert.deepEqual(await names(agent), ['code__whoami']);
    const before = c.peers.seen.length;
    const answer = await agent.callTool({ name: 'code__whoami' });
    assert.equal(answer.isError, undefined, text(answer));
    assert.equal(text(answer), 'alice-at-code');
    const sent = c.peers.seen.slice(before);
    assert.ok(sent.length > 0 && sent.every((h) => subOf(h) === 'alice-at-code'), 'B sent her token, and only hers');
    // B opened the token A sealed in the database: the one the provider issued at the exchange, not a new one.
    assert.equal(c.peers.counts.get('authorization_code'), 1);
    assert.equal(c.peers.counts.get('refresh_token') ?? 0, 0, 'no refresh was needed');
    const usedByA = new Set(c.peers.seen.slice(0, before).filter((h) => h !== ''));
    assert.ok(
      sent.every((h) => usedByA.has(h)),
      'the token B sent is the one A listed the tools with',
    );
    assert.ok(!c.peers.seen.some((h) => h.includes('svc_')), "svc's own tokens never reach the upstream");
  });

  test('bob connects through B with the registration A made: through A he is himself, and each person is themselves on both', async () => {
    const bob = await c.person('bob').login('b');
    const authorization = await bob.connect('bob-at-code', 'b', 'b');
    const registration = await findClient(c.database.db, 'code');
    assert.equal(
      authorization.searchParams.get('client_id'),
      registration?.clientId,
      'B sent bob to the provider as the client A registered',
    );
    assert.equal((await c.accountOf('bob'))?.clientId, registration?.clientId);
    assert.equal(c.peers.counts.get('registration'), 1, 'still one registration at the provider, shared by both instances');
    assert.equal(c.peers.registrationRequests, 1);

    // He is offered the tools his own connection listed: B listed them with his token as he connected.
    const bobOnA = await c.mcp('bob', 'a');
    await waitFor('A to offer code__whoami to bob', async () => (await names(bobOnA)).includes('code__whoami'), { everyMs: 100 });
    assert.deepEqual(await names(bobOnA), ['code__whoami']);
    assert.equal(text(await bobOnA.callTool({ name: 'code__whoami' })), 'bob-at-code');

    // Both people, through both instances, at the same moment: each gets their own account.
    const calls = [
      ['alice', 'a'],
      ['alice', 'b'],
      ['bob', 'a'],
      ['bob', 'b'],
    ] as const;
    const agents = await Promise.all(calls.map(([uid, at]) => c.mcp(uid, at)));
    const answers = await Promise.all(agents.map((agent) => agent.callTool({ name: 'code__whoami' })));
    assert.deepEqual(
      answers.map(text),
      calls.map(([uid]) => `${uid}-at-code`),
    );
  });

  test('a connection started through A finishes through B (no sticky sessions needed), and only once', async () => {
    const carol = await c.person('carol').login('b');
    const authorization = await carol.startConnect('a');
    const callback = await atProvider(authorization.href, 'carol-at-code', c.baseUrl);
    const done = await carol.on('b', callback.pathname + callback.search);
    assert.equal(done.status, 303, await done.text());
    const replay = await carol.on('a', callback.pathname + callback.search);
    assert.equal(replay.status, 400, 'the state was used up through B');
    const carolOnA = await c.mcp('carol', 'a');
    await waitFor('A to offer code__whoami to carol', async () => (await names(carolOnA)).includes('code__whoami'), { everyMs: 100 });
    assert.equal(text(await carolOnA.callTool({ name: 'code__whoami' })), 'carol-at-code');
    assert.equal(c.peers.counts.get('registration'), 1);
  });

  test("a Disconnect through B: alice's next call through A is not_connected and reaches nothing; bob's still works", async () => {
    const aliceOnA = await c.mcp('alice', 'a');
    assert.equal(text(await aliceOnA.callTool({ name: 'code__whoami' })), 'alice-at-code', 'A serves her just before');
    const revokedBefore = c.peers.counts.get('revoked') ?? 0;

    const alice = await c.person('alice').login('a');
    const r = await alice.on('b', '/upstreams/code/disconnect', { method: 'POST', form: {} });
    assert.equal(r.status, 303);
    assert.equal(await c.accountOf('alice'), null, 'her tokens are deleted');
    await waitFor('and revoked at the provider', async () => (c.peers.counts.get('revoked') ?? 0) > revokedBefore);

    // The MCP session on A was opened before the Disconnect, and A was not told: its very next call is refused.
    const before = c.peers.seen.length;
    const answer = (await aliceOnA.callTool({ name: 'code__whoami' })) as CallToolResult;
    assert.equal(answer.isError, true);
    assert.match(text(answer), /not_connected/);
    assert.match(text(answer), new RegExp(`connect it at ${c.baseUrl}/upstreams/code/connect$`));
    assert.equal(c.peers.seen.length, before, "alice's call reached no upstream");
    assert.deepEqual(await names(aliceOnA), ['code__connect']);
    assert.match(await (await alice.on('a', '/')).text(), /data-upstream="code" data-state="none"/);

    const bobOnA = await c.mcp('bob', 'a');
    assert.equal(text(await bobOnA.callTool({ name: 'code__whoami' })), 'bob-at-code', "bob's connection stays");

    for (const on of ['a', 'b'] as const) assert.doesNotMatch(c.servers[on].log(), /"level":"error"/, `svc ${on}'s log`);
  });
});

// Two instances with no registration yet whose first people connect at the same moment both register at the
// provider (it holds each /reg until the other arrives); svc keeps the first registration stored and both instances
// use that one client, so a refresh or a revocation through either presents the client the tokens were issued to.
// Access tokens live 30 s here, so every call refreshes first: calls through both instances at once must still make
// one refresh between them, or the provider, seeing a rotated refresh token twice, revokes the person's grant.

describe('the first two people connect at the same moment, one through each instance: one client at the provider', () => {
  let c: Cluster;
  const clientIdSent = {} as Record<Instance, string>;

  // Access tokens live 30 s: svc refreshes a token a minute before it expires, so every call refreshes first, with
  // the client of the instance the call is made through.
  before(async () => {
    c = await startCluster({ accessTokenTtl: 30, registrationsTogether: true, tokenDelayMs: 300 });
  });
  after(async () => {
    await c?.stop();
  });

  test('alice connects through A and bob through B, both at once', async () => {
    const [alice, bob] = await Promise.all([c.person('alice').login('a'), c.person('bob').login('b')]);
    const [viaA, viaB] = await Promise.all([alice.startConnect('a'), bob.startConnect('b')]);
    clientIdSent.a = viaA.searchParams.get('client_id')!;
    clientIdSent.b = viaB.searchParams.get('client_id')!;
    for (const [who, authorization, login, at] of [
      [alice, viaA, 'alice-at-code', 'a'],
      [bob, viaB, 'bob-at-code', 'b'],
    ] as const) {
      const done = await who.finishConnect(authorization, login, at);
      assert.equal(done.status, 303, await done.text());
    }
  });

  test('both instances send people to the provider as the one client svc stored', async () => {
    const stored = await findClient(c.database.db, 'code');
    const registrations = `${c.peers.registrationRequests} registration request(s) reached the provider`;
    assert.equal(clientIdSent.a, stored?.clientId, `A's client is the stored one; ${registrations}`);
    assert.equal(clientIdSent.b, stored?.clientId, `B's client is the stored one; ${registrations}`);
    assert.equal((await c.accountOf('alice'))?.clientId, stored?.clientId);
    assert.equal((await c.accountOf('bob'))?.clientId, stored?.clientId);
  });

  test('each person is themselves through both instances, each call refreshing their token first', async () => {
    const agent = await c.mcp('alice', 'a');
    await waitFor('the upstream listed with a connected token', async () => (await names(agent)).includes('code__whoami'), {
      everyMs: 100,
      timeoutMs: 15_000,
    });
    for (const uid of ['alice', 'bob'] as const)
      for (const at of ['a', 'b'] as const) {
        const answer = await (await c.mcp(uid, at)).callTool({ name: 'code__whoami' });
        const account = await c.accountOf(uid);
        const stored = await findClient(c.database.db, 'code');
        const why = `${uid} through ${at}: connected as client ${account?.clientId} (${account?.state}); stored client ${stored?.clientId}`;
        assert.equal(text(answer), `${uid}-at-code`, why);
      }
  });

  // The provider rotates refresh tokens (svc's registration is a public client) and revokes the whole grant when one
  // is presented twice; each token request takes 300 ms, so calls through both instances at once overlap a refresh.
  test("alice's calls through both instances at once, her token expiring: one instance refreshes, her grant survives", async () => {
    const revokedBefore = c.peers.counts.get('revoked') ?? 0;
    const agents = await Promise.all((['a', 'b', 'a', 'b', 'a', 'b', 'a', 'b'] as const).map((at) => c.mcp('alice', at)));
    const answers = await Promise.all(agents.map((agent) => agent.callTool({ name: 'code__whoami' })));
    assert.deepEqual(answers.map(text), Array(agents.length).fill('alice-at-code'));
    assert.equal(c.peers.counts.get('refresh reused') ?? 0, 0, 'no refresh token reached the provider twice');
    assert.equal(c.peers.counts.get('revoked') ?? 0, revokedBefore, 'no grant was revoked');
    assert.equal((await c.accountOf('alice'))?.state, 'connected');
    assert.equal(text(await agents[1]!.callTool({ name: 'code__whoami' })), 'alice-at-code', 'and her next call is hers too');
  });

  test('a refresh claimed by an instance that stopped midway lapses, and the next call refreshes after all', async () => {
    const aliceId = (await getUser(c.database.db, 'alice')).id;
    const claimedUntil = Date.now() + 1500;
    await c.database.write((tx) =>
      tx
        .update(upstreamAccounts)
        .set({ refreshingUntil: claimedUntil })
        .where(and(eq(upstreamAccounts.userId, aliceId), eq(upstreamAccounts.upstream, 'code'))),
    );
    const refreshesBefore = c.peers.counts.get('refresh_token') ?? 0;
    const answer = await (await c.mcp('alice', 'b')).callTool({ name: 'code__whoami' });
    assert.equal(text(answer), 'alice-at-code');
    assert.ok(Date.now() >= claimedUntil, 'B waited for the claim to lapse');
    assert.ok((c.peers.counts.get('refresh_token') ?? 0) > refreshesBefore, 'then refreshed the token itself');
    assert.equal((await c.accountOf('alice'))?.state, 'connected');
  });

  test('a Disconnect through the instance bob did not connect through revokes his grant at the provider', async () => {
    const bob = await c.person('bob').login('a');
    const revokedBefore = c.peers.counts.get('revoked') ?? 0;
    assert.equal((await bob.on('a', '/upstreams/code/disconnect', { method: 'POST', form: {} })).status, 303);
    assert.equal(await c.accountOf('bob'), null);
    await waitFor("bob's grant was revoked at the provider", async () => (c.peers.counts.get('revoked') ?? 0) > revokedBefore);
  });
});

// A host whose clock is off must neither take another instance's refresh claim early nor make its own lapse at once:
// B's clock runs 90 s ahead of A's and the database's, then 90 s behind, past a claim's whole hold (the upstream's
// timeout, 30 s, plus 10 s). Judged by B's own clock, every claim A makes has lapsed already for B (ahead), or every
// claim B makes has lapsed already for A (behind): two instances refresh at once, and the provider revokes alice's
// grant when it sees her rotated refresh token twice. Judged by the database's clock, as token lifetimes are, one waits.
for (const [skew, clockOfB] of [
  ['ahead', '+90s'],
  ['behind', '-90s'],
] as const)
  describe(`one instance's host clock 90 s ${skew}: refresh claims are judged by the database's clock`, () => {
    let c: Cluster;

    before(async () => {
      c = await startCluster({ accessTokenTtl: 30, tokenDelayMs: 300, clockOfB });
    });
    after(async () => {
      await c?.stop();
    });

    test(`B's clock is ${skew}: its log stamps times 90 s off A's`, async () => {
      const alice = await c.person('alice').login('b');
      await alice.connect('alice-at-code', 'a', 'a');
      const stamp = (log: string) => Date.parse((JSON.parse(log.trim().split('\n').at(-1)!) as { time: string }).time);
      const skewMs = stamp(c.servers.b.log()) - stamp(c.servers.a.log());
      assert.ok(clockOfB.startsWith('+') ? skewMs > 80_000 : skewMs < -80_000, `B's last log line is ${skewMs} ms after A's`);
    });

    test("alice's token refused on both instances: one claims the refresh, the other waits for it, her grant survives", async () => {
      const first = await c.mcp('alice', 'a');
      await waitFor('the upstream listed with a connected token', async () => (await names(first)).includes('code__whoami'), {
        everyMs: 100,
        timeoutMs: 15_000,
      });
      const aliceId = (await getUser(c.database.db, 'alice')).id;
      const claimHeld = async () => {
        const [row] = await c.database.db
          .select({ until: upstreamAccounts.refreshingUntil })
          .from(upstreamAccounts)
          .where(and(eq(upstreamAccounts.userId, aliceId), eq(upstreamAccounts.upstream, 'code')));
        return row?.until !== null && row?.until !== undefined;
      };
      const call = async (at: Instance) => text(await (await c.mcp('alice', at)).callTool({ name: 'code__whoami' }));
      assert.equal(await call('a'), 'alice-at-code', 'the upstream has seen her current token');
      const revokedBefore = c.peers.counts.get('revoked') ?? 0;
      const refreshesBefore = c.peers.counts.get('refresh_token') ?? 0;
      // Each round the upstream refuses the token both instances hold, so both must refresh. One instance's calls go
      // first and claim the refresh (each token request takes 300 ms); the other's are sent while that claim is held.
      // A claims and B (off) judges the claim in even rounds, B claims and A judges it in odd ones.
      for (let round = 0; round < 4; round++) {
        c.peers.refusedJti.add(String(decodeJwt(c.peers.seen.at(-1)!.replace(/^Bearer /, '')).jti));
        const [first, second] = (round % 2 === 0 ? ['a', 'b'] : ['b', 'a']) as [Instance, Instance];
        const firstCalls = [call(first), call(first)];
        await waitFor(`${first}'s claim on the refresh`, claimHeld, { everyMs: 10, timeoutMs: 10_000 });
        const answers = await Promise.all([...firstCalls, call(second), call(second)]);
        assert.deepEqual(answers, Array(4).fill('alice-at-code'), `round ${round}: ${first} claimed, ${second} waited`);
      }
      assert.ok((c.peers.counts.get('refresh_token') ?? 0) - refreshesBefore >= 4, 'at least one refresh a round');
      assert.equal(c.peers.counts.get('refresh reused') ?? 0, 0, 'no refresh token reached the provider twice');
      assert.equal(c.peers.counts.get('revoked') ?? 0, revokedBefore, 'no grant was revoked');
      assert.equal((await c.accountOf('alice'))?.state, 'connected');
    });
  });
