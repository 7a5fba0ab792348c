// With OAuth on, every client that sends a static Authorization header still reaches /mcp as before: the SDK client,
// mcp-remote (a stdio bridge many desktop clients use), and /mcp announces no OAuth metadata, so none of them
// switches to a browser sign-in. The MCP Inspector CLI runs against the same configuration in inspector.test.ts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { throughMcpRemote } from './helpers/mcp-remote.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { bearer } from './helpers/http.ts';
import { OAUTH_ON } from './helpers/workspace.ts';

let s: TestServer;
let token: string;
before(async () => {
  s = await startTestServer({ auth: OAUTH_ON });
  token = await s.tokenFor(await s.addUser({ uid: 'static', email: 'static@example.com' }));
});
after(() => s.stop());

const uidOf = async (client: Client) =>
  ((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as { uid: string }).uid;

test('the SDK client with a personal token on /mcp, and on /oauth/mcp too', async () => {
  for (const path of ['/mcp', '/oauth/mcp']) {
    const client = new Client({ name: 'static', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}${path}`), { requestInit: { headers: bearer(token) } }));
    assert.equal(await uidOf(client), 'static', path);
    await client.close();
  }
});

test('/mcp serves no protected-resource metadata, at its path or the root, and its 401 names none', async () => {
  for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource'])
    assert.equal((await fetch(`${s.url}${path}`)).status, 404);
  const r = await fetch(`${s.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: '{}',
  });
  assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="svc"');
});

test('mcp-remote with --header bridges stdio to /mcp', async () => {
  const { client, close } = await throughMcpRemote(`${s.url}/mcp`, token);
  try {
    assert.equal(await uidOf(client), 'static');
    const tools = await client.listTools();
    assert.deepEqual(tools.tools.map((t) => t.name).sort(), ['fetch', 'search', 'whoami']);
  } finally {
    await close();
  }
});
