// svc's upstream client in both protocol eras (CONTRACT §6.1, §6.3, `protocol` in docs/upstreams.md): behind svc, a
// strict 2026-07-28 upstream written here on the SDK's v2 server (createMcpHandler with legacy: 'reject'), the real
// @modelcontextprotocol/server-everything (2025, Streamable HTTP, behind a proxy that counts what it carries), and a
// stdio upstream of each era (serveStdio with legacy: 'reject', and a v1 server), each process in svc's sandbox. Through
// svc's /mcp with the v1 SDK's client:
// - each upstream lists and answers; the identity assertion reaches the modern ones (X-Svc-Identity over HTTP with the
//   SDK's protocol keys left in `_meta`, `svc/identity` in `_meta` over stdio), verified against svc's JWKS;
// - each upstream is asked its era once (one server/discover), however many people's sessions and processes follow;
// - faults stay on the call in the modern era: timeout, too_large, protocol;
// - a modern upstream's list changes come on the shared connection's one listen stream; a flood of them ends it;
// - closing ends each person's 2025 session with a DELETE; a restart asks no era again;
// - protocol = 2025 to the strict upstream, and protocol = 2026-07-28 to a 2025 one: the call is unavailable;
// - an upstream that changes its era under svc: the kept era is dropped and asked again (at most once every 10 s), and a
//   call the upstream may have acted on is not sent twice;
// - a 2025 listing with a definition nested 10,000 deep: that tool is held, the rest recorded (svc reads a listing
//   with its own shallow check; the SDK's 2025 schema overflowed its stack on it and failed the whole listing).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as forward } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { z } from 'zod';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as StableLineClient, StreamableHTTPClientTransport as StableLineTransport } from '@modelcontextprotocol/client';
import { Server as LegacyServer } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  isInitializeRequest,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { ConfigError, loadConfig } from '../src/config/load.ts';
import type { User } from '../src/store/users.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { DEFAULT_AUTH, ROOT } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';
import { countingProxy, serveWeb, startEverything } from './helpers/web-upstream.ts';

const SDK = join(ROOT, 'node_modules/@modelcontextprotocol/sdk/dist/esm');
const SERVER_V2 = join(ROOT, 'node_modules/@modelcontextprotocol/server/dist');
const MIB = 1024 * 1024;

/** Writes to LOG what the process was asked (a start, each server/discover, the `_meta` keys of each tools/call). */
const NOTES = `
import { appendFileSync } from 'node:fs';
const note = (line) => appendFileSync(process.env.LOG, line + '\\n');
note('start');
process.stdin.on('data', (chunk) => {
  for (const line of chunk.toString('utf8').split('\\n')) {
    if (line.includes('"server/discover"')) note('discover');
    if (line.includes('"tools/call"')) note('call ' + JSON.stringify(Object.keys(JSON.parse(line).params._meta ?? {})));
  }
});
`;

/** A strict 2026-07-28 stdio server (v2, serveStdio refusing 2025): echo answers the `_meta` it was called with. */
const MODERN_STDIO = `${NOTES}
import { Server } from '${SERVER_V2}/index.mjs';
import { serveStdio } from '${SERVER_V2}/stdio.mjs';
const object = { type: 'object' };
serveStdio(() => {
  const server = new Server({ name: 'strict-stdio', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', async () => ({ tools: [
    { name: 'echo', description: 'Echoes, with the _meta it got.', inputSchema: object },
    { name: 'nap', description: 'Sleeps.', inputSchema: object },
    { name: 'big', description: 'Answers 11 MiB.', inputSchema: object },
  ] }));
  server.setRequestHandler('tools/call', async (request) => {
    const args = request.params.arguments ?? {};
    if (request.params.name === 'nap') await new Promise((ok) => setTimeout(ok, args.ms));
    if (request.params.name === 'big') return { content: [{ type: 'text', text: 'x'.repeat(11 * 1024 * 1024) }] };
    return { content: [{ type: 'text', text: 'modern-stdio: ' + args.message }, { type: 'text', text: JSON.stringify(request.params._meta ?? {}) }] };
  });
  return server;
}, { legacy: 'reject' });
`;

/**
 * A strict 2026-07-28 stdio server with tools that answer the unsupported-version error as another server would
 * relay it: without the list of revisions, and with a list that holds 2026-07-28.
 */
