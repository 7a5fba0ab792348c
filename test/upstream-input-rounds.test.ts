// Questions to the person for 2026-07-28 callers (CONTRACT §6.3): an `input_required` result, answered by retrying.
// Behind svc: a strict 2026-07-28 upstream written here on the SDK's v2 server, whose tool `confirm` answers
// `input_required` (an elicitation and its own request state) and completes only when the retry carries both back,
// and the real @modelcontextprotocol/server-everything (2025), which asks during its call. Through svc's /mcp:
// - a 2026-07-28 caller (the stable line's client, which answers and retries on its own) completes both;
// - a 2025 caller (the legacy line's client) is asked the modern upstream's question on its call's stream;
// - a retry with altered state, another user's retry with the caller's state, and a retry of the held call after it
//   was answered all get the error of an expired request, and reach nothing;
// - a caller that did not declare elicitation is never asked: the call fails, and svc answers nothing for the person.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { z } from 'zod';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { DEFAULT_AUTH, freePort, ROOT } from './helpers/workspace.ts';
import { listening, waitFor } from './helpers/wait.ts';
import { serveWeb, type Served } from './helpers/web-upstream.ts';
import { writeFileSync } from 'node:fs';
import { install, serveTogether, sourceRunner, type Installation, type ServeProcess } from './helpers/installation.ts';
import { startSqld, type Sqld } from './helpers/sqld.ts';

const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const UPSTREAM_STATE = 'the-upstream-own-state';

/** The strict upstream: `confirm` asks the person for a name and completes with it once the retry brings it. */
function modernServer(): McpServer {
  const server = new McpServer({ name: 'asker', version: '1.0.0' });
  server.registerTool(
    'confirm',
    { description: 'Asks the person for a name.', inputSchema: { topic: z.string() } },
    async ({ topic }, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.who as { action?: string; content?: { name?: string } } | undefined;
      if (answer === undefined)
        return {
          resultType: 'input_required',
          inputRequests: {
            who: {
              method: 'elicitation/create',
              params: {
                message: `Who confirms ${topic}?`,
                requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
              },
            },
          },
          requestState: UPSTREAM_STATE,
        } as never;
      const state = ctx.mcpReq.requestState();
      return { content: [{ type: 'text', text: `confirmed ${topic} by ${answer.content?.name} (state ${String(state)})` }] };
    },
  );
  return server;
}

/** A 2026-07-28 client of svc that answers elicitations with `words` (or declares none). */
async function modernAgent(svc: TestServer, token: string, words: string | null, asked: string[] = []): Promise<Client> {
  const client = new Client(
    { name: 'agent', version: '2.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: words === null ? {} : { elicitation: {} } },
  );
  if (words !== null)
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push(String((request.params as { message?: string }).message));
      const props = Object.keys((request.params as { requestedSchema?: { properties?: object } }).requestedSchema?.properties ?? {});
      return { action: 'accept', content: Object.fromEntries(props.map((p) => [p, `${words} ${p}`])) };
    });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  assert.equal(client.getProtocolEra(), 'modern');
  return client;
}

const text = (r: unknown) => ((r as CallToolResult).content as { text?: string }[]).map((c) => c.text ?? '').join('\n');

/** A raw 2026-07-28 tools/call to svc. */
async function rawCall(
  svc: TestServer | string,
  token: string,
  params: Record<string, unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${typeof svc === 'string' ? svc : svc.url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': String(params.name),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
        },
      },
    }),
  });
  const raw = await response.text();
  const data = raw.startsWith('{')
    ? raw
    : (raw
        .split('\n')
        .find((l) => l.startsWith('data: ') && l.includes('"id":1'))
        ?.slice(6) ?? '{}');
  return { status: response.status, body: JSON.parse(data) as Record<string, unknown> };
}

/** Both upstreams on loopback, and the sections that configure them behind svc. */
async function startUpstreams(): Promise<{ modern: Served; everything: ChildProcess; section: string }> {
  const handler = createMcpHandler(() => modernServer(), { legacy: 'reject' });
  const modern = await serveWeb(async (request) => handler.fetch(request));
  const port = await freePort();
  const everything = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: 'ignore',
  });
  await waitFor('server-everything listening', () => listening(port), { everyMs: 200 });
  const section = `
[upstream asker]
url = ${modern.url}
review = auto
protocol = 2026-07-28

[upstream everything]
url = http://127.0.0.1:${port}/mcp
review = admin
tools = trigger-elicitation-request
timeout = 20s
`;
  return { modern, everything, section };
}

