// Questions an upstream asks the person during a call (CONTRACT §6.3), with the real
// @modelcontextprotocol/server-everything over Streamable HTTP behind svc: its elicitation and sampling tools, which it
// registers only for clients that declare those capabilities (svc's client declares them). Through svc's /mcp with the
// legacy line's client (2025):
// - a question reaches the client of the caller whose call it is, on that call's stream, and its answer reaches the
//   upstream: elicitation (form) and sampling, two people at once, each asked once and answered with their own words;
// - a client that did not declare the capability is never asked: the upstream gets the missing-capability error and
//   the call fails; svc never answers for the person;
// - an answer posted by another user with the question's id reaches nothing; the asked person's own answer goes on;
// - a stdio upstream's question (which names no request) is relayed only from a process of one person's
//   (isolation = user), never from a shared one; and svc declares no roots to a stdio upstream.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { DEFAULT_AUTH, freePort, ROOT } from './helpers/workspace.ts';
import { listening, waitFor } from './helpers/wait.ts';

const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const ELICIT = 'everything__trigger-elicitation-request';
const SAMPLE = 'everything__trigger-sampling-request';

/** A 2025 client of svc, declaring elicitation and sampling (or nothing), answering with `words`. */
async function agent(svc: TestServer, token: string, capable: boolean, words: string, asked: string[] = []): Promise<Client> {
  const client = new Client({ name: 'agent', version: '1.0.0' }, { capabilities: capable ? { elicitation: {}, sampling: {} } : {} });
  if (capable) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(`elicit:${request.params.message}`);
      const schema = (request.params as { requestedSchema?: { properties?: Record<string, { type?: string }> } }).requestedSchema;
      const content: Record<string, unknown> = {};
      for (const [key, property] of Object.entries(schema?.properties ?? {}))
        if (property.type === 'string') content[key] = `${words} ${key}`;
        else if (property.type === 'boolean') content[key] = true;
        else if (property.type === 'number' || property.type === 'integer') content[key] = 7;
      return { action: 'accept', content: content as Record<string, string> };
    });
    client.setRequestHandler(CreateMessageRequestSchema, async () => {
      asked.push('sample');
      return { role: 'assistant', model: 'test-model', content: { type: 'text', text: `${words} sampled` } };
    });
  }
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return client;
}

const text = (r: unknown) => ((r as CallToolResult).content as { type: string; text?: string }[]).map((c) => c.text ?? '').join('\n');

