// Accounts tried the way an attacker would: uids that differ only by letter case, and sessions that outlive a
// password change.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { count, eq } from 'drizzle-orm';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { Browser, bearer } from './helpers/http.ts';
import { sessions } from '../src/db/schema.ts';
import { openDatabase } from '../src/db/open.ts';
import { createUser, findUser } from '../src/store/users.ts';
import { ROOT } from './helpers/workspace.ts';
import { userRecord } from './helpers/records.ts';

const json = (body: unknown) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('uids are unique and reserved regardless of letter case', () => {
  let s: TestServer;
  let admin: string;
  before(async () => {
    s = await startTestServer();
    admin = await s.tokenFor(await s.addUser({ uid: 'root', email: 'root@example.com', admin: true }), undefined, 'admin');
    await s.addUser({ uid: 'alice', email: 'alice@example.com', password: 'alice password 1' });
  });
  after(() => s.stop());
  const create = (uid: string) =>
    fetch(`${s.url}/admin/api/users`, {
      ...json({ uid, email: `${uid}@example.com` }),
      headers: { ...bearer(admin), 'content-type': 'application/json' },
    });

  test('Alice cannot join alice, and a removed tp7 cannot come back as TP7', async () => {
    assert.equal((await create('Alice')).status, 409);
    assert.equal((await create('ALICE')).status, 409);
    assert.equal((await create('tp7')).status, 201);
    assert.equal((await fetch(`${s.url}/admin/api/users/tp7`, { method: 'DELETE', headers: bearer(admin) })).status, 204);
    assert.equal((await create('TP7')).status, 409);
    assert.equal((await create('Tp7')).status, 409);
    const cli = await s.ws.svc(['user', 'add', 'aLiCe', '--email', 'x@example.com']);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /taken or was used before/);
    const uids = ((await (await fetch(`${s.url}/admin/api/users`, { headers: bearer(admin) })).json()) as { uid: string }[]).map(
      (u) => u.uid,
    );
    assert.deepEqual(uids.sort(), ['alice', 'root']);
  });

  test('the spelling is kept, and a user is found in any case (sign-in, API)', async () => {
    assert.equal((await create('MixedCase')).status, 201);
    assert.equal(
      ((await (await fetch(`${s.url}/admin/api/users/mixedcase`, { headers: bearer(admin) })).json()) as { uid: string }).uid,
      'MixedCase',
    );
    assert.equal((await new Browser(s.url).login('ALICE', 'alice password 1')).status, 303);
  });

  test('the migration keeps existing case-duplicates as they are, each found by its exact spelling, and allows no new one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-case-'));
    const path = join(dir, 'old.db');
    try {
      // A database as svc left it before migration 0004, with two users differing only by case.
      const { default: Sqlite } = await import('better-sqlite3');
      const old = new Sqlite(path);
      old.exec('CREATE TABLE __drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)');
      const journal = JSON.parse(readFileSync(join(ROOT, 'drizzle/meta/_journal.json'), 'utf8')) as {
        entries: { tag: string; when: number }[];
      };
      for (const { tag, when } of journal.entries.filter((e) => e.tag < '0004')) {
        const text = readFileSync(join(ROOT, 'drizzle', `${tag}.sql`), 'utf8');
        for (const statement of text.split('--> statement-breakpoint')) old.exec(statement);
        old
          .prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)')
          .run(createHash('sha256').update(text).digest('hex'), when);
      }
      old.exec(
        "INSERT INTO users (uid, email, created_at, updated_at) VALUES ('Bob', 'b1@example.com', 1, 1), ('bob', 'b2@example.com', 1, 1)",
      );
      old.close();
      const database = await openDatabase(`file:${path}`, null);
      try {
        assert.equal((await database.migrate())[0], '0004_uid_case_and_server_keys', 'the migrations from 0004 on are applied');
        assert.equal((await findUser(database.db, 'Bob'))?.email, 'b1@example.com');
        assert.equal((await findUser(database.db, 'bob'))?.email, 'b2@example.com');
        assert.equal(await findUser(database.db, 'BOB'), null, 'ambiguous in other spellings');
        await assert.rejects(
          database.write((tx) => createUser(tx, userRecord({ uid: 'BOB', email: 'b3@example.com' }))),
          /taken or was used before/,
        );
      } finally {
        database.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a password change or removal ends the user's other sessions (tokens stay)", () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.stop());

  test("changed by an admin: all the user's sessions end; changed by the user on their own page: theirs stays", async () => {
    await s.addUser({ uid: 'boss', email: 'boss@example.com', password: 'boss password 1', admin: true });
    const carol = await s.addUser({ uid: 'carol', email: 'carol@example.com', password: 'carol password 1', admin: true });
    const carolToken = await s.tokenFor(carol, undefined, 'api');
    const [c1, c2, boss] = [new Browser(s.url), new Browser(s.url), new Browser(s.url)];
    for (const b of [c1, c2]) assert.equal((await b.login('carol', 'carol password 1')).status, 303);
    assert.equal((await boss.login('boss', 'boss password 1')).status, 303);

    assert.equal((await boss.request('/admin/api/users/carol', { method: 'PATCH', json: { password: 'carol password 2' } })).status, 200);
    assert.equal((await c1.request('/')).status, 303, 'signed out');
    assert.equal((await c2.request('/')).status, 303, 'signed out');
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(carolToken) })).status, 200, 'tokens stay');
    assert.equal((await boss.request('/')).status, 200, 'the admin stays signed in');

    for (const b of [c1, c2]) assert.equal((await b.login('carol', 'carol password 2')).status, 303);
    // carol changes her own password from her page: that browser stays signed in, the other one does not.
    const own = await c1.request('/admin/users/carol', {
      form: { email: 'carol@example.com', name: '', labels: '', admin: 'on', password: 'carol password 3' },
    });
    assert.equal(own.status, 303);
    assert.equal((await c1.request('/')).status, 200);
    assert.equal((await c2.request('/')).status, 303);
    // Removing the password ends the rest.
    assert.equal((await boss.request('/admin/api/users/carol', { method: 'PATCH', json: { password: null } })).status, 200);
    assert.equal((await c1.request('/')).status, 303);
    const left = await s.database.db.select({ n: count() }).from(sessions).where(eq(sessions.userId, carol.id)).get();
    assert.equal(left!.n, 0);
  });

  test('the CLI ends them too', async () => {
    await s.addUser({ uid: 'dave', email: 'dave@example.com', password: 'dave password 1' });
    const d = new Browser(s.url);
    assert.equal((await d.login('dave', 'dave password 1')).status, 303);
    const r = await s.ws.svc(['user', 'set', 'dave', '--password-stdin'], { stdin: 'dave password 2\n' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await d.request('/')).status, 303);
  });
});
