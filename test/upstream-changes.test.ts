// Change notifications and resource subscriptions through svc (CONTRACT §6.3, "Change notifications" and
// "resources/subscribe"): two small upstreams written here on the SDK's v2 server, each session its own (so svc's
// client holds a GET stream there): `eng` (labels eng: tools alpha and deploy, prompts brief and summary, resources
// note://one and note://two that take subscriptions) and `open` (no labels: tools hello and wave). Callers hold
// streams in both eras: a 2025 session's GET stream (the legacy line's client) and a 2026-07-28 `subscriptions/listen`
// (the stable line's client): alice (eng, finance), bob (no labels), and alice's token restricted to `finance`.
// - An approval, a label change and a disable through `svc tool|prompt …` (another process on the same database)
//   reach the streams of whoever's listing changed, in the kind that changed, and no one else's: each assertion waits
//   until a later change everyone may see has arrived, then asserts the whole of what each stream heard.
// - resources/subscribe goes to the owning upstream on the caller's own connection; the upstream's update reaches the
//   subscriber with the mapped URI; bob's and the restricted token's subscribe get the answer of a missing resource
//   and reach no upstream. A listen filter's resourceSubscriptions work the same. Once alice may no longer read the
//   upstream, svc ends her subscriptions there and she hears nothing of it.
// - A GET stream on another user's session id is 403; a revoked token's streams end.
// - On sqld with two `svc serve`: an approval through instance B's admin API reaches a stream held on instance A.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client as LegacyLineClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyLineTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { Client, StreamableHTTPClientTransport, type McpSubscription } from '@modelcontextprotocol/client';
import { ProtocolError, Server, WebStandardStreamableHTTPServerTransport, type ProtocolErrorCode } from '@modelcontextprotocol/server';
import { createToken, revokeToken } from '../src/store/tokens.ts';
import { STREAMS_PER_USER } from '../src/mcp/changes.ts';
import type { User } from '../src/store/users.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { refusalOf } from './helpers/agents.ts';
import { DEFAULT_AUTH } from './helpers/workspace.ts';
import { serveWeb } from './helpers/web-upstream.ts';
import { waitFor } from './helpers/wait.ts';
import { bearer } from './helpers/http.ts';
import { tokenRecord } from './helpers/records.ts';
import { install, serveTogether, sourceRunner, type Installation, type ServeProcess } from './helpers/installation.ts';
import { startSqld, type Sqld } from './helpers/sqld.ts';

const MODERN = '2026-07-28';
/** How long a test waits for what must come (generous: it decides only how long a broken test hangs). */
const MUST_COME_MS = 30_000;

interface Offer {
  readonly name: string;
  readonly tools: readonly string[];
  readonly prompts: readonly string[];
  readonly resources: readonly string[];
}

interface Upstream {
  readonly url: string;
  /**
   * Says `uri` was updated: to each session subscribed to it, or (`everyone`) to every session, subscribed or not, as
   * a careless upstream might. How many sessions were told.
   */
  touch(uri: string, everyone?: boolean): Promise<number>;
  /** the URIs each session holds subscriptions to */
  subscribed(): string[][];
  stop(): Promise<void>;
}

const RESOURCE_NOT_FOUND = -32002 as ProtocolErrorCode;

