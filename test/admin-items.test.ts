// /admin/items and "who sees what": pages over HTTP, uploads read by the strict parser, every change audited.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eq } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { audit, items } from '../src/db/schema.ts';
import { putItem } from '../src/store/items.ts';
import { createToken, revokeToken } from '../src/store/tokens.ts';
import { itemRecord, tokenRecord } from './helpers/records.ts';

function upload(b: Browser, fields: Record<string, string>, file?: { name: string; text: string }, origin?: string): Promise<Response> {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.set(k, v);
  if (file) form.set('file', new File([file.text], file.name, { type: 'text/markdown' }));
  return b.request('/admin/items', { method: 'POST', body: form, headers: { accept: 'text/html' }, ...(origin ? { origin } : {}) });
}

describe('/admin/items', () => {
  let s: TestServer;
  let admin: Browser;
  const html = async (path: string) => {
    const res = await admin.request(path, { headers: { accept: 'text/html' } });
    assert.equal(res.status, 200, path);
    return res.text();
  };
  const stored = (id: string) => s.database.db.select().from(items).where(eq(items.id, id)).get();
  const actions = async () =>
    (await s.database.db.select({ action: audit.action, target: audit.target }).from(audit).all()).filter((a) =>
      a.action.startsWith('item.'),
    );

  before(async () => {
    s = await startTestServer();
    await s.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', admin: true });
    await s.addUser({ uid: 'erin', email: 'erin@example.com', password: 'erin password 1', labels: 'finance' });
    await s.addUser({ uid: 'finn', email: 'finn@example.com', labels: 'finance, board' });
    admin = new Browser(s.url);
    assert.equal((await admin.login('boss', 'boss password 1')).status, 303);
  });
  after(() => s.stop());

  test('only admins, and only in a browser: anonymous 303, non-admin 403, a bearer token 403', async () => {
    assert.equal((await new Browser(s.url).request('/admin/items')).status, 303);
    const erin = new Browser(s.url);
    await erin.login('erin', 'erin password 1');
    assert.equal((await erin.request('/admin/items')).status, 403);
    assert.equal((await upload(erin, { id: 'x', title: 'x', text: 'x' })).status, 403);
    const bossToken = await s.tokenFor(
      (await s.database.db.query.users.findFirst({ where: (u, { eq: e }) => e(u.uid, 'boss') }))! as never,
    );
    assert.equal((await fetch(`${s.url}/admin/items`, { headers: bearer(bossToken) })).status, 403);
    assert.equal(await stored('x'), undefined);
  });

  test('an uploaded .md with front matter: labels from the file, nobody can read it yet, and it is audited', async () => {
    const res = await upload(
      admin,
      {},
      { name: 'minutes.md', text: '---\ntitle: Board minutes\nlabels: board, oncall\n---\nminutes of the meeting' },
    );
    assert.equal(res.status, 303);
    assert.equal(res.headers.get('location'), '/admin/items/view/minutes?done=saved');
    const row = await stored('minutes');
    assert.deepEqual([row?.title, row?.labels, row?.text], ['Board minutes', 'board,oncall', 'minutes of the meeting']);
    const page = await html('/admin/items/view/minutes');
    assert.match(page, /Nobody can read this document yet/);
    assert.deepEqual((await actions()).at(-1), { action: 'item.create', target: 'minutes' });
  });

  test('uploads are read strictly: a bad front matter is refused with its line, conflicting labels too; nothing is stored', async () => {
    const before = (await actions()).length;
    const bad = await upload(admin, { id: 'leak' }, { name: 'leak.md', text: '---\nLabels: board\n---\nsecret' });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /leak\.md:2: unknown key &quot;Labels&quot;/);
    const list = await upload(admin, { id: 'leak' }, { name: 'leak.md', text: '---\nlabels:\n  - board\n---\nsecret' });
    assert.equal(list.status, 400);
    const conflict = await upload(admin, { id: 'leak', labels: 'finance' }, { name: 'leak.md', text: '---\nlabels: board\n---\nsecret' });
    assert.equal(conflict.status, 400);
    assert.match(await conflict.text(), /give them in one place/);
    assert.equal(await stored('leak'), undefined);
    assert.equal((await actions()).length, before);
    const same = await upload(
      admin,
      { id: 'agreed', labels: 'oncall,  board' },
      { name: 'x.md', text: '---\nlabels: board, oncall\n---\ntext' },
    );
    assert.equal(same.status, 303, 'the same labels in both places are fine');
  });

  test('typed text, a cross-site form and an oversized upload', async () => {
    assert.equal((await upload(admin, { id: 'notes/typed', title: 'Typed', labels: 'finance', text: 'typed text' })).status, 303);
    assert.equal((await stored('notes/typed'))?.labels, 'finance');
    assert.equal((await upload(admin, { id: 'evil', title: 'Evil', text: 'x' }, undefined, 'https://evil.example')).status, 403);
    assert.equal(await stored('evil'), undefined);
    const big = await upload(admin, { id: 'big' }, { name: 'big.md', text: 'x'.repeat(3 * 1024 * 1024) });
    assert.equal(big.status, 413);
    assert.equal(await stored('big'), undefined);
  });

  test('the list: search, label filter, and how many users can read each', async () => {
    await s.database.write((tx) => putItem(tx, 'open/welcome', itemRecord({ title: 'Welcome', text: 'hi', labels: '' })));
    const all = await html('/admin/items');
    const readers = (id: string) =>
      new RegExp(`<tr data-item="${id.replace('/', '\\/')}">.*?<td class="readers">([^<]*|<span class="warn">nobody</span>)</td>`).exec(
        all,
      )?.[1];
    assert.equal(readers('open/welcome'), '3 user(s)');
    assert.equal(readers('notes/typed'), '2 user(s)');
    assert.equal(readers('minutes'), '<span class="warn">nobody</span>');
    const filtered = await html('/admin/items?label=finance');
    assert.match(filtered, /data-item="notes\/typed"/);
    assert.doesNotMatch(filtered, /data-item="open\/welcome"/);
    const searched = await html('/admin/items?q=TYPED');
    assert.match(searched, /1 document\(s\)/);
  });

  test('who can see it: users, and apart, active label-restricted tokens; a change of labels shows at once', async () => {
    const finn = (await s.database.db.query.users.findFirst({ where: (u, { eq: e }) => e(u.uid, 'finn') }))!;
    await s.database.write((tx) => createToken(tx, finn.id, tokenRecord('board agent', undefined, ['board'])));
    await s.database.write((tx) => createToken(tx, finn.id, tokenRecord('finance agent', undefined, ['finance'])));
    const revoked = await s.database.write((tx) => createToken(tx, finn.id, tokenRecord('old agent', undefined, ['board'])));
    await s.database.write((tx) => revokeToken(tx, finn.id, revoked.id));

    const change = await admin.request('/admin/items/labels/minutes', { form: { labels: 'board' } });
    assert.equal(change.status, 303);
    const page = await html('/admin/items/view/minutes');
    assert.match(page, /<li data-uid="finn">/);
    assert.doesNotMatch(page, /data-uid="erin"|data-uid="boss"/);
    assert.match(page, /“board agent” of finn/);
    assert.doesNotMatch(page, /finance agent|old agent/);
    assert.deepEqual((await actions()).at(-1), { action: 'item.replace', target: 'minutes' });
  });

  test('what can this user see: a count, and their documents searchable, from the same queries as /mcp', async () => {
    const page = await html('/admin/users/erin');
    assert.match(page, /<p>2 document\(s\), through a session/);
    assert.match(page, /data-item="notes\/typed"/);
    assert.doesNotMatch(page, /data-item="minutes"/);
    const searched = await html('/admin/users/erin?see=typed');
    assert.match(searched, /data-item="notes\/typed"/);
    assert.doesNotMatch(searched, /data-item="open\/welcome"/);
  });

  test('remove asks first, then removes and audits', async () => {
    assert.match(await html('/admin/items/remove/notes/typed'), /Remove notes\/typed\?/);
    assert.ok(await stored('notes/typed'));
    assert.equal((await admin.request('/admin/items/remove/notes/typed', { method: 'POST', form: {} })).status, 303);
    assert.equal(await stored('notes/typed'), undefined);
    assert.deepEqual((await actions()).at(-1), { action: 'item.remove', target: 'notes/typed' });
  });
});
