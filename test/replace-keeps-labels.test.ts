// Replacing a document without stating its labels keeps them (CLI put and import, admin API, admin page upload);
// only an explicit empty value makes it unrestricted.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { items } from '../src/db/schema.ts';

describe('replacing an item keeps its labels unless told otherwise', () => {
  let s: TestServer;
  let admin: Browser;
  let adminToken: string;
  const labelsOf = async (id: string) =>
    await s.database.db.select({ labels: items.labels, text: items.text }).from(items).where(eq(items.id, id)).get();
  const put = (id: string, extra: string[], text: string) => s.ws.svc(['item', 'put', id, '--title', 'T', ...extra], { stdin: text });
  const upload = (fields: Record<string, string>, file?: { name: string; text: string }) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.set(k, v);
    if (file) form.set('file', new File([file.text], file.name, { type: 'text/markdown' }));
    return admin.request('/admin/items', { method: 'POST', body: form, headers: { accept: 'text/html' } });
  };
  /** The confirmation page's own form, sent back as a browser would send it. */
  const confirm = async (page: string) => {
    const form = new FormData();
    for (const m of page.matchAll(/<input type="hidden" name="([a-z_0-9]+)" value="([^"]*)"\/?>/g)) {
      form.set(
        m[1]!,
        m[2]!
          .replace(/&quot;/g, '"')
          .replace(/&#39;/g, "'")
          .replace(/&lt;/g, '<')
          .replace(/&gt;/g, '>')
          .replace(/&amp;/g, '&'),
      );
    }
    return admin.request('/admin/items', { method: 'POST', body: form, headers: { accept: 'text/html' } });
  };

  before(async () => {
    s = await startTestServer();
    const boss = await s.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', admin: true });
    admin = new Browser(s.url);
    assert.equal((await admin.login('boss', 'boss password 1')).status, 303);
    adminToken = await s.tokenFor(boss, undefined, 'admin');
  });
  after(() => s.stop());

  test("svc item put: without --labels the labels stay; --labels '' removes them", async () => {
    assert.equal((await put('hr/salaries', ['--labels', 'board'], 'v1')).code, 0);
    const replaced = await put('hr/salaries', [], 'v2');
    assert.equal(replaced.code, 0, replaced.stderr);
    assert.match(replaced.stdout, /replaced item hr\/salaries \(labels: board\)/);
    assert.deepEqual(await labelsOf('hr/salaries'), { labels: 'board', text: 'v2' });
    const listed = JSON.parse((await s.ws.svc(['item', 'list', '--json'])).stdout) as { id: string; labels: string[] }[];
    assert.deepEqual(listed.find((i) => i.id === 'hr/salaries')?.labels, ['board']);
    assert.equal((await put('hr/salaries', ['--labels', ''], 'v3')).code, 0);
    assert.deepEqual(await labelsOf('hr/salaries'), { labels: '', text: 'v3' });
    assert.equal((await put('hr/new', [], 'new')).code, 0);
    assert.equal((await labelsOf('hr/new'))?.labels, '', 'a new item without labels is unrestricted, as before');
  });

  test('svc item import: a file without a labels: line keeps them; "labels:" with nothing after it removes them', async () => {
    assert.equal((await put('docs/keep', ['--labels', 'board,finance'], 'v1')).code, 0);
    assert.equal((await put('docs/clear', ['--labels', 'board'], 'v1')).code, 0);
    const dir = join(s.ws.dir, 'import');
    mkdirSync(join(dir, 'docs'), { recursive: true });
    writeFileSync(join(dir, 'docs/keep.md'), '---\ntitle: Kept\n---\nv2');
    writeFileSync(join(dir, 'docs/clear.md'), '---\ntitle: Cleared\nlabels:\n---\nv2');
    const r = await s.ws.svc(['item', 'import', dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(await labelsOf('docs/keep'), { labels: 'board,finance', text: 'v2' });
    assert.deepEqual(await labelsOf('docs/clear'), { labels: '', text: 'v2' });
  });

  test('admin API PUT: without "labels" they stay; "labels": [] or "" removes them', async () => {
    const send = (id: string, body: unknown) =>
      fetch(`${s.url}/admin/api/items/${id}`, {
        method: 'PUT',
        headers: { ...bearer(adminToken), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    assert.equal((await send('api/a', { title: 'A', text: 'v1', labels: ['board'] })).status, 201);
    const kept = await send('api/a', { title: 'A', text: 'v2' });
    assert.equal(kept.status, 200);
    assert.deepEqual(((await kept.json()) as { labels: string[] }).labels, ['board']);
    assert.deepEqual(await labelsOf('api/a'), { labels: 'board', text: 'v2' });
    assert.equal((await send('api/a', { title: 'A', text: 'v3', labels: [] })).status, 200);
    assert.deepEqual(await labelsOf('api/a'), { labels: '', text: 'v3' });
    assert.equal((await send('api/b', { title: 'B', text: 'v1', labels: 'board' })).status, 201);
    assert.equal((await send('api/b', { title: 'B', text: 'v2', labels: '' })).status, 200);
    assert.equal((await labelsOf('api/b'))?.labels, '');
    assert.equal((await send('api/b', { title: 'B', text: 'v3', labels: null })).status, 400, 'null is no way to say it');
  });

  test('admin page upload: a replacement is confirmed first, the page says whether labels are kept, changed or removed', async () => {
    assert.equal((await put('minutes', ['--labels', 'board'], 'v1')).code, 0);
    const asked = await upload({}, { name: 'minutes.md', text: '---\ntitle: Minutes\n---\nline one\nline two\n' });
    assert.equal(asked.status, 200);
    const page = await asked.text();
    assert.match(page, /Replace minutes\?/);
    assert.match(page, /data-outcome="keep"/);
    assert.match(page, /keeps its labels<\/strong>: <code class="label">board<\/code>/);
    assert.deepEqual(await labelsOf('minutes'), { labels: 'board', text: 'v1' }, 'nothing changes before the confirmation');
    const done = await confirm(page);
    assert.equal(done.status, 303);
    assert.deepEqual(await labelsOf('minutes'), { labels: 'board', text: 'line one\nline two\n' }, 'the text exactly, line ends too');

    const clearing = await (await upload({}, { name: 'minutes.md', text: '---\ntitle: Minutes\nlabels:\n---\nv3' })).text();
    assert.match(clearing, /data-outcome="clear"/);
    assert.match(clearing, /Every signed-in user will be able to read it/);
    assert.equal((await labelsOf('minutes'))?.labels, 'board');
    assert.equal((await confirm(clearing)).status, 303);
    assert.deepEqual(await labelsOf('minutes'), { labels: '', text: 'v3' });

    const changing = await (await upload({ id: 'minutes', title: 'Minutes', labels: 'finance', text: 'v4' })).text();
    assert.match(changing, /data-outcome="change"/);
    assert.equal((await confirm(changing)).status, 303);
    assert.deepEqual(await labelsOf('minutes'), { labels: 'finance', text: 'v4' });

    const typed = await (await upload({ id: 'minutes', title: 'Minutes', text: 'v5' })).text();
    assert.match(typed, /data-outcome="keep"/);
    assert.equal((await confirm(typed)).status, 303);
    assert.deepEqual(await labelsOf('minutes'), { labels: 'finance', text: 'v5' });
  });
});
