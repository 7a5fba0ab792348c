// The documents pages and a scoped token in a real browser. An admin uploads a document labelled board, sees that
// nobody can read it, grants board to a user, sees the user under "Who can see this?", and the user's token finds
// it through /mcp. The screenshots README.md and docs/administration.md show are taken here (docs/).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { launchChromium } from './helpers/chromium.ts';
import { bearer } from './helpers/http.ts';
import { ROOT } from './helpers/workspace.ts';
import { getUser } from '../src/store/users.ts';
import { putItem } from '../src/store/items.ts';
import { itemRecord } from './helpers/records.ts';

let s: TestServer;
let browser: Browser;
before(async () => {
  s = await startTestServer();
  await s.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', admin: true, labels: 'finance' });
  await s.addUser({ uid: 'erin', email: 'erin@example.com', password: 'erin password 1', labels: 'finance, eng' });
  await s.database.write((tx) =>
    putItem(tx, 'finance/q3', itemRecord({ title: 'Q3 forecast', text: 'the quarterly forecast', labels: 'finance' })),
  );
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await s.stop();
});

async function search(token: string, query: string): Promise<string[]> {
  const client = new Client({ name: 'e2e', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), { requestInit: { headers: bearer(token) } }));
  const r = (await client.callTool({ name: 'search', arguments: { query } })) as unknown as {
    structuredContent: { results: { id: string }[] };
  };
  await client.close();
  return r.structuredContent.results.map((x) => x.id);
}

test('upload a board document, see nobody can read it, grant board, see who can, find it through the token', async () => {
  const token = await s.tokenFor(await getUser(s.database.db, 'erin'));
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  const nav = (name: string) => page.getByRole('navigation', { name: 'account' }).getByRole('link', { name });
  await page.goto(`${s.url}/login?next=%2Fadmin%2Fitems`);
  await page.getByLabel('Username').fill('boss');
  await page.getByLabel('Password').fill('boss password 1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Documents' }).waitFor();

  await page.getByLabel('Markdown file').setInputFiles({
    name: 'board-minutes.md',
    mimeType: 'text/markdown',
    buffer: Buffer.from('---\ntitle: Board minutes, November\nlabels: board\n---\nThe board approved the 2027 plan.\n'),
  });
  await page.getByRole('button', { name: 'Save document' }).click();
  await page.getByRole('heading', { name: 'Board minutes, November' }).waitFor();
  assert.match((await page.getByRole('status').first().textContent())!, /Document saved/);
  assert.match((await page.locator('main').textContent())!, /Nobody can read this document yet/);
  assert.deepEqual(await search(token, '2027 plan'), [], 'nobody holds board yet');

  await nav('Users').click();
  await page.getByRole('link', { name: 'erin' }).click();
  await page.getByLabel('Labels').fill('finance, eng, board');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('status').waitFor();

  await nav('Documents').click();
  await page.getByRole('link', { name: 'board-minutes' }).click();
  await page.locator('li[data-uid="erin"]').waitFor();
  assert.deepEqual(await page.locator('ul.readers li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-uid'))), ['erin']);
  assert.deepEqual(await search(token, '2027 plan'), ['board-minutes'], 'found through her token via /mcp');
  await page.screenshot({ path: join(ROOT, 'docs', 'admin-document.png'), fullPage: true });

  await nav('Documents').click();
  await page.screenshot({ path: join(ROOT, 'docs', 'admin-documents.png'), fullPage: true });
  await page.close();
});

test('replacing a document asks first and says its labels are kept; confirming keeps them and the text exactly', async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  await page.goto(`${s.url}/login?next=%2Fadmin%2Fitems`);
  await page.getByLabel('Username').fill('boss');
  await page.getByLabel('Password').fill('boss password 1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Documents' }).waitFor();
  await page.getByLabel('Markdown file').setInputFiles({
    name: 'board-minutes.md',
    mimeType: 'text/markdown',
    buffer: Buffer.from('---\ntitle: Board minutes, November (corrected)\n---\nThe board approved the 2027 plan.\nCorrected.\n'),
  });
  await page.getByRole('button', { name: 'Save document' }).click();
  await page.getByRole('heading', { name: 'Replace board-minutes?' }).waitFor();
  assert.match((await page.locator('.labels-outcome').textContent())!, /keeps its labels: board/);
  assert.equal(
    (await s.database.db.query.items.findFirst({ where: (i, { eq }) => eq(i.id, 'board-minutes') }))?.title,
    'Board minutes, November',
    'nothing replaced yet',
  );
  await page.getByRole('button', { name: 'Replace board-minutes' }).click();
  await page.getByRole('heading', { name: 'Board minutes, November (corrected)' }).waitFor();
  const row = await s.database.db.query.items.findFirst({ where: (i, { eq }) => eq(i.id, 'board-minutes') });
  assert.deepEqual([row?.labels, row?.text], ['board', 'The board approved the 2027 plan.\nCorrected.\n']);
  await page.close();
});

test('a token restricted to finance, made on the token page', async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  await page.goto(`${s.url}/login`);
  await page.getByLabel('Username').fill('erin');
  await page.getByLabel('Password').fill('erin password 1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Personal access tokens' }).waitFor();
  await page.getByLabel('Name').fill('finance report agent');
  // Checking a label selects "Only documents with these labels" by itself.
  await page.getByLabel('finance').check();
  assert.equal(await page.getByLabel('Only documents with these labels').isChecked(), true);
  await page.getByRole('button', { name: 'Create token' }).click();
  const token = (await page.locator('#new-token').textContent())!.trim();
  assert.match(token, /^svc_/);
  assert.match((await page.locator('tr', { hasText: 'finance report agent' }).locator('td.token-access').textContent())!, /only finance/);
  assert.deepEqual(await search(token, 'quarterly forecast'), ['finance/q3']);
  assert.deepEqual(await search(token, '2027 plan'), [], 'board is outside the restriction, though erin holds it');
  await page.screenshot({ path: join(ROOT, 'docs', 'scoped-token.png'), fullPage: true });
  await page.close();
});
