// One signed-in user cannot fill the disk or make a page of svc huge: a label restriction names at most 64 labels the
// owner holds, a user holds at most 200 active tokens, audit entries and every list that grows are bounded. These
// rules live in the store, so this suite also runs on a real sqld (store-on-sqld.test.ts).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { and, count, eq, isNull, isNotNull, sql } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { DEFAULT_AUTH } from './helpers/workspace.ts';
import { REDIRECT } from './helpers/oauth-client.ts';
import { audit, oauthGrants, tokens } from '../src/db/schema.ts';
import { createToken, revokeToken, ACTIVE_TOKENS_MAX, INACTIVE_TOKENS_KEPT } from '../src/store/tokens.ts';
import { recordAudit } from '../src/store/audit.ts';
import { putItem } from '../src/store/items.ts';
import type { User } from '../src/store/users.ts';
import { heldConsent } from './helpers/oauth-client.ts';
import { itemRecord, tokenRecord } from './helpers/records.ts';

const KiB = 1024;
/** No single answer of svc may be larger than this, however much one user made. */
const PAGE_BOUND = 400 * KiB;
const labelList = (n: number, prefix = 'l') => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(5, '0')}`);
/** Ann's 70 labels, six of them 64 characters long. */
const annLabels = [...labelList(6, 'x'.repeat(58)), ...labelList(64)];

describe('one signed-in user cannot fill the disk or make a page huge', () => {
  let s: TestServer;
  let mallory: Browser;
  let malloryUser: User;
  let ann: Browser;
  let admin: string;
  const mint = (b: Browser, body: Record<string, unknown>) => b.request('/auth/tokens', { json: { name: 'agent', ...body } });
  const countOf = async (table: typeof tokens | typeof audit, where?: ReturnType<typeof eq>) =>
    (await s.database.db.select({ n: count() }).from(table).where(where).get())!.n;
  const pageCount = async () => (await s.database.db.get<{ page_count: number }>(sql`PRAGMA page_count`))!.page_count;

  before(async () => {
    s = await startTestServer({ auth: `${DEFAULT_AUTH}oauth\n    enabled true\n` });
    malloryUser = await s.addUser({ uid: 'mallory', email: 'mallory@example.com', password: 'mallory password 1' });
    // Ann holds 70 labels, 64-character ones among them: the largest restriction she may set is 64 of them.
    await s.addUser({
      uid: 'ann',
      email: 'ann@example.com',
      password: 'ann password 1',
      labels: annLabels,
    });
    const root = await s.addUser({ uid: 'root', email: 'root@example.com', admin: true, password: 'root password 1' });
    admin = await s.tokenFor(root, undefined, 'admin');
    mallory = new Browser(s.url);
    assert.equal((await mallory.login('mallory', 'mallory password 1')).status, 303);
    ann = new Browser(s.url);
    assert.equal((await ann.login('ann', 'ann password 1')).status, 303);
  });
  after(() => s.stop());

  test('a restriction naming 15,000 labels she does not hold is refused, fifty times over, and the database does not grow', async () => {
    const labels = labelList(15_000);
    const before = { tokens: await countOf(tokens), audit: await countOf(audit), pages: await pageCount() };
    const answers = await Promise.all(Array.from({ length: 50 }, () => mint(mallory, { labels })));
    for (const res of answers) {
      assert.equal(res.status, 400);
      const body = (await res.json()) as { error: string; message: string };
      assert.equal(body.error, 'bad_request');
      assert.match(body.message, /at most 64 labels \(this one names 15000\)/);
      assert.ok(body.message.length < 200, 'the refusal does not echo the list');
    }
    assert.deepEqual({ tokens: await countOf(tokens), audit: await countOf(audit), pages: await pageCount() }, before);
    // A short one she does not hold is refused too: a restriction only narrows its owner's access.
    const lacking = await mint(mallory, { labels: ['finance'] });
    assert.equal(lacking.status, 400);
    assert.match(((await lacking.json()) as { message: string }).message, /the owner does not hold "finance"/);
    assert.equal(await countOf(tokens, eq(tokens.userId, malloryUser.id)), 0);
  });

  test('64 labels she holds are a restriction; 65 are not, nor on the CLI, nor when changed, nor at consent', async () => {
    const held = annLabels;
    const ok = await mint(ann, { labels: held.slice(0, 64) });
    assert.equal(ok.status, 201);
    const made = (await ok.json()) as { id: string; labels: string[] };
    assert.equal(made.labels.length, 64);
    const tooMany = await mint(ann, { labels: held.slice(0, 65) });
    assert.equal(tooMany.status, 400);
    assert.match(((await tooMany.json()) as { message: string }).message, /at most 64 labels/);
    const cli = await s.ws.svc(['token', 'create', 'ann', '--name', 'cli', '--labels', held.slice(0, 65).join(',')]);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /at most 64 labels/);
    const cliLacking = await s.ws.svc(['token', 'create', 'mallory', '--name', 'cli', '--labels', 'finance']);
    assert.equal(cliLacking.code, 1);
    assert.match(cliLacking.stderr, /the owner does not hold "finance"/);

    // Changing a restriction obeys the same rule, and a refused change leaves it as it was.
    for (const labels of [held.slice(0, 65), ['finance'], labelList(15_000)]) {
      const res = await ann.request(`/auth/tokens/${made.id}`, { method: 'PATCH', json: { labels } });
      assert.equal(res.status, 400);
    }
    const row = await s.database.db.select({ labels: tokens.labels }).from(tokens).where(eq(tokens.id, made.id)).get();
    assert.equal(row?.labels?.split(',').length, 64);

    // The audit row of a token keeps the restriction's size and digest, never the list.
    const rows = await s.database.db.select().from(audit).where(eq(audit.target, made.id)).all();
    assert.equal(rows.length, 1);
    const detail = JSON.parse(rows[0]!.detail!) as { restriction: { size: number; sha256: string }; labels?: unknown };
    assert.equal(detail.restriction.size, 64);
    assert.equal(
      detail.restriction.sha256,
      createHash('sha256')
        .update([...held.slice(0, 64)].sort().join(','))
        .digest('hex'),
    );
    assert.equal(detail.labels, undefined);
    assert.ok(rows[0]!.detail!.length < 300, rows[0]!.detail!);
  });

  test('a consent that asks for labels the person lacks, or more than 64, makes no grant', async () => {
    const register = await fetch(`${s.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'greedy', redirect_uris: [REDIRECT] }),
    });
    const clientId = ((await register.json()) as { client_id: string }).client_id;
    // Mallory lacks finance; Ann holds 70 labels, but a restriction names at most 64.
    for (const [who, labels] of [
      [mallory, ['finance']],
      [ann, annLabels.slice(0, 65)],
    ] as const) {
      const consent = await heldConsent(s.url, who, clientId);
      const fields = new URLSearchParams({ request: consent, decision: 'approve', access: 'labels' });
      for (const l of labels) fields.append('labels', l);
      const res = await who.request('/oauth/authorize', {
        method: 'POST',
        body: fields.toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      });
      assert.equal(res.status, 400);
      assert.match(await res.text(), /at most 64 labels|the owner does not hold/);
    }
    assert.equal((await s.database.db.select({ n: count() }).from(oauthGrants).where(eq(oauthGrants.clientId, clientId)).get())!.n, 0);
  });

  test('at most 200 active tokens; parallel mints cannot pass the cap together; expired and revoked ones make room', async () => {
    const owner = await s.addUser({ uid: 'hoarder', email: 'hoarder@example.com', password: 'hoarder password 1' });
    const b = new Browser(s.url);
    assert.equal((await b.login('hoarder', 'hoarder password 1')).status, 303);
    const made: string[] = [];
    for (let i = 0; i < ACTIVE_TOKENS_MAX - 10; i++)
      made.push((await s.database.write(async (tx) => createToken(tx, owner.id, tokenRecord(`t${i}`, undefined, null, undefined)))).id);
    // Twenty at once for the last ten places: exactly ten are made.
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => mint(b, { name: `race ${i}` })));
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [...Array(10).fill(201), ...Array(10).fill(409)]);
    const refused = (await answers.find((a) => a.status === 409)!.json()) as { error: string; message: string };
    assert.equal(refused.error, 'conflict');
    assert.match(refused.message, /200 active tokens.*revoke some/);
    const active = and(eq(tokens.userId, owner.id), isNull(tokens.revokedAt));
    assert.equal(await countOf(tokens, active), ACTIVE_TOKENS_MAX);
    const cli = await s.ws.svc(['token', 'create', 'hoarder', '--name', 'one more']);
    assert.equal(cli.code, 1, 'the CLI is held to the same cap');
    assert.match(cli.stderr, /200 active tokens/);

    // A revoked token no longer counts, nor does an expired one.
    assert.equal((await b.request(`/auth/tokens/${made[0]}/revoke`, { method: 'POST' })).status, 200);
    assert.equal((await mint(b, { name: 'after revoking', ttl: '1s' })).status, 201);
    assert.equal((await mint(b, { name: 'over again' })).status, 409);
    await new Promise((r) => setTimeout(r, 1100));
    assert.equal((await mint(b, { name: 'after expiry' })).status, 201);
  });

  test('revoked and expired tokens beyond the newest fifty are forgotten at the next mint', async () => {
    const owner = await s.addUser({ uid: 'churner', email: 'churner@example.com' });
    for (let i = 0; i < 120; i++) {
      const t = await s.database.write(async (tx) => createToken(tx, owner.id, tokenRecord(`c${i}`, undefined, null, undefined)));
      await s.database.write((tx) => revokeToken(tx, owner.id, t.id));
    }
    await s.database.write(async (tx) => createToken(tx, owner.id, tokenRecord('kept', undefined, null, undefined)));
    const mine = eq(tokens.userId, owner.id);
    assert.equal(await countOf(tokens, and(mine, isNotNull(tokens.revokedAt))), INACTIVE_TOKENS_KEPT);
    assert.equal(await countOf(tokens, and(mine, isNull(tokens.revokedAt))), 1);
    const names = (await s.database.db.select({ name: tokens.name }).from(tokens).where(mine).all()).map((r) => r.name);
    assert.ok(names.includes('c119') && !names.includes('c0'), 'the newest revoked ones stay');
  });

  test('with 200 tokens of 64 long labels and long names, every page and list stays small, and paging reaches them all', async () => {
    const wide = labelList(64, 'y'.repeat(58));
    const owner = await s.addUser({ uid: 'wide', email: 'wide@example.com', password: 'wide password 1', labels: wide });
    const token = await s.tokenFor(owner, undefined, 'api');
    await s.database.write(async (tx) => {
      for (let i = 1; i < ACTIVE_TOKENS_MAX; i++)
        await createToken(tx, owner.id, tokenRecord(`${'n'.repeat(96)}${String(i).padStart(4, '0')}`, undefined, wide));
    });
    await assert.rejects(s.tokenFor(owner), /200 active tokens/, 'the 201st token is refused');
    await s.database.write((tx) => putItem(tx, 'wide/doc', itemRecord({ title: 'wide', text: 'x', labels: wide[0]! })));
    // Audit entries as large as one may be, more than any page of the trail can hold.
    await s.database.write(async (tx) => {
      for (let i = 0; i < 300; i++)
        await recordAudit(tx, { actor: 'root', via: 'cli', action: 'user.update', target: 'wide', detail: { labels: wide.slice(0, 60) } });
    });
    const b = new Browser(s.url);
    assert.equal((await b.login('wide', 'wide password 1')).status, 303);

    const size = async (res: Response) => {
      assert.equal(res.status, 200);
      return Buffer.byteLength(await res.text());
    };
    const home = await size(await b.request('/', { headers: { accept: 'text/html' } }));
    assert.ok(home < PAGE_BOUND, `the token page is ${home} bytes`);
    // The JSON list, a page at a time, following the Link header to the end.
    let next: string | null = `${s.url}/auth/tokens`;
    const seen = new Set<string>();
    let pages = 0;
    while (next) {
      const res: Response = await fetch(next, { headers: bearer(token) });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      assert.ok(Buffer.byteLength(text) < PAGE_BOUND, `a page of /auth/tokens is ${Buffer.byteLength(text)} bytes`);
      for (const t of JSON.parse(text) as { id: string }[]) seen.add(t.id);
      next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
      pages++;
    }
    assert.equal(seen.size, ACTIVE_TOKENS_MAX, 'every token is listed once');
    assert.ok(pages >= 4, `${pages} pages`);
    const older = await b.request('/?tokens_page=2', { headers: { accept: 'text/html' } });
    assert.match(await older.text(), /Older tokens/);

    // The administrators' pages: the user list with recent activity, the audit trail, the readers of a document.
    const rootBrowser = new Browser(s.url);
    assert.equal((await rootBrowser.login('root', 'root password 1')).status, 303);
    for (const path of ['/admin/users', '/admin/audit', '/admin/items/view/wide/doc', '/admin/users/wide']) {
      const bytes = await size(await rootBrowser.request(path, { headers: { accept: 'text/html' } }));
      assert.ok(bytes < PAGE_BOUND, `${path} is ${bytes} bytes`);
    }
    const readers = await (await rootBrowser.request('/admin/items/view/wide/doc', { headers: { accept: 'text/html' } })).text();
    assert.match(readers, /<p>199 token\(s\):<\/p>/);
    assert.equal([...readers.matchAll(/ of wide </g)].length, 50, 'a page of the restricted tokens that can read it');
    const audited = await fetch(`${s.url}/admin/api/audit?limit=1000`, { headers: bearer(admin) });
    const entries = (await audited.clone().json()) as { id: number }[];
    const auditBytes = Buffer.byteLength(await audited.text());
    assert.ok(auditBytes < PAGE_BOUND, `the audit API answers ${auditBytes} bytes`);
    assert.ok(entries.length < 300, `${entries.length} entries fit`);
    const below = /<([^>]+)>; rel="next"/.exec(audited.headers.get('link') ?? '')?.[1];
    assert.equal(below, `${s.url}/admin/api/audit?limit=1000&before=${entries.at(-1)!.id}`);
    const rest = (await (await fetch(below!, { headers: bearer(admin) })).json()) as { id: number }[];
    assert.ok(rest.length > 0 && rest[0]!.id < entries.at(-1)!.id, 'the next page goes on below');
  });

  test('an anonymous registration naming seven 2,000-character redirect URIs is audited by its size and digest', async () => {
    // Seven, as ten would pass the registration's body limit (16 KiB).
    const uris = Array.from({ length: 7 }, (_, i) => `https://app${i}.example/${'p'.repeat(1970)}`);
    const res = await fetch(`${s.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'long', redirect_uris: uris }),
    });
    assert.equal(res.status, 201);
    const id = ((await res.json()) as { client_id: string }).client_id;
    const row = await s.database.db.select({ detail: audit.detail }).from(audit).where(eq(audit.target, id)).get();
    assert.ok(row!.detail!.length < 200, row!.detail!);
    assert.deepEqual(Object.keys(JSON.parse(row!.detail!) as object).sort(), ['bytes', 'sha256', 'truncated']);
  });
});