describe('questions to the person for 2026-07-28 callers: input_required and its retry', () => {
  let svc: TestServer;
  let modern: Served;
  let everything: ChildProcess;
  const tokens: Record<'alice' | 'bob', string> = { alice: '', bob: '' };

  before(async () => {
    const started = await startUpstreams();
    ({ modern, everything } = started);
    svc = await startTestServer({ auth: `${DEFAULT_AUTH}${started.section}` });
    tokens.alice = await svc.tokenFor(await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: '' }));
    tokens.bob = await svc.tokenFor(await svc.addUser({ uid: 'bob', email: 'bob@example.com', labels: '' }));
    await waitFor(
      'both upstreams listed',
      async () => {
        const listed = JSON.parse((await svc.ws.svc(['tool', 'list', '--json'])).stdout) as { name: string }[];
        return ['confirm', 'trigger-elicitation-request'].every((n) => listed.some((t) => t.name === n));
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
    const r = await svc.ws.svc(['tool', 'approve', 'everything', 'trigger-elicitation-request']);
    assert.equal(r.code, 0, r.stderr);
  });

  after(async () => {
    await svc?.stop();
    await modern?.stop();
    everything?.kill();
  });

  test("a 2026-07-28 caller answers a 2026-07-28 upstream's question by retrying; the upstream gets its own state back", async () => {
    const asked: string[] = [];
    const alice = await modernAgent(svc, tokens.alice, 'alice', asked);
    try {
      const r = await alice.callTool({ name: 'asker__confirm', arguments: { topic: 'launch' } });
      assert.equal(text(r), `confirmed launch by alice name (state ${UPSTREAM_STATE})`);
      assert.deepEqual(asked, ['Who confirms launch?']);
    } finally {
      await alice.close();
    }
  });

  test("a 2026-07-28 caller answers a 2025 upstream's question asked during its call, held on this instance", async () => {
    const asked: string[] = [];
    const alice = await modernAgent(svc, tokens.alice, 'alice-held', asked);
    try {
      const r = await alice.callTool({ name: 'everything__trigger-elicitation-request', arguments: {} });
      assert.match(text(r), /User provided the requested information/);
      assert.match(text(r), /alice-held/);
      assert.equal(asked.length, 1);
    } finally {
      await alice.close();
    }
  });

  test("a 2025 caller is asked the 2026-07-28 upstream's question on its call's stream", async () => {
    const client = new LegacyClient({ name: 'agent', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'legacy-alice' } }));
    await client.connect(
      new LegacyTransport(new URL(`${svc.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${tokens.alice}` } } }),
    );
    try {
      const r = await client.callTool({ name: 'asker__confirm', arguments: { topic: 'deploy' } });
      assert.equal(text(r), `confirmed deploy by legacy-alice (state ${UPSTREAM_STATE})`);
    } finally {
      await client.close();
    }
  });

  test('altered state, another user’s retry and other arguments: the expired error, nothing reached; the caller’s own retry completes', async () => {
    const first = await rawCall(svc, tokens.alice, { name: 'asker__confirm', arguments: { topic: 'secret' } });
    const result = first.body.result as { resultType?: string; requestState?: string; inputRequests?: Record<string, unknown> };
    assert.equal(result.resultType, 'input_required');
    assert.deepEqual(Object.keys(result.inputRequests ?? {}), ['who']);
    const sealed = result.requestState!;
    assert.ok(!sealed.includes(UPSTREAM_STATE), 'the upstream’s state is sealed, not shown');
    const retry = (token: string, state: string, topic = 'secret') =>
      rawCall(svc, token, {
        name: 'asker__confirm',
        arguments: { topic },
        inputResponses: { who: { action: 'accept', content: { name: 'mallory' } } },
        requestState: state,
      });
    const altered = `${sealed.slice(0, -2)}${sealed.endsWith('AA') ? 'BB' : 'AA'}`;
    for (const [who, state, topic] of [
      [tokens.alice, altered, 'secret'],
      [tokens.bob, sealed, 'secret'],
      [tokens.alice, sealed, 'other'],
    ] as const) {
      const r = await retry(who, state, topic);
      const error = r.body.error as { code?: number; message?: string } | undefined;
      assert.equal(error?.code, -32602, JSON.stringify(r.body).slice(0, 300));
      assert.match(String(error?.message), /expired or is not yours/);
    }
    const own = await retry(tokens.alice, sealed);
    assert.match(JSON.stringify(own.body), /confirmed secret by mallory/, 'the caller’s own retry completes');
  });

  test('a caller that did not declare elicitation is never asked: the call fails, nothing is answered for the person', async () => {
    const plain = await modernAgent(svc, tokens.alice, null);
    try {
      const modernCall = (await plain.callTool({ name: 'asker__confirm', arguments: { topic: 'x' } })) as CallToolResult;
      assert.equal(modernCall.isError, true);
      assert.match(text(modernCall), /needs_input/);
      const held = (await plain.callTool({ name: 'everything__trigger-elicitation-request', arguments: {} })) as CallToolResult;
      assert.equal(held.isError, true);
      assert.match(text(held), /-32021/);
    } finally {
      await plain.close();
    }
  });
});

