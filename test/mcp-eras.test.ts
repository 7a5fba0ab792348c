// /mcp in both protocol eras (CONTRACT §6): the same credential rule, scopes, label restrictions and visibility for a
// 2025 client (the legacy line's Client, and the stable line's in its default `legacy` mode) and a 2026-07-28 one
// (the stable line's Client pinned, and in `auto`), a table over users, restrictions and eras; the modern era issues
// no session; refusals (anonymous, revoked, out of scope, an unknown revision) are the same answers in both.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client as LegacyLineClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyLineTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { putItem } from '../src/store/items.ts';
import { itemRecord, tokenRecord } from './helpers/records.ts';
import { createToken, revokeAllTokens } from '../src/store/tokens.ts';
import type { User } from '../src/store/users.ts';

const MODERN = '2026-07-28';

/** What one era's client tells of a caller: whoami, what a search finds, what fetch and resources can read. */
interface Seen {
  era: string;
  whoami: unknown;
  found: string[];
  fetched: Record<string, boolean>;
  resources: string[];
  read: Record<string, boolean>;
}

type Mode = 'v1' | 'v2-legacy' | 'v2-auto' | 'v2-pinned';
const MODES: Mode[] = ['v1', 'v2-legacy', 'v2-auto', 'v2-pinned'];

interface AnyClient {
  callTool(p: { name: string; arguments?: Record<string, unknown> }): Promise<unknown>;
  listResources(): Promise<{ resources: { uri: string }[] }>;
  readResource(p: { uri: string }): Promise<unknown>;
  close(): Promise<void>;
}