/** One session's server: the offer's tools, prompts and resources, and resource subscriptions kept in `subscriptions`. */
function upstreamServer(offer: Offer, subscriptions: Set<string>): Server {
  const server = new Server(
    { name: offer.name, version: '1.0.0' },
    { capabilities: { tools: {}, prompts: {}, resources: { subscribe: true } } },
  );
  const on = server.setRequestHandler.bind(server) as unknown as (
    method: string,
    handler: (request: { params?: Record<string, unknown> }) => unknown,
  ) => void;
  const known = (request: { params?: Record<string, unknown> }) => {
    const uri = String(request.params?.uri);
    if (!offer.resources.includes(uri)) throw new ProtocolError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`);
    return uri;
  };
  on('tools/list', () => ({
    tools: offer.tools.map((name) => ({ name, description: `The ${name} tool.`, inputSchema: { type: 'object', properties: {} } })),
  }));
  on('tools/call', (r) => ({ content: [{ type: 'text', text: `ran ${String(r.params?.name)}` }] }));
  on('prompts/list', () => ({ prompts: offer.prompts.map((name) => ({ name, description: `The ${name} prompt.` })) }));
  on('prompts/get', (r) => ({ messages: [{ role: 'user', content: { type: 'text', text: String(r.params?.name) } }] }));
  on('resources/list', () => ({ resources: offer.resources.map((uri) => ({ uri, name: uri })) }));
  on('resources/read', (r) => ({ contents: [{ uri: known(r), text: 'a note' }] }));
  on('resources/subscribe', (r) => {
    subscriptions.add(known(r));
    return {};
  });
  on('resources/unsubscribe', (r) => {
    subscriptions.delete(String(r.params?.uri));
    return {};
  });
  return server;
}

/** A 2025 upstream on loopback whose every MCP session is its own (a server, a transport, its subscriptions). */
async function startUpstream(offer: Offer): Promise<Upstream> {
  const sessions = new Map<string, { transport: WebStandardStreamableHTTPServerTransport; server: Server; subscriptions: Set<string> }>();
  const served = await serveWeb(async (request) => {
    const id = request.headers.get('mcp-session-id');
    const known = id === null ? undefined : sessions.get(id);
    if (known !== undefined) return known.transport.handleRequest(request);
    if (id !== null) return new Response(null, { status: 404 });
    const subscriptions = new Set<string>();
    const server = upstreamServer(offer, subscriptions);
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => {
        sessions.set(sid, { transport, server, subscriptions });
      },
    });
    await server.connect(transport);
    return transport.handleRequest(request);
  });
  return {
    url: served.url,
    async touch(uri, everyone = false) {
      let told = 0;
      for (const s of sessions.values()) {
        if (!everyone && !s.subscriptions.has(uri)) continue;
        await s.server.sendResourceUpdated({ uri }).catch(() => undefined);
        told++;
      }
      return told;
    },
    subscribed: () => [...sessions.values()].map((s) => [...s.subscriptions].sort()),
    async stop() {
      for (const s of sessions.values()) await s.server.close().catch(() => undefined);
      await served.stop();
    },
  };
}

/** What a stream heard, in order: `tools`, `prompts`, `resources` (a list changed) and `updated URI`. */
type Heard = string[];

interface Listener {
  readonly heard: Heard;
  close(): Promise<void>;
}

/** A 2025 session (the legacy line's client) whose GET stream svc holds open: resolved once that stream is open. */
async function legacyListener(url: string, token: string): Promise<Listener & { client: LegacyLineClient; session: string }> {
  const heard: Heard = [];
  const client = new LegacyLineClient({ name: 'agent', version: '1.0.0' });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void heard.push('tools'));
  client.setNotificationHandler(PromptListChangedNotificationSchema, () => void heard.push('prompts'));
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void heard.push('resources'));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void heard.push(`updated ${n.params.uri}`));
  let streams = 0;
  const transport = new LegacyLineTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: bearer(token) },
    fetch: async (input, init) => {
      const answer = await fetch(input, init);
      if (init?.method === 'GET' && answer.ok && answer.headers.get('content-type') === 'text/event-stream') streams++;
      return answer;
    },
  });
  await client.connect(transport);
  await waitFor('the session’s GET stream open', () => streams > 0, { timeoutMs: MUST_COME_MS });
  return { client, heard, session: transport.sessionId!, close: () => client.close() };
}

/** A 2026-07-28 client (the stable line's, pinned) with a `subscriptions/listen` stream open for `filter`. */
async function modernListener(
  url: string,
  token: string,
  filter: Parameters<Client['listen']>[0],
): Promise<Listener & { client: Client; subscription: McpSubscription }> {
  const heard: Heard = [];
  const client = new Client({ name: 'agent', version: '2.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  client.setNotificationHandler('notifications/tools/list_changed', () => void heard.push('tools'));
  client.setNotificationHandler('notifications/prompts/list_changed', () => void heard.push('prompts'));
  client.setNotificationHandler('notifications/resources/list_changed', () => void heard.push('resources'));
  client.setNotificationHandler('notifications/resources/updated', (n) => void heard.push(`updated ${n.params.uri}`));
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: bearer(token) } }));
  assert.equal(client.getProtocolEra(), 'modern');
  const subscription = await client.listen(filter);
  return { client, heard, subscription, close: () => client.close() };
}

const ALL_LISTS = { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true };

/** Reads an SSE body until it ends; resolves true then (false if `signal` gave up first). */
async function ended(body: ReadableStream<Uint8Array>, signal: AbortSignal): Promise<boolean> {
  const reader = body.getReader();
  signal.addEventListener('abort', () => void reader.cancel().catch(() => undefined), { once: true });
  for (;;) {
    const { done } = await reader.read().catch(() => ({ done: true }));
    if (done) return !signal.aborted;
  }
}

const ENG: Offer = {
  name: 'eng',
  tools: ['alpha', 'deploy'],
  prompts: ['brief', 'summary'],
  resources: ['note://one', 'note://two'],
};
const OPEN: Offer = { name: 'open', tools: ['hello', 'wave'], prompts: [], resources: [] };

const upstreamSections = (eng: Upstream, open: Upstream) => `
[upstream eng]
url = ${eng.url}
labels = eng
protocol = 2025

[upstream open]
url = ${open.url}
protocol = 2025
`;

describe('change notifications and resource subscriptions through svc', () => {
  let svc: TestServer;
  let eng: Upstream;
  let open: Upstream;
  let alice: User;
  let bob: User;
  const tokens = { alice: '', bob: '', restricted: '' };
  let a25: Awaited<ReturnType<typeof legacyListener>>;
  let b25: Awaited<ReturnType<typeof legacyListener>>;
  let r25: Awaited<ReturnType<typeof legacyListener>>;
  let a26: Awaited<ReturnType<typeof modernListener>>;
  let b26: Awaited<ReturnType<typeof modernListener>>;
  /** what each stream must have heard so far, kept as the tests go */
  const expected: Record<'a25' | 'b25' | 'r25' | 'a26' | 'b26', Heard> = { a25: [], b25: [], r25: [], a26: [], b26: [] };
  const heardBy = () => ({ a25: a25.heard, b25: b25.heard, r25: r25.heard, a26: a26.heard, b26: b26.heard });
  /**
   * What each stream heard, an update heard again at once as one: a test tells the upstream of an update until the
   * subscriber heard one, so how many it heard is the test's doing.
   */
  const collapsed = () =>
    Object.fromEntries(
      Object.entries(heardBy()).map(([w, heard]) => [w, heard.filter((h, i) => !h.startsWith('updated ') || heard[i - 1] !== h)]),
    );

  const cli = async (args: string[]) => {
    const r = await svc.ws.svc(args);
    assert.equal(r.code, 0, `svc ${args.join(' ')}: ${r.stderr}`);
  };
  /** Waits until each of `who` has heard as much as expected of it now. */
  const untilHeard = (what: string, who: (keyof typeof expected)[]) =>
    waitFor(what, () => who.every((w) => heardBy()[w].length >= expected[w].length), { timeoutMs: MUST_COME_MS });
  /** A change every stream may see (the tool `wave` of the upstream without labels), heard by every one of them. */
  const everyoneHears = async (args: string[]) => {
    await cli(args);
    for (const w of Object.keys(expected) as (keyof typeof expected)[]) expected[w].push('tools');
    await untilHeard(`everyone to hear svc ${args.join(' ')}`, Object.keys(expected) as (keyof typeof expected)[]);
  };

  before(async () => {
    eng = await startUpstream(ENG);
    open = await startUpstream(OPEN);
    svc = await startTestServer({ auth: `${DEFAULT_AUTH}${upstreamSections(eng, open)}` });
    alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: 'eng, finance' });
    bob = await svc.addUser({ uid: 'bob', email: 'bob@example.com', labels: '' });
    tokens.alice = await svc.tokenFor(alice);
    tokens.bob = await svc.tokenFor(bob);
    tokens.restricted = (
      await svc.database.write(async (tx) =>
        createToken(tx, alice.id, tokenRecord('finance only', undefined, 'finance'), await svc.database.tokenEpoch(tx)),
      )
    ).token;
    await waitFor(
      'both upstreams’ tools and prompts recorded',
      async () => {
        const r = await svc.ws.svc(['tool', 'list', '--json']);
        return r.code === 0 && (JSON.parse(r.stdout) as unknown[]).length === 4;
      },
      { everyMs: 200, timeoutMs: MUST_COME_MS },
    );
    await cli(['tool', 'approve', 'eng', 'alpha']);
    await cli(['tool', 'approve', 'open', 'hello']);
    await cli(['prompt', 'approve', 'eng', 'summary']);
    a25 = await legacyListener(svc.url, tokens.alice);
    b25 = await legacyListener(svc.url, tokens.bob);
    r25 = await legacyListener(svc.url, tokens.restricted);
    a26 = await modernListener(svc.url, tokens.alice, ALL_LISTS);
    b26 = await modernListener(svc.url, tokens.bob, { ...ALL_LISTS, resourceSubscriptions: ['eng+note://two'] });
  });

  after(async () => {
    await Promise.allSettled([a25, b25, r25, a26, b26].map((l) => l?.close()));
    await svc?.stop();
    await eng?.stop();
    await open?.stop();
  });

  test('both eras declare what svc now sends: listChanged for each list, and resource subscriptions', async () => {
    for (const client of [a25.client, a26.client]) {
      const capabilities = client.getServerCapabilities();
      assert.deepEqual(capabilities?.tools, { listChanged: true });
      assert.deepEqual(capabilities?.prompts, { listChanged: true });
      assert.deepEqual(capabilities?.resources, { listChanged: true, subscribe: true });
    }
    assert.deepEqual(a26.subscription.honoredFilter, ALL_LISTS);
  });

  test('an approval of an eng tool reaches alice alone; a change bob may see then reaches bob, and only it', async () => {
    await cli(['tool', 'approve', 'eng', 'deploy']);
    expected.a25.push('tools');
    expected.a26.push('tools');
    await untilHeard('alice to hear of deploy', ['a25', 'a26']);
    await everyoneHears(['tool', 'approve', 'open', 'wave']);
    assert.deepEqual(heardBy(), expected);
    const theirs = (await a26.client.listTools()).tools.map((t) => t.name);
    assert.ok(theirs.includes('eng__deploy') && theirs.includes('open__wave'), JSON.stringify(theirs));
  });

  test('a label that hides a tool from alice: alice hears it, nobody else does', async () => {
    await cli(['tool', 'label', 'eng', 'deploy', '--labels', 'secret']);
    expected.a25.push('tools');
    expected.a26.push('tools');
    await untilHeard('alice to hear deploy go', ['a25', 'a26']);
    await everyoneHears(['tool', 'disable', 'open', 'wave']);
    assert.deepEqual(heardBy(), expected);
    assert.ok(!(await a26.client.listTools()).tools.some((t) => t.name === 'eng__deploy'));
  });

  test('a prompt approval is prompts/list_changed, to alice alone', async () => {
    await cli(['prompt', 'approve', 'eng', 'brief']);
    expected.a25.push('prompts');
    expected.a26.push('prompts');
    await untilHeard('alice to hear of brief', ['a25', 'a26']);
    await everyoneHears(['tool', 'approve', 'open', 'wave']);
    assert.deepEqual(heardBy(), expected);
    assert.deepEqual((await a25.client.listPrompts()).prompts.map((p) => p.name).sort(), ['eng__brief', 'eng__summary']);
  });

  test('2025: resources/subscribe goes to the owning upstream for alice; its update reaches her mapped; bob’s is a missing resource', async () => {
    assert.deepEqual(await a25.client.subscribeResource({ uri: 'eng+note://one' }), {});
    const missing = await refusalOf(a25.client.subscribeResource({ uri: 'eng+note://none' }));
    assert.notEqual(missing, 'ok');
    for (const [who, uri] of [
      [b25, 'eng+note://one'],
      [r25, 'eng+note://one'],
      [a25, 'nowhere+note://one'],
      [a25, 'note://one'],
    ] as const)
      assert.deepEqual(await refusalOf(who.client.subscribeResource({ uri })), missing, `${uri}`);
    assert.deepEqual(eng.subscribed().flat(), ['note://one'], 'one session at the upstream, alice’s, subscribed: nobody else reached it');
    await waitFor(
      'alice to hear note://one updated',
      async () => (await eng.touch('note://one')) > 0 && a25.heard.at(-1) === 'updated eng+note://one',
      { everyMs: 300, timeoutMs: MUST_COME_MS },
    );
    expected.a25.push('updated eng+note://one');
    await everyoneHears(['tool', 'disable', 'open', 'wave']);
    assert.deepEqual(collapsed(), expected);
  });

  test('2026-07-28: a listen filter’s resourceSubscriptions are subscribed for alice; bob’s reach nothing', async () => {
    const mine = await modernListener(svc.url, tokens.alice, { resourceSubscriptions: ['eng+note://two'] });
    try {
      assert.deepEqual(mine.subscription.honoredFilter, { resourceSubscriptions: ['eng+note://two'] });
      await waitFor(
        'alice’s listen to hear note://two updated',
        async () => (await eng.touch('note://two')) > 0 && mine.heard.includes('updated eng+note://two'),
        { everyMs: 300, timeoutMs: MUST_COME_MS },
      );
      assert.ok(
        mine.heard.every((h) => h === 'updated eng+note://two'),
        JSON.stringify(mine.heard),
      );
      assert.deepEqual(eng.subscribed().flat().sort(), ['note://one', 'note://two'], 'alice’s session alone holds subscriptions');
      await everyoneHears(['tool', 'approve', 'open', 'wave']);
      assert.deepEqual(collapsed(), expected, 'bob’s listen named eng+note://two too: nothing reached it');
    } finally {
      await mine.close();
    }
  });

  test('a GET stream on another user’s session id is 403; without a session id, 405; past a person’s bound, 429', async () => {
    const get = (token: string, session?: string) =>
      fetch(`${svc.url}/mcp`, {
        headers: { ...bearer(token), accept: 'text/event-stream', ...(session === undefined ? {} : { 'mcp-session-id': session }) },
      });
    const theirs = await get(tokens.bob, a25.session);
    assert.equal(theirs.status, 403);
    await theirs.body?.cancel();
    const none = await get(tokens.bob);
    assert.equal(none.status, 405);
    assert.equal(none.headers.get('allow'), 'POST');
    // bob holds two streams (b25's and b26's): fourteen more are his bound, the next is refused.
    const own: Response[] = [];
    try {
      for (let i = 0; i < STREAMS_PER_USER - 2; i++) {
        const one = await get(tokens.bob, b25.session);
        assert.equal(one.status, 200);
        assert.equal(one.headers.get('content-type'), 'text/event-stream');
        own.push(one);
      }
      const past = await get(tokens.bob, b25.session);
      assert.equal(past.status, 429);
      await past.body?.cancel();
    } finally {
      await Promise.all(own.map((r) => r.body?.cancel()));
    }
    // Once those have gone, bob may open one again.
    await waitFor(
      'bob’s streams to be let go',
      async () => {
        const again = await get(tokens.bob, b25.session);
        await again.body?.cancel();
        return again.status === 200;
      },
      { everyMs: 200, timeoutMs: MUST_COME_MS },
    );
  });

  test('a revoked token’s streams end, in both eras', async () => {
    const made = await svc.database.write(async (tx) =>
      createToken(tx, alice.id, tokenRecord('short-lived', undefined, null), await svc.database.tokenEpoch(tx)),
    );
    const session = await legacyListener(svc.url, made.token);
    const raw = await fetch(`${svc.url}/mcp`, {
      headers: { ...bearer(made.token), accept: 'text/event-stream', 'mcp-session-id': session.session },
    });
    assert.equal(raw.status, 200);
    const listen = await modernListener(svc.url, made.token, ALL_LISTS);
    try {
      const giveUp = AbortSignal.timeout(MUST_COME_MS);
      const rawEnded = ended(raw.body!, giveUp);
      await svc.database.write((tx) => revokeToken(tx, alice.id, made.id));
      assert.equal(await rawEnded, true, 'the 2025 GET stream ended');
      const closed = await Promise.race([
        listen.subscription.closed,
        new Promise((ok) => giveUp.addEventListener('abort', () => ok('gave up'))),
      ]);
      assert.equal(closed, 'graceful', 'the listen stream ended with its result');
    } finally {
      await Promise.allSettled([session.close(), listen.close()]);
    }
  });

  test('once alice may no longer read eng: she hears her lists change, svc ends her subscriptions there, and no update reaches her', async () => {
    await cli(['user', 'set', 'alice', '--labels', 'finance']);
    // Her tools (eng__alpha), prompts and readable upstreams all changed; the finance-only token's did not.
    expected.a25.push('tools', 'prompts', 'resources');
    expected.a26.push('tools', 'prompts', 'resources');
    await untilHeard('alice to hear her lists change', ['a25', 'a26']);
    assert.deepEqual(a25.heard.slice(-3).sort(), ['prompts', 'resources', 'tools']);
    await waitFor('svc to end alice’s subscriptions at eng', () => eng.subscribed().flat().length === 0, { timeoutMs: MUST_COME_MS });
    // A careless upstream tells every session of both notes: svc passes nothing on.
    assert.ok((await eng.touch('note://one', true)) > 0);
    assert.ok((await eng.touch('note://two', true)) > 0);
    await new Promise((ok) => setTimeout(ok, 1000));
    await everyoneHears(['tool', 'disable', 'open', 'wave']);
    assert.deepEqual(collapsed(), expected);
  });
});

describe('change notifications across two instances on one sqld', () => {
  let sqld: Sqld;
  let eng: Upstream;
  let open: Upstream;
  let inst: Installation;
  let servers = {} as Record<'a' | 'b', ServeProcess>;
  let adminToken = '';
  const tokens = { alice: '', bob: '' };

  before(async () => {
    sqld = await startSqld({ auth: true });
    eng = await startUpstream(ENG);
    open = await startUpstream(OPEN);
    const sections = upstreamSections(eng, open);
    inst = await install(sourceRunner, { auth: `${DEFAULT_AUTH}${sections}`, remote: { url: sqld.url, token: sqld.token } });
    const ok = async (args: string[], stdin?: string) => {
      const r = await inst.cli(args, stdin);
      assert.equal(r.code, 0, `svc ${args.join(' ')}: ${r.stderr}`);
      return r.stdout.trim();
    };
    await ok(['migrate']);
    await ok(['user', 'add', 'root', '--email', 'root@example.com', '--admin', '--password-stdin'], 'root password 1\n');
    await ok(['user', 'add', 'alice', '--email', 'alice@example.com', '--labels', 'eng']);
    await ok(['user', 'add', 'bob', '--email', 'bob@example.com']);
    adminToken = await ok(['token', 'create', 'root', '--name', 'review', '--scopes', 'admin']);
    tokens.alice = await ok(['token', 'create', 'alice', '--name', 'agent']);
    tokens.bob = await ok(['token', 'create', 'bob', '--name', 'agent']);
    const config = join(inst.dir, 'serve.ini');
    writeFileSync(
      config,
      `[server]\nlisten = 127.0.0.1:0\nbase_url = ${inst.url}\ndatabase = ${inst.database}\ndatabase_token_env = SVC_DATABASE_TOKEN\n[auth]\n${DEFAULT_AUTH}${sections}`,
    );
    servers = await serveTogether(sourceRunner, config, ['a', 'b'] as const, () => ({ ...inst.env }));
    await waitFor(
      'the tools recorded',
      async () => {
        const r = await inst.cli(['tool', 'list', '--json']);
        return r.code === 0 && (JSON.parse(r.stdout) as unknown[]).length === 4;
      },
      { everyMs: 300, timeoutMs: MUST_COME_MS },
    );
  });

  after(async () => {
    for (const s of Object.values(servers)) s.child.kill('SIGTERM');
    await Promise.all(
      Object.values(servers).map(
        (s) =>
          new Promise<void>((ok) => (s.child.exitCode !== null || s.child.signalCode !== null ? ok() : s.child.once('exit', () => ok()))),
      ),
    );
    await eng?.stop();
    await open?.stop();
    inst?.remove();
    await sqld?.remove();
  });

  test('an approval through instance B reaches alice’s streams on instance A, and bob’s only for what he may see', async () => {
    const approve = async (upstream: string, tool: string) => {
      const r = await fetch(`${servers.b.url}/admin/api/tools/${upstream}/${tool}`, {
        method: 'PATCH',
        headers: { ...bearer(adminToken), 'Content-Type': 'application/json' },
        body: JSON.stringify({ state: 'approved' }),
      });
      assert.equal(r.status, 200, await r.text());
    };
    const alice25 = await legacyListener(servers.a.url, tokens.alice);
    const alice26 = await modernListener(servers.a.url, tokens.alice, ALL_LISTS);
    const bob25 = await legacyListener(servers.a.url, tokens.bob);
    try {
      await approve('eng', 'deploy');
      await waitFor('alice on A to hear of deploy', () => alice25.heard.length > 0 && alice26.heard.length > 0, {
        timeoutMs: MUST_COME_MS,
      });
      await approve('open', 'wave');
      await waitFor('everyone on A to hear of wave', () => alice25.heard.length > 1 && alice26.heard.length > 1 && bob25.heard.length > 0, {
        timeoutMs: MUST_COME_MS,
      });
      assert.deepEqual(
        { alice25: alice25.heard, alice26: alice26.heard, bob25: bob25.heard },
        { alice25: ['tools', 'tools'], alice26: ['tools', 'tools'], bob25: ['tools'] },
      );
    } finally {
      await Promise.allSettled([alice25.close(), alice26.close(), bob25.close()]);
    }
  });
});