const RELAY_STDIO = `${NOTES}
import { Server, ProtocolError, UnsupportedProtocolVersionError } from '${SERVER_V2}/index.mjs';
import { serveStdio } from '${SERVER_V2}/stdio.mjs';
const object = { type: 'object' };
serveStdio(() => {
  const server = new Server({ name: 'relay', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', async () => ({ tools: [
    { name: 'nap', description: 'Sleeps.', inputSchema: object },
    { name: 'relay', description: 'Relays an error.', inputSchema: object },
    { name: 'refuse', description: 'Relays a refusal naming 2026-07-28.', inputSchema: object },
  ] }));
  server.setRequestHandler('tools/call', async (request) => {
    const args = request.params.arguments ?? {};
    if (request.params.name === 'relay') throw new ProtocolError(-32022, 'relayed from elsewhere');
    if (request.params.name === 'refuse') throw new UnsupportedProtocolVersionError({ supported: ['2026-07-28'], requested: '2099-01-01' });
    await new Promise((ok) => setTimeout(ok, args.ms));
    return { content: [{ type: 'text', text: 'slept' }] };
  });
  return server;
}, { legacy: 'reject' });
`;

/** A 2025 stdio server on the v1 SDK. */
const LEGACY_STDIO = `${NOTES}
import { Server } from '${SDK}/server/index.js';
import { StdioServerTransport } from '${SDK}/server/stdio.js';
import { ListToolsRequestSchema, CallToolRequestSchema } from '${SDK}/types.js';
const server = new Server({ name: 'old-stdio', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'echo', description: 'Echoes.', inputSchema: { type: 'object' } }] }));
server.setRequestHandler(CallToolRequestSchema, async (r) => ({ content: [{ type: 'text', text: 'legacy-stdio: ' + r.params.arguments?.message }] }));
await server.connect(new StdioServerTransport());
`;

/** What the strict upstream saw of one request. */
interface Seen {
  readonly http: string;
  readonly rpc: string | undefined;
  readonly identity: string | null;
  readonly authorization: string | null;
  readonly version: string | null;
  readonly meta: string[];
}

const nested = (levels: number): unknown => (levels === 0 ? 'bottom' : { k: nested(levels - 1) });

