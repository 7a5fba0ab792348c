// The admin page in a real browser: add a user, grant a label, watch that user's token find the labelled item
// through /mcp, remove the user, and watch the token be refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { launchChromium } from './helpers/chromium.ts';
import { bearer } from './helpers/http.ts';
import { putItem } from '../src/store/items.ts';
import { getUser } from '../src/store/users.ts';
import { itemRecord } from './helpers/records.ts';

let s: TestServer;
let browser: Browser;
before(async () => {
  s = await startTestServer();
  await s.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', admin: true });
  await s.database.write((tx) =>
    putItem(tx, 'board/minutes', itemRecord({ title: 'Board minutes', text: 'minutes of the board meeting', labels: 'board' })),
  );
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await s.stop();
});

async function searchAs(token: string): Promise<string[]> {
  const client = new Client({ name: 'e2e', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), { requestInit: { headers: bearer(token) } }));
  const r = (await client.callTool({ name: 'search', arguments: { query: 'board minutes' } })) as unknown as {
    structuredContent: { results: { id: string }[] };
  };
  await client.close();
  return r.structuredContent.results.map((x) => x.id);
}

test('add user -> grant label -> their token finds the item -> remove user -> token refused', async () => {
  const page = await browser.newPage();
  await page.goto(`${s.url}/login?next=%2Fadmin%2Fusers`);
  await page.getByLabel('Username').fill('boss');
  await page.getByLabel('Password').fill('boss password 1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Users' }).waitFor();

  await page.getByLabel('uid').fill('newbie');
  await page.getByLabel('Email').fill('newbie@example.com');
  await page.getByRole('button', { name: 'Add user' }).click();
  await page.getByRole('heading', { name: 'newbie' }).waitFor();
  assert.match((await page.getByRole('status').textContent())!, /User created/);

  const token = await s.tokenFor(await getUser(s.database.db, 'newbie'));
  assert.deepEqual(await searchAs(token), [], 'no label yet: the board item is invisible');

  await page.getByLabel('Labels').fill('board');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('status').waitFor();
  assert.deepEqual(await searchAs(token), ['board/minutes'], 'label granted: visible on the next call');

  await page.getByRole('link', { name: 'Remove user…' }).click();
  await page.getByRole('button', { name: 'Remove newbie' }).click();
  await page.getByRole('heading', { name: 'Users' }).waitFor();
  assert.match((await page.getByRole('status').textContent())!, /User removed/);
  await page.screenshot({ path: `${s.ws.dir}/admin.png`, fullPage: true });

  const refused = await fetch(`${s.url}/mcp`, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
  });
  assert.equal(refused.status, 401);
});