async function connect(url: string, token: string, mode: Mode): Promise<{ client: AnyClient; era: string }> {
  const headers = { Authorization: `Bearer ${token}` };
  if (mode === 'v1') {
    const client = new LegacyLineClient({ name: 'eras-test', version: '1' });
    await client.connect(new LegacyLineTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
    return { client: client as unknown as AnyClient, era: 'legacy' };
  }
  const negotiation = mode === 'v2-legacy' ? 'legacy' : mode === 'v2-auto' ? 'auto' : { pin: MODERN };
  const client = new Client({ name: 'eras-test', version: '2' }, { versionNegotiation: { mode: negotiation } });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  return { client: client as unknown as AnyClient, era: client.getProtocolEra() ?? 'none' };
}

const IDS = ['eng/plan', 'vault/keys', 'open/notice'];

async function seenBy(url: string, token: string, mode: Mode): Promise<Seen> {
  const { client, era } = await connect(url, token, mode);
  try {
    const whoami = ((await client.callTool({ name: 'whoami' })) as { structuredContent: unknown }).structuredContent;
    const search = (await client.callTool({ name: 'search', arguments: { query: 'quarterly' } })) as {
      structuredContent: { results: { id: string }[] };
    };
    const fetched: Record<string, boolean> = {};
    const read: Record<string, boolean> = {};
    for (const id of [...IDS, 'missing/one']) {
      const r = (await client.callTool({ name: 'fetch', arguments: { id } })) as { isError?: boolean; content: { text: string }[] };
      fetched[id] = r.isError !== true;
      if (r.isError) assert.equal(r.content[0]!.text, `not found: no document "${id}"`, 'an invisible document reads as a missing one');
      read[id] = await client.readResource({ uri: `svc://items/${id}` }).then(
        () => true,
        (e: { code?: number }) => {
          // The stable line answers a miss -32602 in both eras, as the 2026-07-28 specification says of resources/read.
          assert.equal(e.code, -32602, 'a missing resource and an invisible one are the same error');
          return false;
        },
      );
    }
    const resources = (await client.listResources()).resources.map((r) => r.uri).sort();
    return { era, whoami, found: search.structuredContent.results.map((r) => r.id).sort(), fetched, resources, read };
  } finally {
    await client.close();
  }
}

function rpc(url: string, body: unknown, headers: Record<string, string>): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

/** A 2026-07-28 request as a client of that revision sends it. */
function modern(method: string, params: Record<string, unknown> = {}, revision = MODERN) {
  const _meta = {
    'io.modelcontextprotocol/protocolVersion': revision,
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  return {
    body: { jsonrpc: '2.0', id: 1, method, params: { ...params, _meta } },
    headers: {
      'mcp-protocol-version': revision,
      'mcp-method': method,
      ...(typeof params.name === 'string' ? { 'mcp-name': params.name } : {}),
    } as Record<string, string>,
  };
}

describe('/mcp in both protocol eras', () => {
  let s: TestServer;
  const tokens: Record<string, string> = {};
  let alice: User;
  /** A token of the user's, restricted to these labels (null: the user's whole access) with these scopes. */
  const mint = async (user: User, labels: string[] | null, scopes = 'mcp') =>
    (
      await s.database.write(async (tx) =>
        createToken(tx, user.id, tokenRecord('eras', undefined, labels, scopes), await s.database.tokenEpoch(tx)),
      )
    ).token;
  before(async () => {
    s = await startTestServer({ auth: 'token\n    enabled true\n' });
    alice = await s.addUser({ uid: 'alice', email: 'alice@example.com', labels: ['eng', 'vault'] });
    const bob = await s.addUser({ uid: 'bob', email: 'bob@example.com', labels: ['eng'] });
    await s.database.write(async (tx) => {
      await putItem(tx, 'eng/plan', itemRecord({ title: 'plan', text: 'the quarterly plan', labels: 'eng' }));
      await putItem(tx, 'vault/keys', itemRecord({ title: 'keys', text: 'quarterly key rotation', labels: 'vault' }));
      await putItem(tx, 'open/notice', itemRecord({ title: 'notice', text: 'quarterly notice to all', labels: '' }));
    });
    tokens.alice = await s.tokenFor(alice);
    tokens['alice restricted to eng'] = await mint(alice, ['eng']);
    tokens.bob = await s.tokenFor(bob);
  });
  after(async () => {
    await s?.stop();
  });

  test('each era sees exactly what the same credential sees in the other: users × restrictions × eras', async () => {
    const expected: Record<string, string[]> = {
      alice: ['eng/plan', 'open/notice', 'vault/keys'],
      'alice restricted to eng': ['eng/plan', 'open/notice'],
      bob: ['eng/plan', 'open/notice'],
    };
    for (const [who, token] of Object.entries(tokens)) {
      const seen: Seen[] = [];
      for (const mode of MODES) seen.push(await seenBy(s.url, token!, mode));
      assert.deepEqual(
        seen.map((v) => v.era),
        ['legacy', 'legacy', 'modern', 'modern'],
        'auto and pinned clients talk 2026-07-28 with svc',
      );
      const first = seen[0]!;
      assert.deepEqual(first.found, expected[who], `${who} finds what their labels and restriction let them`);
      assert.deepEqual(
        first.resources,
        expected[who]!.map((id) => `svc://items/${id}`),
      );
      assert.deepEqual(
        Object.keys(first.fetched)
          .filter((id) => first.fetched[id])
          .sort(),
        expected[who],
      );
      assert.deepEqual(first.read, first.fetched, 'resources/read answers as fetch does');
      for (const other of seen.slice(1)) assert.deepEqual({ ...other, era: first.era }, first, `${who}: the same in every era`);
    }
  });

  test('the modern era has no session: no mcp-session-id, and server/discover names the revisions svc serves', async () => {
    const discover = modern('server/discover');
    const answer = await rpc(s.url, discover.body, { ...discover.headers, authorization: `Bearer ${tokens.alice}` });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('mcp-session-id'), null);
    const { result } = (await answer.json()) as { result: { supportedVersions: string[]; capabilities: Record<string, unknown> } };
    assert.ok(result.supportedVersions.includes(MODERN));
    assert.ok(result.capabilities.tools, 'tools are offered');
    const list = modern('tools/list');
    const listed = await rpc(s.url, list.body, { ...list.headers, authorization: `Bearer ${tokens.bob}` });
    assert.equal(listed.status, 200);
    assert.equal(listed.headers.get('mcp-session-id'), null);
    const tools = ((await listed.json()) as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name);
    assert.deepEqual(tools, ['whoami', 'search', 'fetch']);
  });

  test('an unknown revision is refused with -32022, naming the revisions svc serves', async () => {
    const future = modern('tools/list', {}, '2099-01-01');
    const answer = await rpc(s.url, future.body, { ...future.headers, authorization: `Bearer ${tokens.alice}` });
    assert.equal(answer.status, 400);
    const { error } = (await answer.json()) as { error: { code: number; data: { supported: string[]; requested: string } } };
    assert.equal(error.code, -32022);
    assert.ok(error.data.supported.includes(MODERN));
    assert.equal(error.data.requested, '2099-01-01');
  });

  test('refusals are the same in both eras: anonymous, a revoked token, a token without the mcp scope', async () => {
    const discover = modern('server/discover');
    const call = modern('tools/call', { name: 'whoami', arguments: {} });
    const initialize = {
      body: {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      },
      headers: {} as Record<string, string>,
    };
    const statusOf = async (r: { body: unknown; headers: Record<string, string> }, authorization?: string) => {
      const answer = await rpc(s.url, r.body, { ...r.headers, ...(authorization ? { authorization } : {}) });
      return { status: answer.status, challenge: answer.headers.get('www-authenticate') };
    };
    const anonymous = await statusOf(initialize);
    assert.equal(anonymous.status, 401);
    assert.deepEqual(await statusOf(discover), anonymous, 'server/discover is never served anonymously');
    assert.deepEqual(await statusOf(call), anonymous);

    const readOnly = await mint(alice, null, 'api');
    const outOfScope = await statusOf(initialize, `Bearer ${readOnly}`);
    assert.equal(outOfScope.status, 403);
    assert.equal((await statusOf(discover, `Bearer ${readOnly}`)).status, 403);
    assert.equal((await statusOf(call, `Bearer ${readOnly}`)).status, 403);

    const doomed = await mint(alice, null);
    assert.equal((await statusOf(call, `Bearer ${doomed}`)).status, 200);
    await s.database.write((tx) => revokeAllTokens(tx, alice.id));
    const refused = await statusOf(initialize, `Bearer ${doomed}`);
    assert.equal(refused.status, 401);
    assert.deepEqual(await statusOf(discover, `Bearer ${doomed}`), refused);
    assert.deepEqual(await statusOf(call, `Bearer ${doomed}`), refused);
  });
});
