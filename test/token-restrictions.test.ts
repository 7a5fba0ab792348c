// Label-scoped tokens, through the real interfaces: the token API and page, the CLI, and /mcp with the SDK client.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { count } from 'drizzle-orm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { putItem } from '../src/store/items.ts';
import { updateUser } from '../src/store/users.ts';
import { tokens } from '../src/db/schema.ts';
import { itemRecord, changeRecord } from './helpers/records.ts';

const ITEMS: Record<string, string> = { open: '', eng: 'eng', fin: 'finance', both: 'eng, finance', board: 'board' };

async function reads(
  url: string,
  token: string,
): Promise<{ search: string[]; fetch: string[]; resources: string[]; who: Record<string, unknown> }> {
  const client = new Client({ name: 'scoped-test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: bearer(token) } }));
  try {
    const found = await client.callTool({ name: 'search', arguments: { query: 'plan', limit: 50 } });
    const search = (found.structuredContent as { results: { id: string }[] }).results.map((r) => r.id).sort();
    const fetched: string[] = [];
    for (const id of Object.keys(ITEMS)) if (!(await client.callTool({ name: 'fetch', arguments: { id } })).isError) fetched.push(id);
    const resources = (await client.listResources()).resources.map((r) => r.name).sort();
    const who = (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as Record<string, unknown>;
    return { search, fetch: fetched.sort(), resources, who };
  } finally {
    await client.close();
  }
}

describe('label-scoped tokens', () => {
  let s: TestServer;
  let b: Browser;
  const sees = async (token: string, expected: string[]) => {
    const r = await reads(s.url, token);
    const sorted = [...expected].sort();
    assert.deepEqual(r.search, sorted, 'search');
    assert.deepEqual(r.fetch, sorted, 'fetch');
    assert.deepEqual(r.resources, sorted, 'resources');
    return r.who;
  };
  const create = async (body: Record<string, unknown> | URLSearchParams) => {
    const res =
      body instanceof URLSearchParams
        ? await b.request('/auth/tokens', {
            method: 'POST',
            body: body.toString(),
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
          })
        : await b.request('/auth/tokens', { json: body });
    return { status: res.status, body: (await res.json()) as { id: string; token: string; labels: string[] | null; message?: string } };
  };

  before(async () => {
    s = await startTestServer();
    for (const [id, labels] of Object.entries(ITEMS))
      await s.database.write((tx) => putItem(tx, id, itemRecord({ title: `${id} plan`, text: `the ${id} plan`, labels })));
    await s.addUser({ uid: 'fran', email: 'fran@example.com', labels: 'eng, finance', password: 'fran password 1' });
    await s.addUser({ uid: 'other', email: 'other@example.com', password: 'other password 1' });
    b = new Browser(s.url);
    assert.equal((await b.login('fran', 'fran password 1')).status, 303);
  });
  after(() => s.stop());

  test("unrestricted: the owner's whole access; restricted to finance: finance and unlabelled documents only", async () => {
    const all = await create({ name: 'all' });
    assert.equal(all.status, 201);
    assert.equal(all.body.labels, null);
    const who = await sees(all.body.token, ['open', 'eng', 'fin', 'both']);
    assert.deepEqual([who.labels, who.restriction], [['eng', 'finance'], null]);

    const fin = await create({ name: 'finance task', labels: ['finance'] });
    assert.equal(fin.status, 201);
    assert.deepEqual(fin.body.labels, ['finance']);
    const scoped = await sees(fin.body.token, ['open', 'fin']);
    assert.deepEqual([scoped.labels, scoped.restriction], [['finance'], ['finance']]);
  });

  test('a restriction names only labels the owner holds (400 otherwise, nothing made); an empty one reads unlabelled documents only', async () => {
    const before = (await s.database.db.select({ n: count() }).from(tokens).get())!.n;
    for (const labels of ['finance, board', 'board', ['eng', 'board', 'x1', 'x2', 'x3']]) {
      const lacking = await create({ name: 'board too', labels });
      assert.equal(lacking.status, 400, JSON.stringify(labels));
      assert.match(lacking.body.message!, /the owner does not hold "board"/);
    }
    assert.match((await create({ name: 'many', labels: ['x1', 'x2', 'x3', 'x4', 'x5'] })).body.message!, /"x1", "x2", "x3" and 2 more/);
    assert.equal((await s.database.db.select({ n: count() }).from(tokens).get())!.n, before, 'nothing was made');
    const nothing = await create({ name: 'nothing', labels: [] });
    assert.deepEqual(nothing.body.labels, []);
    await sees(nothing.body.token, ['open']);
  });

  test("the page's form: access=labels with checked boxes, none checked, or access=all", async () => {
    const two = await create(
      new URLSearchParams([
        ['name', 'form two'],
        ['access', 'labels'],
        ['labels', 'eng'],
        ['labels', 'finance'],
      ]),
    );
    assert.deepEqual(two.body.labels, ['eng', 'finance']);
    const none = await create(
      new URLSearchParams([
        ['name', 'form none'],
        ['access', 'labels'],
      ]),
    );
    assert.deepEqual(none.body.labels, []);
    const all = await create(
      new URLSearchParams([
        ['name', 'form all'],
        ['access', 'all'],
      ]),
    );
    assert.equal(all.body.labels, null);
    // Boxes checked with "everything" chosen: refused, never a wider token than the person meant.
    const mixed = await create(
      new URLSearchParams([
        ['name', 'form mixed'],
        ['access', 'all'],
        ['labels', 'eng'],
      ]),
    );
    assert.equal(mixed.status, 400);
    assert.match(mixed.body.message!, /choose "Only documents with these labels"/);
    const page = await (await b.request('/', { headers: { accept: 'text/html' } })).text();
    assert.match(page, /<tr data-token-id="[^"]+"><td>form two<\/td><td class="token-access">only eng, finance<\/td>/);
    assert.match(page, /<td>form none<\/td><td class="token-access">unlabelled documents only<\/td>/);
    assert.match(page, /<td>form all<\/td><td class="token-access">everything you can see<\/td>/);
    assert.match(page, /<input type="checkbox" name="labels" value="finance"\/>/);
  });

  test('never more than the owner: labels the owner gains later reach a restricted token only within its restriction', async () => {
    const fin = await create({ name: 'grows', labels: ['finance'] });
    await s.database.write((tx) => updateUser(tx, 'fran', changeRecord({ labels: 'eng, finance, board' })));
    await sees(fin.body.token, ['open', 'fin']);
    const finBoard = await create({ name: 'grows within', labels: ['finance', 'board'] });
    await sees(finBoard.body.token, ['open', 'fin', 'board']);
    await s.database.write((tx) => updateUser(tx, 'fran', changeRecord({ labels: 'eng' })));
    await sees(finBoard.body.token, ['open']);
    await s.database.write((tx) => updateUser(tx, 'fran', changeRecord({ labels: 'eng, finance' })));
  });

  test('bad input: a bad label is 400 naming it, and nothing is created', async () => {
    const before = (await s.database.db.select({ n: count() }).from(tokens).get())!.n;
    for (const labels of ['Finance', 'fin ance!', ['ok', 'Not'], 5]) {
      const r = await create({ name: 'bad', labels });
      assert.equal(r.status, 400, JSON.stringify(labels));
      assert.match(r.body.message!, /labels: /);
    }
    const r = await create({ name: 'bad', labels: 'Finance' });
    assert.match(r.body.message!, /"Finance"/);
    assert.equal(
      (
        await create(
          new URLSearchParams([
            ['name', 'x'],
            ['access', 'some'],
          ]),
        )
      ).status,
      400,
    );
    assert.equal((await s.database.db.select({ n: count() }).from(tokens).get())!.n, before);
  });

  test("changing a restriction: the owner's browser only; someone else's token is 404; a token cannot widen itself", async () => {
    const t = await create({ name: 'changeable', labels: ['finance'] });
    const patch = (who: Browser | string, id: string, labels: unknown) =>
      typeof who === 'string'
        ? fetch(`${s.url}/auth/tokens/${id}`, {
            method: 'PATCH',
            headers: { ...bearer(who), 'content-type': 'application/json' },
            body: JSON.stringify({ labels }),
          })
        : who.request(`/auth/tokens/${id}`, { method: 'PATCH', json: { labels } });
    assert.equal((await patch(t.body.token, t.body.id, null)).status, 403, 'not with a bearer token, not even its own');
    await sees(t.body.token, ['open', 'fin']);
    const other = new Browser(s.url);
    assert.equal((await other.login('other', 'other password 1')).status, 303);
    assert.equal((await patch(other, t.body.id, null)).status, 404);
    assert.equal((await patch(b, 'tok_unknown', null)).status, 404);
    assert.equal((await patch(b, t.body.id, 'Bad')).status, 400);
    await sees(t.body.token, ['open', 'fin']);
    const changed = await patch(b, t.body.id, ['eng']);
    assert.equal(changed.status, 200);
    assert.deepEqual(((await changed.json()) as { labels: string[] }).labels, ['eng']);
    await sees(t.body.token, ['open', 'eng']);
    assert.equal((await patch(b, t.body.id, null)).status, 200);
    await sees(t.body.token, ['open', 'eng', 'fin', 'both']);
  });

  test('svc token create --labels', async () => {
    const r = await s.ws.svc(['token', 'create', 'fran', '--name', 'cli scoped', '--labels', 'finance']);
    assert.equal(r.code, 0, r.stderr);
    await sees(r.stdout.trim(), ['open', 'fin']);
    const bad = await s.ws.svc(['token', 'create', 'fran', '--name', 'cli bad', '--labels', 'Finance']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /labels: invalid label "Finance"/);
  });
});