/** The strict 2026-07-28 server's tools; `later` appears when asked to. */
function strictServer(tools: { later: boolean }): McpServer {
  const server = new McpServer({ name: 'strict', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  server.registerTool('echo', { description: 'Echoes its message.', inputSchema: { message: z.string() } }, async ({ message }) => ({
    content: [{ type: 'text', text: `modern: ${message}` }],
    structuredContent: { echoed: message },
  }));
  server.registerTool('nap', { description: 'Sleeps.', inputSchema: { ms: z.number() } }, async ({ ms }) => {
    await new Promise((ok) => setTimeout(ok, ms));
    return { content: [{ type: 'text', text: 'rested' }] };
  });
  server.registerTool('big', { description: 'Answers 11 MiB.' }, async () => ({ content: [{ type: 'text', text: 'x'.repeat(11 * MIB) }] }));
  server.registerTool('deep', { description: 'Answers 100 levels deep.' }, async () => ({
    content: [{ type: 'text', text: 'deep' }],
    structuredContent: { deep: nested(100) },
  }));
  if (tools.later)
    server.registerTool('later', { description: 'Appeared later.' }, async () => ({ content: [{ type: 'text', text: 'late' }] }));
  return server;
}

/** The strict upstream on loopback: it refuses a request without `credential` (401) and writes down every request. */
async function startStrict(credential: string) {
  const seen: Seen[] = [];
  const tools = { later: false };
  const handler = createMcpHandler(() => strictServer(tools), { legacy: 'reject' });
  const served = await serveWeb(async (request, body) => {
    let message: { method?: string; params?: { _meta?: Record<string, unknown> } } | undefined;
    try {
      message = JSON.parse(body);
    } catch {
      message = undefined;
    }
    const header = (name: string) => request.headers.get(name);
    seen.push({
      http: request.method,
      rpc: message?.method,
      identity: header('x-svc-identity'),
      authorization: header('authorization'),
      version: header('mcp-protocol-version'),
      meta: Object.keys(message?.params?._meta ?? {}),
    });
    if (header('authorization') !== `Bearer ${credential}`) return new Response(null, { status: 401 });
    return handler.fetch(request);
  });
  return {
    ...served,
    seen,
    tools,
    notify: handler.notify,
    count: (rpc: string) => seen.filter((s) => s.rpc === rpc).length,
    async stop() {
      await handler.close();
      await served.stop();
    },
  };
}

/** A 2026-07-28 client of svc: the stable line's, pinned to that revision. */
async function modernAgent(svc: TestServer, user: User): Promise<Client> {
  const client = new StableLineClient({ name: 'agent', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(
    new StableLineTransport(new URL(`${svc.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${await svc.tokenFor(user)}` } },
    }),
  );
  assert.equal(client.getProtocolEra(), 'modern');
  return client as unknown as Client;
}

async function agent(svc: TestServer, user: User): Promise<Client> {
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${await svc.tokenFor(user)}` } },
    }),
  );
  return client;
}

/** What a client of svc, of either era, gets of each upstream through /mcp. */
async function answersThrough(client: Client): Promise<void> {
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const name of ['modern__echo', 'modern__deep', 'legacy__echo', 'modern-stdio__echo', 'legacy-stdio__echo'])
      assert.ok(names.includes(name), `${name} in ${JSON.stringify(names)}`);
    const modern = await client.callTool({ name: 'modern__echo', arguments: { message: 'hi' } });
    assert.deepEqual([modern.isError, text(modern), modern.structuredContent], [undefined, 'modern: hi', { echoed: 'hi' }]);
    assert.equal(text(await client.callTool({ name: 'legacy__echo', arguments: { message: 'hi' } })), 'Echo: hi');
    assert.equal(text(await client.callTool({ name: 'modern-stdio__echo', arguments: { message: 'hi' } })), 'modern-stdio: hi');
    assert.equal(text(await client.callTool({ name: 'legacy-stdio__echo', arguments: { message: 'hi' } })), 'legacy-stdio: hi');
  } finally {
    await client.close();
  }
}

const texts = (r: unknown) => ((r as CallToolResult).content as { text: string }[]).map((c) => c.text);
const text = (r: unknown) => texts(r)[0]!;
const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '');

describe('protocol in [upstream NAME]', () => {
  const BASE = `[server]\nlisten = 127.0.0.1:8080\nbase_url = http://127.0.0.1:8080\ndatabase = file:svc.db\n[auth]\ntoken\n    enabled true\n`;
  const load = (line: string) => loadConfig(`${BASE}[upstream t]\nurl = https://t.internal/mcp\n${line}\n`, {}, { mode: 'serve' });

  test('auto by default, 2025 or 2026-07-28; anything else is refused, naming the key', () => {
    assert.equal(load('').upstreams[0]!.protocol, 'auto');
    for (const value of ['auto', '2025', '2026-07-28'] as const) assert.equal(load(`protocol = ${value}`).upstreams[0]!.protocol, value);
    for (const bad of ['2025-11-25', 'modern', 'AUTO', '2026']) {
      assert.throws(
        () => load(`protocol = ${bad}`),
        (e) =>
          e instanceof ConfigError &&
          e.problems.length === 1 &&
          e.problems[0]!.includes(`upstream.t.protocol: "${bad}" is not one of auto, 2025, 2026-07-28`),
      );
    }
  });
});

describe('upstreams of both eras, over HTTP and stdio', () => {
  const CREDENTIAL = 'the-strict-service-credential';
  let svc: TestServer;
  let strict: Awaited<ReturnType<typeof startStrict>>;
  let everything: Awaited<ReturnType<typeof startEverything>>;
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  let dir: string;
  let people: User[];
  const log = (name: 'modern' | 'legacy') => join(dir, `${name}.log`);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-eras-'));
    writeFileSync(join(dir, 'modern.mjs'), MODERN_STDIO);
    writeFileSync(join(dir, 'legacy.mjs'), LEGACY_STDIO);
    writeFileSync(log('modern'), '');
    writeFileSync(log('legacy'), '');
    strict = await startStrict(CREDENTIAL);
    everything = await startEverything();
    proxy = await countingProxy(everything.url);
    const stdio = (name: 'modern' | 'legacy') => `command = "${process.execPath}" "${join(dir, `${name}.mjs`)}"
env.LOG = ${log(name)}
writable = ${dir}
isolation = user
review = auto
identity = jwt
timeout = 3s`;
    svc = await startTestServer({
      env: { STRICT_TOKEN: CREDENTIAL },
      auth: `${DEFAULT_AUTH}
[upstream modern]
url = ${strict.url}
token_env = STRICT_TOKEN
review = auto
identity = jwt
timeout = 3s

[upstream legacy]
url = ${proxy.url}
tools = echo
review = auto
identity = jwt

[upstream modern-stdio]
${stdio('modern')}

[upstream legacy-stdio]
${stdio('legacy')}
`,
    });
    people = [];
    for (const uid of ['alice', 'bob', 'carol']) people.push(await svc.addUser({ uid, email: `${uid}@example.com`, labels: '' }));
    await waitFor(
      'every upstream listed, up',
      async () => {
        const r = await svc.ws.svc(['upstream', 'list', '--json']);
        const listed = JSON.parse(r.stdout) as { state: string }[];
        return listed.length === 4 && listed.every((u) => u.state === 'up');
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
  });

  after(async () => {
    await svc?.stop();
    await strict?.stop();
    await proxy?.stop();
    everything?.process.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  test('each lists and answers through /mcp, the modern ones in 2026-07-28 and the others in 2025, to clients of both eras', async () => {
    for (const connect of [agent, modernAgent]) await answersThrough(await connect(svc, people[0]!));
    // What each upstream was asked in: the strict one never saw an initialize, and every request it took was 2026-07-28.
    assert.equal(strict.count('initialize'), 0);
    const taken = strict.seen.filter((s) => s.rpc !== undefined);
    assert.ok(taken.every((s) => s.version === '2026-07-28' && s.meta.includes('io.modelcontextprotocol/protocolVersion')));
    assert.ok(
      strict.seen.every((s) => s.authorization === `Bearer ${CREDENTIAL}`),
      'token_env reaches it in this era too, the probe included',
    );
    assert.ok(
      proxy.carried.some((c) => c.rpc === 'initialize'),
      'server-everything shook hands',
    );
    assert.ok(
      proxy.carried.filter((c) => c.rpc === 'tools/call').every((c) => c.session !== undefined),
      'in sessions of its own',
    );
    assert.ok(lines(log('legacy')).some((l) => l.startsWith('call ')));
  });

  test('the identity assertion reaches the modern upstreams: X-Svc-Identity over HTTP, svc/identity in _meta over stdio', async () => {
    const jwks = createRemoteJWKSet(new URL(`${svc.url}/.well-known/jwks.json`));
    const issuer = svc.config.server.baseUrl;
    const client = await agent(svc, people[1]!);
    try {
      const before = strict.seen.length;
      await client.callTool({ name: 'modern__echo', arguments: { message: 'who' } });
      const call = strict.seen.slice(before).find((s) => s.rpc === 'tools/call')!;
      assert.ok(call.identity, 'the header came');
      const http = await jwtVerify(call.identity, jwks, { issuer, audience: strict.url, algorithms: ['ES256'] });
      assert.equal(http.payload.sub, 'bob');
      assert.ok(!call.meta.includes('svc/identity'), 'moved to the header');
      for (const key of ['protocolVersion', 'clientInfo', 'clientCapabilities'])
        assert.ok(call.meta.includes(`io.modelcontextprotocol/${key}`), `the SDK's ${key} stays in _meta`);

      const answer = await client.callTool({ name: 'modern-stdio__echo', arguments: { message: 'who' } });
      const meta = JSON.parse(texts(answer)[1]!) as Record<string, string>;
      const stdio = await jwtVerify(meta['svc/identity']!, jwks, { issuer, audience: 'svc:upstream:modern-stdio', algorithms: ['ES256'] });
      assert.equal(stdio.payload.sub, 'bob');
      const sent = lines(log('modern'))
        .filter((l) => l.startsWith('call '))
        .at(-1)!;
      const onWire = JSON.parse(sent.slice('call '.length)) as string[];
      for (const key of ['io.modelcontextprotocol/protocolVersion', 'io.modelcontextprotocol/clientInfo', 'svc/identity'])
        assert.ok(onWire.includes(key), `on the wire: ${key} in ${JSON.stringify(onWire)}`);
    } finally {
      await client.close();
    }
  });

  test('each upstream is asked its era once: three people, their sessions and processes start in the era kept', async () => {
    const clients = await Promise.all(people.map((p) => agent(svc, p)));
    try {
      for (const [i, client] of clients.entries())
        for (const name of ['modern__echo', 'legacy__echo', 'modern-stdio__echo', 'legacy-stdio__echo'])
          assert.notEqual((await client.callTool({ name, arguments: { message: `m${i}` } })).isError, true, name);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    assert.equal(strict.count('server/discover'), 1, 'the strict upstream: one probe');
    assert.equal(proxy.carried.filter((c) => c.rpc === 'server/discover').length, 1, 'server-everything: one probe');
    assert.ok(proxy.carried.filter((c) => c.rpc === 'initialize').length >= 4, 'a session for the listing and each person');
    for (const name of ['modern', 'legacy'] as const) {
      const noted = lines(log(name));
      assert.equal(noted.filter((l) => l === 'discover').length, 1, `${name}-stdio: one probe`);
      // The shared connection's process and its throwaway sibling, then one process per person, started in the era.
      assert.equal(noted.filter((l) => l === 'start').length, 2 + people.length, `${name}-stdio: ${JSON.stringify(noted)}`);
    }
  });

  test('faults stay on the call in the 2026-07-28 era: timeout, too_large, protocol', async () => {
    const client = await agent(svc, people[2]!);
    try {
      const expect = async (name: string, args: Record<string, unknown>, pattern: RegExp) => {
        const r = await client.callTool({ name, arguments: args });
        assert.equal(r.isError, true, name);
        assert.match(text(r), pattern, name);
      };
      await expect('modern__nap', { ms: 5000 }, /^upstream "modern" timeout: /);
      await expect('modern__big', {}, /^upstream "modern" too_large: /);
      await expect('modern__deep', {}, /^upstream "modern" protocol: /);
      await expect('modern-stdio__nap', { ms: 5000 }, /^upstream "modern-stdio" timeout: /);
      await expect('modern-stdio__big', {}, /^upstream "modern-stdio" too_large: /);
      assert.equal(text(await client.callTool({ name: 'modern__echo', arguments: { message: 'after' } })), 'modern: after');
      await waitFor(
        "carol's process started again",
        async () => !(await client.callTool({ name: 'modern-stdio__echo', arguments: { message: 'x' } })).isError,
        { everyMs: 300 },
      );
    } finally {
      await client.close();
    }
    const audit = JSON.parse((await svc.ws.svc(['audit', 'list', '--json', '--user', 'carol'])).stdout) as {
      action: string;
      target: string;
      detail: { outcome?: string };
    }[];
    const outcomes = new Set(audit.filter((e) => e.action === 'upstream.call').map((e) => `${e.target}:${e.detail.outcome}`));
    for (const o of ['modern/nap:timeout', 'modern/big:too_large', 'modern/deep:protocol', 'modern/echo:ok'])
      assert.ok(outcomes.has(o), `${o} in ${JSON.stringify([...outcomes])}`);
  });

  test("a modern upstream's list changes come on the shared connection's one listen stream", async () => {
    assert.equal(strict.count('subscriptions/listen'), 1, 'one listen stream: the shared connection, no person');
    const listings = strict.count('tools/list');
    strict.tools.later = true;
    strict.notify.toolsChanged();
    await waitFor('listed again', () => strict.count('tools/list') > listings, { everyMs: 100, timeoutMs: 15_000 });
    await waitFor(
      'the new tool recorded, waiting for review',
      async () => {
        const rows = JSON.parse((await svc.ws.svc(['tool', 'list', '--json'])).stdout) as {
          upstream: string;
          name: string;
          state: string;
        }[];
        return rows.some((t) => t.upstream === 'modern' && t.name === 'later' && t.state === 'pending');
      },
      { everyMs: 300 },
    );
  });

  test('a flood of change notifications ends the listen stream: svc listens again after a wait, and lists no more often', async () => {
    const listens = strict.count('subscriptions/listen');
    const listings = strict.count('tools/list');
    for (let i = 0; i < 200; i++) strict.notify.toolsChanged();
    await waitFor('listening again', () => strict.count('subscriptions/listen') > listens, { everyMs: 100, timeoutMs: 15_000 });
    assert.equal(strict.count('subscriptions/listen'), listens + 1, 'the stream svc ended, opened once again');
    assert.ok(strict.count('tools/list') - listings <= 2, 'two hundred notifications are one listing, and one on listening again');
  });

  test("closing ends each person's 2025 session with a DELETE, and a restart asks no era again", async () => {
    const sessions = new Set(proxy.carried.filter((c) => c.rpc === 'tools/call').map((c) => c.session));
    const probes = [strict.count('server/discover'), proxy.carried.filter((c) => c.rpc === 'server/discover').length];
    await svc.restart();
    const ended = new Set(proxy.carried.filter((c) => c.http === 'DELETE').map((c) => c.session));
    for (const s of sessions) assert.ok(ended.has(s), `session ${s} ended`);
    assert.equal(strict.seen.filter((s) => s.http === 'DELETE').length, 0, 'a 2026-07-28 upstream keeps no session to end');
    const client = await agent(svc, people[0]!);
    try {
      assert.equal(text(await client.callTool({ name: 'modern__echo', arguments: { message: 'again' } })), 'modern: again');
      assert.equal(text(await client.callTool({ name: 'legacy__echo', arguments: { message: 'again' } })), 'Echo: again');
    } finally {
      await client.close();
    }
    assert.deepEqual([strict.count('server/discover'), proxy.carried.filter((c) => c.rpc === 'server/discover').length], probes);
  });
});

describe('an era svc may not speak to an upstream', () => {
  let svc: TestServer;
  let strict: Awaited<ReturnType<typeof startStrict>>;
  let everything: Awaited<ReturnType<typeof startEverything>>;
  let alice: User;

  before(async () => {
    strict = await startStrict('strict-credential');
    everything = await startEverything();
    svc = await startTestServer({
      env: { STRICT_TOKEN: 'strict-credential' },
      auth: `${DEFAULT_AUTH}
[upstream strict]
url = ${strict.url}
token_env = STRICT_TOKEN
review = auto

[upstream old]
url = ${everything.url}
tools = echo
review = auto
`,
    });
    alice = await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: '' });
    await waitFor(
      'both listed',
      async () => {
        const listed = (await svc.ws.svc(['tool', 'list'])).stdout;
        return listed.includes('strict\techo') && listed.includes('old\techo');
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
  });

  after(async () => {
    await svc?.stop();
    await strict?.stop();
    everything?.process.kill();
  });

  test('protocol = 2025 to a strict 2026-07-28 upstream, and 2026-07-28 to a 2025 one: the call is unavailable, svc goes on', async () => {
    const config = readFileSync(svc.ws.configPath, 'utf8');
    writeFileSync(
      svc.ws.configPath,
      config
        .replace('token_env = STRICT_TOKEN\n', 'token_env = STRICT_TOKEN\nprotocol = 2025\n')
        .replace('tools = echo\n', 'tools = echo\nprotocol = 2026-07-28\n'),
    );
    await svc.restart();
    const client = await agent(svc, alice);
    try {
      const strictCall = await client.callTool({ name: 'strict__echo', arguments: { message: 'x' } });
      assert.equal(strictCall.isError, true);
      assert.match(text(strictCall), /^upstream "strict" unavailable: /);
      const oldCall = await client.callTool({ name: 'old__echo', arguments: { message: 'x' } });
      assert.equal(oldCall.isError, true);
      assert.match(text(oldCall), /^upstream "old" unavailable: /);
      assert.match(text(await client.callTool({ name: 'whoami' })), /"uid":"alice"/, 'svc answers its own tools');
    } finally {
      await client.close();
    }
    assert.ok(strict.count('initialize') > 0, 'the strict upstream was offered only the handshake');
    assert.equal(strict.seen.filter((s) => s.rpc === 'tools/call').length, 0);
  });
});

/**
 * One URL whose server changes era on demand: the strict 2026-07-28 one, or a 2025 one on the v1 SDK with sessions
 * of its own (as server-everything keeps them), both offering echo.
 */
async function startTurncoat() {
  const modern = await startStrict('turncoat-credential');
  // In 2025 it lists what it lists in 2026-07-28, so the approved echo stays approved whichever era it speaks.
  const listed = await fetch(modern.url, {
    method: 'POST',
    headers: {
      authorization: 'Bearer turncoat-credential',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/list',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/list',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'test', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
  const echoDefinition = ((await listed.json()) as { result: { tools: { name: string }[] } }).result.tools.find((t) => t.name === 'echo')!;
  modern.seen.length = 0;
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const old = () => {
    const server = new LegacyServer({ name: 'old', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [echoDefinition] }) as never);
    server.setRequestHandler(CallToolRequestSchema, async (r) => ({
      content: [{ type: 'text', text: `old: ${r.params.arguments?.message}` }],
    }));
    return server;
  };
  const state = { era: 'modern' as 'modern' | 'legacy', probes: 0 };
  const http = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const parsed = body === '' ? undefined : (JSON.parse(body) as { method?: string });
    if (parsed?.method === 'server/discover') state.probes++;
    if (state.era === 'modern') {
      const to = new URL(modern.url);
      const onward = forward({ host: to.hostname, port: to.port, path: to.pathname, method: req.method, headers: req.headers }, (a) => {
        res.writeHead(a.statusCode ?? 502, a.headers);
        a.pipe(res);
      });
      onward.end(body);
      return;
    }
    const id = req.headers['mcp-session-id'];
    let transport = typeof id === 'string' ? sessions.get(id) : undefined;
    if (!transport && isInitializeRequest(parsed)) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: true,
        onsessioninitialized: (sid) => {
          sessions.set(sid, transport!);
        },
      });
      await old().connect(transport);
    }
    if (!transport) {
      // As the v1 SDK's own stateful wiring answers a request outside any session.
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Server not initialized' }, id: null }));
      return;
    }
    await transport.handleRequest(req, res, parsed);
  });
  await new Promise<void>((ok) => http.listen(0, '127.0.0.1', ok));
  const port = (http.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    state,
    async stop() {
      http.closeAllConnections();
      await new Promise<void>((ok) => http.close(() => ok()));
      await modern.stop();
    },
  };
}

describe('an upstream that changes its era under svc', () => {
  let svc: TestServer;
  let turncoat: Awaited<ReturnType<typeof startTurncoat>>;
  let people: User[];

  before(async () => {
    turncoat = await startTurncoat();
    svc = await startTestServer({
      env: { TURNCOAT_TOKEN: 'turncoat-credential' },
      auth: `${DEFAULT_AUTH}
[upstream turncoat]
url = ${turncoat.url}
token_env = TURNCOAT_TOKEN
tools = echo
review = auto
`,
    });
    people = [
      await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: '' }),
      await svc.addUser({ uid: 'bob', email: 'bob@example.com', labels: '' }),
    ];
    await waitFor('echo listed', async () => (await svc.ws.svc(['tool', 'list'])).stdout.includes('turncoat\techo'), { everyMs: 300 });
  });

  after(async () => {
    await svc?.stop();
    await turncoat?.stop();
  });

  test('the era kept is dropped when the upstream leaves it, asked again at most once every 10 s, and a call it may have acted on is not sent twice', async () => {
    const [a, b] = [await agent(svc, people[0]!), await agent(svc, people[1]!)];
    try {
      const echo = (c: Client, message: string) => c.callTool({ name: 'turncoat__echo', arguments: { message } });
      assert.equal(text(await echo(a, 'one')), 'modern: one');
      assert.equal(turncoat.state.probes, 1);
      turncoat.state.era = 'legacy';
      const changedAt = Date.now();
      // A bare 400 to a 2026-07-28 call says the era changed, not that the call was not acted on: it is not sent again.
      const two = await echo(a, 'two');
      assert.equal(two.isError, true, text(two));
      assert.match(text(two), /^upstream "turncoat" unavailable: /);
      assert.equal(text(await echo(a, 'three')), 'old: three', 'the next call asks again and is answered in 2025');
      assert.equal(text(await echo(b, 'four')), 'old: four', "bob's first connection starts in the era kept now");
      assert.equal(turncoat.state.probes, 2, 'one more probe for the change, none for bob');
      turncoat.state.era = 'modern';
      // Changed back within 10 s: svc does not ask again yet (an upstream cannot make it ask on every call).
      const five = await echo(a, 'five');
      assert.equal(five.isError, true, text(five));
      assert.equal(turncoat.state.probes, 2);
      await new Promise((ok) => setTimeout(ok, Math.max(0, changedAt + 10_500 - Date.now())));
      // The strict upstream refuses alice's 2025 session naming the revisions it serves: not acted on, sent again.
      assert.equal(text(await echo(a, 'six')), 'modern: six', "alice's 2025 session refused, asked again");
      assert.equal(turncoat.state.probes, 3);
      assert.equal(text(await echo(b, 'seven')), 'modern: seven', "bob's connection is replaced in the era alice's learnt");
      assert.equal(turncoat.state.probes, 3);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

/** A 2025 server written by hand, as no SDK would write its listing: a plain tool, and one nested 10,000 deep. */
async function startDeepLister() {
  const depth = 10_000;
  const deep = `${'{"k":['.repeat(depth / 2)}"bottom"${']}'.repeat(depth / 2)}`;
  const http = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const message = req.method === 'POST' ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown; method: string }) : null;
    if (message === null || message.id === undefined) {
      res.writeHead(message === null ? 405 : 202).end();
      return;
    }
    const answer = (result: string) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(`{"jsonrpc":"2.0","id":${JSON.stringify(message.id)},${result}}`);
    if (message.method === 'initialize')
      answer('"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"deep","version":"1"}}');
    else if (message.method === 'tools/list')
      answer(
        `"result":{"tools":[{"name":"plain","inputSchema":{"type":"object"}},{"name":"deep","inputSchema":{"type":"object","properties":{"p":${deep}}}}]}`,
      );
    else answer('"error":{"code":-32601,"message":"Method not found"}');
  });
  await new Promise<void>((ok) => http.listen(0, '127.0.0.1', ok));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    stop: () => new Promise<void>((ok) => http.close(() => ok())),
  };
}