describe('a 2026-07-28 retry on another instance on one sqld', () => {
  let sqld: Sqld;
  let modern: Served;
  let everything: ChildProcess;
  let inst: Installation;
  let servers = {} as Record<'a' | 'b', ServeProcess>;
  let token = '';

  before(async () => {
    sqld = await startSqld({ auth: true });
    const started = await startUpstreams();
    ({ modern, everything } = started);
    const { section } = started;
    inst = await install(sourceRunner, { auth: `${DEFAULT_AUTH}${section}`, remote: { url: sqld.url, token: sqld.token } });
    const ok = async (args: string[]) => {
      const r = await inst.cli(args);
      assert.equal(r.code, 0, `svc ${args.join(' ')}: ${r.stderr}`);
      return r.stdout.trim();
    };
    await ok(['migrate']);
    await ok(['user', 'add', 'alice', '--email', 'alice@example.com']);
    token = await ok(['token', 'create', 'alice', '--name', 'agent']);
    const config = join(inst.dir, 'serve.ini');
    writeFileSync(
      config,
      `[server]\nlisten = 127.0.0.1:0\nbase_url = ${inst.url}\ndatabase = ${inst.database}\ndatabase_token_env = SVC_DATABASE_TOKEN\n[auth]\n${DEFAULT_AUTH}${section}`,
    );
    servers = await serveTogether(sourceRunner, config, ['a', 'b'] as const, () => inst.env);
    await waitFor(
      'both upstreams listed',
      async () => {
        const listed = JSON.parse(await ok(['tool', 'list', '--json'])) as { name: string }[];
        return ['confirm', 'trigger-elicitation-request'].every((n) => listed.some((t) => t.name === n));
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
    await ok(['tool', 'approve', 'everything', 'trigger-elicitation-request']);
  });

  after(async () => {
    for (const s of Object.values(servers)) s.child.kill('SIGTERM');
    await Promise.all(
      Object.values(servers).map(
        (s) =>
          new Promise<void>((ok) => (s.child.exitCode !== null || s.child.signalCode !== null ? ok() : s.child.once('exit', () => ok()))),
      ),
    );
    await modern?.stop();
    everything?.kill();
    inst?.remove();
    await sqld?.remove();
  });

  test("a 2026-07-28 upstream's question asked through instance A is answered by a retry through instance B", async () => {
    const first = await rawCall(servers.a.url, token, { name: 'asker__confirm', arguments: { topic: 'failover' } });
    const result = first.body.result as { resultType?: string; requestState?: string };
    assert.equal(result.resultType, 'input_required', JSON.stringify(first.body).slice(0, 300));
    const retry = await rawCall(servers.b.url, token, {
      name: 'asker__confirm',
      arguments: { topic: 'failover' },
      inputResponses: { who: { action: 'accept', content: { name: 'alice on b' } } },
      requestState: result.requestState,
    });
    assert.match(JSON.stringify(retry.body), new RegExp(`confirmed failover by alice on b \\(state ${UPSTREAM_STATE}\\)`));
  });

  test("a 2025 upstream's question holds its call on instance A: a retry through B gets the expired error, and one through A completes", async () => {
    const first = await rawCall(servers.a.url, token, { name: 'everything__trigger-elicitation-request', arguments: {} });
    const result = first.body.result as {
      resultType?: string;
      requestState?: string;
      inputRequests?: Record<string, { params?: { requestedSchema?: { properties?: object } } }>;
    };
    assert.equal(result.resultType, 'input_required', JSON.stringify(first.body).slice(0, 300));
    const [key, question] = Object.entries(result.inputRequests ?? {})[0]!;
    const content = Object.fromEntries(Object.keys(question.params?.requestedSchema?.properties ?? {}).map((p) => [p, `held ${p}`]));
    const retry = (on: ServeProcess) =>
      rawCall(on.url, token, {
        name: 'everything__trigger-elicitation-request',
        arguments: {},
        inputResponses: { [key]: { action: 'accept', content } },
        requestState: result.requestState,
      });
    const elsewhere = await retry(servers.b);
    assert.equal((elsewhere.body.error as { code?: number } | undefined)?.code, -32602, JSON.stringify(elsewhere.body).slice(0, 300));
    const home = await retry(servers.a);
    assert.match(JSON.stringify(home.body), /User provided the requested information/);
  });
});