describe('questions an upstream asks the person, through svc (2025 callers)', () => {
  let svc: TestServer;
  let everything: ChildProcess;
  const tokens: Record<'alice' | 'carol' | 'bob', string> = { alice: '', carol: '', bob: '' };

  before(async () => {
    const port = await freePort();
    everything = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
    await waitFor('server-everything listening', () => listening(port), { everyMs: 200 });
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}
[upstream everything]
url = http://127.0.0.1:${port}/mcp
labels = eng
review = admin
tools = echo trigger-elicitation-request trigger-sampling-request
timeout = 20s
`,
    });
    for (const uid of ['alice', 'carol', 'bob'] as const)
      tokens[uid] = await svc.tokenFor(await svc.addUser({ uid, email: `${uid}@example.com`, labels: uid === 'bob' ? '' : 'eng' }));
    // server-everything offers its question tools once a client declares what they need: svc's does.
    await waitFor(
      'the question tools listed',
      async () => {
        const listed = JSON.parse((await svc.ws.svc(['tool', 'list', '--json'])).stdout) as { name: string }[];
        return ['trigger-elicitation-request', 'trigger-sampling-request'].every((n) => listed.some((t) => t.name === n));
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
    for (const name of ['echo', 'trigger-elicitation-request', 'trigger-sampling-request']) {
      const r = await svc.ws.svc(['tool', 'approve', 'everything', name]);
      assert.equal(r.code, 0, r.stderr);
    }
  });

  after(async () => {
    await svc?.stop();
    everything?.kill();
  });

  test("an elicitation and a sampling request reach the caller's own client, two people at once, each with their own answer", async () => {
    const askedAlice: string[] = [];
    const askedCarol: string[] = [];
    const alice = await agent(svc, tokens.alice, true, 'alice-words', askedAlice);
    const carol = await agent(svc, tokens.carol, true, 'carol-words', askedCarol);
    try {
      const [a, c] = await Promise.all([alice.callTool({ name: ELICIT, arguments: {} }), carol.callTool({ name: ELICIT, arguments: {} })]);
      assert.match(text(a), /User provided the requested information/);
      assert.match(text(a), /alice-words/);
      assert.doesNotMatch(text(a), /carol-words/);
      assert.match(text(c), /carol-words/);
      assert.doesNotMatch(text(c), /alice-words/);
      assert.equal(askedAlice.filter((q) => q.startsWith('elicit:')).length, 1, 'alice was asked once');
      assert.equal(askedCarol.filter((q) => q.startsWith('elicit:')).length, 1, 'carol was asked once');

      const sampled = await alice.callTool({ name: SAMPLE, arguments: { prompt: 'hello', maxTokens: 10 } });
      assert.notEqual((sampled as CallToolResult).isError, true, text(sampled));
      assert.match(text(sampled), /alice-words sampled/);
      assert.deepEqual(
        askedCarol.filter((q) => q === 'sample'),
        [],
        'carol was not asked alice’s question',
      );
    } finally {
      await Promise.all([alice.close(), carol.close()]);
    }
  });

  test('a client that did not declare the capability is never asked: the upstream is refused and the call fails', async () => {
    const askedAlice: string[] = [];
    const capable = await agent(svc, tokens.alice, true, 'alice-words', askedAlice);
    const plain = await agent(svc, tokens.alice, false, 'unused');
    try {
      const r = (await plain.callTool({ name: ELICIT, arguments: {} })) as CallToolResult;
      // server-everything reports the error it got as its tool's error: the specification's missing-capability code.
      assert.equal(r.isError, true);
      assert.match(text(r), /-32021/);
      assert.doesNotMatch(text(r), /User provided the requested information/, 'svc never answers for the person');
      assert.doesNotMatch(text(r), /declined/i, 'nor declines for them');
      const s = (await plain.callTool({ name: SAMPLE, arguments: { prompt: 'hello', maxTokens: 10 } })) as CallToolResult;
      assert.doesNotMatch(text(s), /sampled/);
      assert.deepEqual(askedAlice, [], "the same person's other client was not asked either");
    } finally {
      await Promise.all([capable.close(), plain.close()]);
    }
  });

  test('bob cannot answer a question asked of alice, even with its id; her own answer goes on', async () => {
    let questionId: string | number | undefined;
    let release: () => void = () => undefined;
    const forged = new Promise<void>((ok) => {
      release = ok;
    });
    const alice = new Client({ name: 'agent', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    alice.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
      questionId = extra.requestId;
      await forged;
      const props = Object.keys((request.params as { requestedSchema?: { properties?: object } }).requestedSchema?.properties ?? {});
      return { action: 'accept', content: Object.fromEntries(props.map((p) => [p, `alice-own ${p}`])) as Record<string, string> };
    });
    await alice.connect(
      new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${tokens.alice}` } },
      }),
    );
    try {
      const call = alice.callTool({ name: ELICIT, arguments: {} });
      await waitFor('alice asked', () => questionId !== undefined, { everyMs: 50, timeoutMs: 15_000 });
      const bobsAnswer = await fetch(`${svc.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${tokens.bob}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: questionId, result: { action: 'accept', content: { name: 'bob-forged' } } }),
      });
      // Bob's credential is good, so his post is taken, and reaches nothing: alice's call still waits for her.
      assert.equal(bobsAnswer.status, 202);
      await new Promise((ok) => setTimeout(ok, 300));
      release();
      const r = await call;
      assert.match(text(r), /alice-own/);
      assert.doesNotMatch(text(r), /bob-forged/);
    } finally {
      await alice.close();
    }
  });
});

const SDK = join(ROOT, 'node_modules/@modelcontextprotocol/sdk/dist/esm');
/**
 * A stdio server whose `ask` elicits during its call (the question names no request, as 2025 stdio cannot), and whose
 * `caps` tells what svc's client declared to it.
 */
const ASKING_STDIO = `
import { Server } from '${SDK}/server/index.js';
import { StdioServerTransport } from '${SDK}/server/stdio.js';
import { ListToolsRequestSchema, CallToolRequestSchema, ElicitResultSchema } from '${SDK}/types.js';
const server = new Server({ name: 'asking', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [
  { name: 'ask', description: 'Asks the person.', inputSchema: { type: 'object' } },
  { name: 'caps', description: 'What the client declared.', inputSchema: { type: 'object' } },
] }));
server.setRequestHandler(CallToolRequestSchema, async (r) => {
  if (r.params.name === 'caps') return { content: [{ type: 'text', text: JSON.stringify(server.getClientCapabilities() ?? {}) }] };
  try {
    const answer = await server.request({ method: 'elicitation/create', params: { message: 'Who are you?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } } }, ElicitResultSchema);
    return { content: [{ type: 'text', text: 'answered: ' + JSON.stringify(answer.content) }] };
  } catch (e) {
    return { content: [{ type: 'text', text: 'refused: ' + e.code }], isError: true };
  }
});
await server.connect(new StdioServerTransport());
`;

describe('questions from stdio upstreams: only from a process of one person, and no roots', () => {
  let svc: TestServer;
  let dir: string;
  let token = '';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-questions-'));
    writeFileSync(join(dir, 'asking.mjs'), ASKING_STDIO);
    const command = `command = "${process.execPath}" "${join(dir, 'asking.mjs')}"\nwritable = ${dir}\nreview = auto\nprotocol = 2025`;
    svc = await startTestServer({
      auth: `${DEFAULT_AUTH}\n[upstream shared]\n${command}\n\n[upstream own]\n${command}\nisolation = user\n`,
    });
    token = await svc.tokenFor(await svc.addUser({ uid: 'alice', email: 'alice@example.com', labels: '' }));
    await waitFor(
      'both listed',
      async () =>
        (JSON.parse((await svc.ws.svc(['tool', 'list', '--json'])).stdout) as { state: string }[]).filter((t) => t.state === 'approved')
          .length === 4,
      { everyMs: 300, timeoutMs: 60_000 },
    );
  });

  after(async () => {
    await svc?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a shared process's question is refused even with one caller; a process of the caller's own is asked", async () => {
    const asked: string[] = [];
    const alice = await agent(svc, token, true, 'alice-words', asked);
    try {
      const shared = (await alice.callTool({ name: 'shared__ask', arguments: {} })) as CallToolResult;
      assert.equal(text(shared), 'refused: -32600', 'a question on a shared process cannot be told to be hers: refused');
      assert.deepEqual(asked, [], 'and she was not asked');
      const own = (await alice.callTool({ name: 'own__ask', arguments: {} })) as CallToolResult;
      assert.match(text(own), /answered: \{"name":"alice-words name"\}/);
      assert.equal(asked.length, 1);
    } finally {
      await alice.close();
    }
  });

  test('svc declares no roots to a stdio upstream: a caller cannot name paths on svc’s host', async () => {
    const alice = await agent(svc, token, true, 'alice-words');
    try {
      const caps = JSON.parse(text(await alice.callTool({ name: 'own__caps', arguments: {} }))) as Record<string, unknown>;
      assert.ok('elicitation' in caps && 'sampling' in caps, JSON.stringify(caps));
      assert.ok(!('roots' in caps), JSON.stringify(caps));
    } finally {
      await alice.close();
    }
  });
});