describe('a 2025 listing with a definition nested 10,000 deep', () => {
  let svc: TestServer;
  let lister: Awaited<ReturnType<typeof startDeepLister>>;

  before(async () => {
    lister = await startDeepLister();
    svc = await startTestServer({ auth: `${DEFAULT_AUTH}\n[upstream lister]\nurl = ${lister.url}\nreview = auto\n` });
  });

  after(async () => {
    await svc?.stop();
    await lister?.stop();
  });

  test('that tool is held, the rest of the listing recorded, and the upstream is up', async () => {
    type Row = { name: string; state: string; held: string[] | null };
    let rows: Row[] = [];
    await waitFor(
      'the listing recorded',
      async () => {
        rows = JSON.parse((await svc.ws.svc(['tool', 'list', '--json'])).stdout) as Row[];
        return rows.length === 2;
      },
      { everyMs: 300 },
    );
    const byName = Object.fromEntries(rows.map((r) => [r.name, r]));
    assert.deepEqual([byName.plain!.state, byName.plain!.held], ['approved', null]);
    assert.match(String(byName.deep!.held), /nests deeper than 64 levels/);
    const listed = JSON.parse((await svc.ws.svc(['upstream', 'list', '--json'])).stdout) as { name: string; state: string }[];
    assert.equal(listed[0]!.state, 'up');
  });
});

