// An answer /mcp cannot write (mcp/server.ts answerEvenUnwritable): the SDK's transport writes a request's answer with
// JSON.stringify once every id has one, and a throw there left the request unanswered for good. The gateway bounds
// what an upstream can make svc answer (an answer nested deeper than 64 levels is a protocol fault, test/
// upstream-hostile.test.ts), so this takes the part the upstream would play: a gateway whose call answers 20,000
// levels deep, behind the real endpoint, which must still answer the tool call (its isError result), keep the other
// answers of a batch, and then answer the next request on a fresh server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isLegacyRequest } from '@modelcontextprotocol/server';
import { mcpEndpoint } from '../src/mcp/server.ts';
import type { UpstreamGateway } from '../src/upstream/gateway.ts';
import { callerOf, type Principal } from '../src/auth/core.ts';
import { silentLogger } from '../src/log.ts';
import { openFresh } from './helpers/drivers.ts';

let deep: unknown = 'bottom';
for (let i = 0; i < 20_000; i++) deep = [deep];

/** A gateway with one tool, `up__deep`, whose answer no JSON.stringify can write. */
const gateway = {
  tools: async () => ({ tools: [], last: null }),
  resolve: async (name: string) => (name === 'up__deep' ? { tool: { upstream: 'up', name: 'deep' } } : null),
  call: async () => ({ content: [{ type: 'text', text: 'deep' }], structuredContent: { deep } }),
  callConnect: async () => ({ content: [] }),
  // With a gateway, the endpoint keeps a hub of change notifications (mcp/changes.ts) that listens to its resources.
  listenToResources: () => undefined,
} as unknown as UpstreamGateway;

const principal = {
  user: { id: 1, uid: 'alice', name: 'Alice', email: 'alice@example.com', labels: [], admin: false },
  via: 'token',
} as unknown as Principal;

function post(body: unknown): Request {
  return new Request('http://127.0.0.1/mcp', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-03-26' },
    body: JSON.stringify(body),
  });
}

/** The message as a 2026-07-28 client sends it: its revision, client and capabilities in `_meta`. */
function modern(message: { method: string; params?: Record<string, unknown> }) {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'test', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  return { ...message, params: { ...message.params, _meta: meta } };
}

function postModern(body: { method: string; params?: Record<string, unknown> }): Request {
  return new Request('http://127.0.0.1/mcp', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': body.method,
      ...(typeof body.params?.name === 'string' ? { 'mcp-name': body.params.name } : {}),
    },
    body: JSON.stringify(body),
  });
}

test('an answer the transport cannot write is still answered, as the call isError result; the other answers of a batch stand', {
  timeout: 60_000,
}, async () => {
  const { database, close } = await openFresh('embedded');
  try {
    const endpoint = mcpEndpoint({ db: database.db, cursorKey: Buffer.alloc(32, 1), log: silentLogger, gateway });
    const caller = {
      caller: callerOf(principal, '127.0.0.1'),
      era: 'legacy' as const,
      urlElicitation: false,
      signal: () => new AbortController().signal,
    };
    const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'up__deep' } };
    const alone = await endpoint.legacy(post(call), call, caller);
    assert.equal(alone.status, 200);
    assert.deepEqual(await alone.json(), {
      jsonrpc: '2.0',
      id: 1,
      result: { content: [{ type: 'text', text: 'svc could not encode this answer' }], isError: true },
    });
    // In a batch, the answer that cannot be written is replaced, and the others keep theirs, whichever comes first.
    for (const batch of [
      [call, { jsonrpc: '2.0', id: 2, method: 'tools/list' }],
      [{ jsonrpc: '2.0', id: 2, method: 'tools/list' }, call],
    ]) {
      const answers = (await (await endpoint.legacy(post(batch), batch, caller)).json()) as {
        id: number;
        result: { isError?: boolean; tools?: unknown[] };
      }[];
      assert.deepEqual(answers.map((m) => [m.id, m.result.isError ?? m.result.tools?.length]).sort(), [
        [1, true],
        [2, 3],
      ]);
    }
    // The endpoint goes on: the next request is answered as usual.
    const list = { jsonrpc: '2.0', id: 3, method: 'tools/list' };
    const listed = (await (await endpoint.legacy(post(list), list, caller)).json()) as { result: { tools: { name: string }[] } };
    assert.deepEqual(
      listed.result.tools.map((t) => t.name),
      ['whoami', 'search', 'fetch'],
    );
    // The 2026-07-28 era's handler writes its answers the same way, and is answered the same way.
    const modernCall = modern(call);
    const answered = await endpoint.modern(postModern(modernCall), modernCall, { ...caller, era: 'modern' });
    assert.equal(answered.status, 200, await answered.clone().text());
    const body = (await answered.json()) as { id: number; result: { content: unknown; isError: boolean } };
    assert.equal(body.id, 1);
    assert.deepEqual(body.result.content, [{ type: 'text', text: 'svc could not encode this answer' }]);
    assert.equal(body.result.isError, true);
  } finally {
    await close();
  }
});

test("the endpoint's era is the SDK's own classification, for what it shortcuts and what it asks the SDK about", async () => {
  const { database, close } = await openFresh('embedded');
  try {
    const endpoint = mcpEndpoint({ db: database.db, cursorKey: Buffer.alloc(32, 1), log: silentLogger, gateway });
    const claim = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' };
    const bodies: unknown[] = [
      modern({ method: 'tools/list' }),
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, _meta: claim } },
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, _meta: claim } },
      { jsonrpc: '2.0', id: 1, result: {}, method: 'tools/list', params: { _meta: claim } },
      { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { ...claim, 'io.modelcontextprotocol/clientInfo': 7 } } },
      { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } },
      [modern({ method: 'tools/list' })],
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {} } },
    ];
    for (const body of bodies) {
      const sdk = (await isLegacyRequest(post(body), body)) ? 'legacy' : 'modern';
      assert.equal(await endpoint.eraOf(post(body), body), sdk, JSON.stringify(body));
    }
  } finally {
    await close();
  }
});