describe("an upstream's -32022 that is not about svc's revision", () => {
  let svc: TestServer;
  let dir: string;
  let people: User[];
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-relay-'));
    writeFileSync(join(dir, 'relay.mjs'), RELAY_STDIO);
    writeFileSync(join(dir, 'relay.log'), '');
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream relay]
command = "${process.execPath}" "${join(dir, 'relay.mjs')}"
env.LOG = ${join(dir, 'relay.log')}
writable = ${dir}
review = auto
timeout = 5s
`,
    });
    people = [
      await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: '' }),
      await svc.addUser({ uid: 'bob', email: 'bob@example.com', labels: '' }),
    ];
    await waitFor('relay listed', async () => (await svc.ws.svc(['tool', 'list'])).stdout.includes('relay\trefuse'), { everyMs: 300 });
  });
  after(async () => {
    await svc?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("is that call's protocol fault: the shared process is not restarted under another person's call, nor asked its era again", async () => {
    const [a, b] = [await agent(svc, people[0]!), await agent(svc, people[1]!)];
    try {
      const started = lines(join(dir, 'relay.log')).filter((l) => l === 'start').length;
      const asked = lines(join(dir, 'relay.log')).filter((l) => l === 'discover').length;
      const nap = b.callTool({ name: 'relay__nap', arguments: { ms: 1500 } });
      await new Promise((ok) => setTimeout(ok, 200));
      for (const name of ['relay__relay', 'relay__refuse', 'relay__relay', 'relay__refuse']) {
        const r = await a.callTool({ name });
        assert.equal(r.isError, true);
        assert.match(text(r), /^upstream "relay" protocol: /);
      }
      assert.equal(text(await nap), 'slept', "bob's call under way is answered");
      const log = lines(join(dir, 'relay.log'));
      assert.equal(log.filter((l) => l === 'start').length, started, 'the one process was not restarted');
      assert.equal(log.filter((l) => l === 'discover').length, asked, 'nor asked its era again');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
