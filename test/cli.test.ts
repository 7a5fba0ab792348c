import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { listening } from './helpers/wait.ts';
import { createWorkspace, type Workspace } from './helpers/workspace.ts';

describe('svc CLI', () => {
  let ws: Workspace;
  before(async () => {
    ws = await createWorkspace();
  });
  after(() => ws.remove());

  test('--help and unknown commands', async () => {
    const help = await ws.svc(['--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /user add UID --email E/);
    const sub = await ws.svc(['user', 'add', '--help']);
    assert.equal(sub.code, 0);
    assert.match(sub.stdout, /--password-stdin/);
    const unknown = await ws.svc(['frobnicate']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /unknown command/);
  });

  test('check and serve with oidc and header enabled but empty: every field listed, exit 78, nothing listening', async () => {
    const bad = await createWorkspace({
      auth: 'token\n    enabled true\noidc\n    enabled true\n    issuer\n    client_id\n    client_secret_env\n    redirect_url\nheader\n    enabled true\n    user_header\n    email_header\n    secret_header\n    shared_secret_env\n    trusted_proxy\n',
    });
    try {
      for (const command of ['check', 'serve']) {
        const r = await bad.svc([command]);
        assert.equal(r.code, 78, `${command}: ${r.stderr}`);
        const lines = r.stderr.trim().split('\n');
        for (const key of ['issuer', 'client_id', 'client_secret_env', 'redirect_url']) {
          assert.ok(lines.includes(`svc: config: auth.oidc.${key}: required when oidc is enabled`), `${command} ${key}`);
        }
        for (const key of ['user_header', 'email_header', 'secret_header', 'shared_secret_env', 'trusted_proxy']) {
          assert.ok(lines.includes(`svc: config: auth.header.${key}: required when header is enabled`), `${command} ${key}`);
        }
        assert.equal(await listening(bad.port), false);
      }
    } finally {
      bad.remove();
    }
  });

  test('a missing config file and a missing session secret are configuration errors', async () => {
    const missing = await ws.svc(['check', '--config', join(ws.dir, 'nope.ini')]);
    assert.equal(missing.code, 78);
    assert.match(missing.stderr, /nope\.ini: no such file/);
    const noSecret = await ws.svc(['check'], { env: { SVC_SESSION_SECRET: '' } });
    assert.equal(noSecret.code, 78);
    assert.match(noSecret.stderr, /^svc: config: auth.session.secret_env: environment variable SVC_SESSION_SECRET is not set$/m);
    const ok = await ws.svc(['check']);
    assert.equal(ok.code, 0, ok.stderr);
  });

  test('--config goes anywhere on the line, once', async () => {
    for (const args of [
      ['--config', ws.configPath, 'user', 'list'],
      ['user', '--config', ws.configPath, 'list'],
      ['user', 'list', `--config=${ws.configPath}`],
    ]) {
      const r = await ws.svc(args);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    }
    const twice = await ws.svc(['--config', ws.configPath, 'check', '--config', join(ws.dir, 'nope.ini')]);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /--config: give it once/);
    // An option word is never taken as the path, and `--` still ends the options.
    const optionLike = await ws.svc(['user', 'set', 'nobody', '--name', 'x', '--config', '--email', join(ws.dir, 'nope.ini')]);
    assert.equal(optionLike.code, 1);
    assert.match(optionLike.stderr, /--config: give the PATH/);
    const marker = await ws.svc(['item', 'remove', 'x', '--config', '--', 'y']);
    assert.equal(marker.code, 1);
    assert.match(marker.stderr, /--config: give the PATH/);
    const empty = await ws.svc(['check', '--config']);
    assert.equal(empty.code, 1);
    assert.match(empty.stderr, /--config: give the PATH/);
  });

  test('migrate on an empty database, then again (idempotent)', async () => {
    const first = await ws.svc(['migrate']);
    assert.equal(first.code, 0, first.stderr);
    const second = await ws.svc(['migrate']);
    assert.equal(second.code, 0, second.stderr);
  });

  test('user add, list, set, remove; uid reserved after removal; bad input changes nothing', async () => {
    const add = await ws.svc(
      [
        'user',
        'add',
        'alice',
        '--email',
        'alice@example.com',
        '--name',
        'Alice A',
        '--labels',
        'finance, eng eng',
        '--admin',
        '--password-stdin',
      ],
      { stdin: 'correct horse battery\n' },
    );
    assert.equal(add.code, 0, add.stderr);
    assert.equal((await ws.svc(['user', 'add', 'bob', '--email', 'bob@example.com'])).code, 0);

    const rejected = [
      [['user', 'add', 'carol x', '--email', 'c@example.com'], /uid: a uid is 1 to 64 characters/],
      [['user', 'add', 'carol', '--email', 'not-an-email'], /email: an email address looks like/],
      [['user', 'add', 'carol', '--email', 'c@example.com', '--labels', 'Bad!'], /labels: invalid label "Bad!"/],
      [['user', 'add', 'carol'], /--email is required/],
      [['user', 'add', 'carol', '--email', 'c@example.com', '--password', 'x'], /Unknown option '--password'/],
      [['user', 'add', 'alice', '--email', 'a2@example.com'], /"alice" is taken or was used before/],
      [['user', 'set', 'nobody', '--name', 'x'], /no user "nobody"/],
      [['user', 'set', 'bob', '--labels', 'UPPER'], /invalid label/],
    ] as const;
    for (const [args, message] of rejected) {
      const r = await ws.svc([...args]);
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
    }
    const short = await ws.svc(['user', 'add', 'carol', '--email', 'c@example.com', '--password-stdin'], { stdin: 'short\n' });
    assert.equal(short.code, 1);
    assert.match(short.stderr, /at least 8 characters/);

    const list = JSON.parse((await ws.svc(['user', 'list', '--json'])).stdout);
    assert.deepEqual(
      list.map((u: { uid: string }) => u.uid),
      ['alice', 'bob'],
      'nothing was created by the rejected commands',
    );
    const alice = list[0];
    assert.deepEqual(alice.labels, ['eng', 'finance']);
    assert.equal(alice.admin, true);
    assert.equal(alice.has_password, true);
    assert.equal(alice.name, 'Alice A');
    assert.match(alice.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.ok(!JSON.stringify(list).includes('argon2'), 'no password hash in the listing');
    assert.equal(list[1].has_password, false);

    const lastAdmin = await ws.svc(['user', 'set', 'alice', '--no-admin']);
    assert.equal(lastAdmin.code, 1);
    assert.match(lastAdmin.stderr, /the last admin cannot be removed or lose the admin flag/);
    assert.equal((await ws.svc(['user', 'remove', 'alice'])).code, 1);
    assert.equal((await ws.svc(['user', 'add', 'dave', '--email', 'dave@example.com', '--admin'])).code, 0);
    const set = await ws.svc(['user', 'set', 'alice', '--labels', 'ops', '--no-admin', '--no-password']);
    assert.equal(set.code, 0, set.stderr);
    const changed = JSON.parse((await ws.svc(['user', 'list', '--json'])).stdout)[0];
    assert.deepEqual([changed.labels, changed.admin, changed.has_password], [['ops'], false, false]);

    assert.equal((await ws.svc(['user', 'remove', 'bob'])).code, 0);
    const again = await ws.svc(['user', 'add', 'bob', '--email', 'bob@example.com']);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /"bob" is taken or was used before \(uids are never reused\)/);
    const removeUnknown = await ws.svc(['user', 'remove', 'bob']);
    assert.equal(removeUnknown.code, 1);
  });

  test('token create prints a token once; unknown users and bad ttls are refused', async () => {
    const ok = await ws.svc(['token', 'create', 'alice', '--name', 'automation', '--ttl', '30d']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout.trim(), /^svc_[a-z2-7]{48}$/);
    const badTtl = await ws.svc(['token', 'create', 'alice', '--name', 'x', '--ttl', '0h']);
    assert.equal(badTtl.code, 1);
    assert.match(badTtl.stderr, /ttl: a duration is/);
    assert.equal((await ws.svc(['token', 'create', 'ghost', '--name', 'x'])).code, 1);
  });

  test('item put, import with front matter, list, remove', async () => {
    const put = await ws.svc(['item', 'put', 'notes/a', '--title', 'Note A', '--labels', 'eng'], { stdin: 'alpha text' });
    assert.equal(put.code, 0, put.stderr);
    const dir = join(ws.dir, 'docs');
    mkdirSync(join(dir, 'sub'), { recursive: true });
    writeFileSync(join(dir, 'plain.md'), '# Plain heading\nbody');
    writeFileSync(join(dir, 'sub', 'secret.md'), '---\ntitle: "Secret plan"\nlabels: [eng, finance]\n---\ntext');
    writeFileSync(join(dir, 'ignored.txt'), 'not markdown');
    const imported = await ws.svc(['item', 'import', dir]);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout, /imported 2 item/);
    const items = JSON.parse((await ws.svc(['item', 'list', '--json'])).stdout);
    assert.deepEqual(items, [
      { id: 'notes/a', title: 'Note A', labels: ['eng'] },
      { id: 'plain', title: 'Plain heading', labels: [] },
      { id: 'sub/secret', title: 'Secret plan', labels: ['eng', 'finance'] },
    ]);

    // One bad file: the whole import is refused and nothing is written.
    writeFileSync(join(dir, 'zz-bad.md'), '---\nlabels: NOT OK\n---\n');
    writeFileSync(join(dir, 'aa-new.md'), '# would be new');
    const bad = await ws.svc(['item', 'import', dir]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /zz-bad\.md:2: labels: invalid label "NOT"/);
    assert.equal(JSON.parse((await ws.svc(['item', 'list', '--json'])).stdout).length, 3);

    // Each of these once imported a confidential document as readable by everyone. Now each is refused, every
    // bad file is named with its line, and nothing is written.
    rmSync(join(dir, 'zz-bad.md'));
    writeFileSync(join(dir, 'block-list.md'), '---\ntitle: Board\nlabels:\n  - board\n---\nsecret');
    writeFileSync(join(dir, 'capital.md'), '---\nLabels: board\n---\nsecret');
    const attacks = await ws.svc(['item', 'import', dir]);
    assert.equal(attacks.code, 1);
    assert.match(attacks.stderr, /block-list\.md:4: lists, nested values/);
    assert.match(attacks.stderr, /capital\.md:2: unknown key "Labels"/);
    assert.equal(JSON.parse((await ws.svc(['item', 'list', '--json'])).stdout).length, 3);
    // A BOM, CRLF and a delimiter with a trailing space are read, labels included.
    rmSync(join(dir, 'block-list.md'));
    rmSync(join(dir, 'capital.md'));
    rmSync(join(dir, 'aa-new.md'));
    writeFileSync(join(dir, 'bom.md'), '\uFEFF---\r\ntitle: Board\r\nlabels: board\r\n---\r\nsecret');
    writeFileSync(join(dir, 'space.md'), '--- \nlabels: board\n---\nsecret');
    assert.equal((await ws.svc(['item', 'import', dir])).code, 0);
    const listed = JSON.parse((await ws.svc(['item', 'list', '--json'])).stdout) as { id: string; labels: string[] }[];
    assert.deepEqual(
      listed.filter((i) => i.id === 'bom' || i.id === 'space').map((i) => i.labels),
      [['board'], ['board']],
    );

    const badId = await ws.svc(['item', 'put', '../escape', '--title', 't'], { stdin: 'x' });
    assert.equal(badId.code, 1);
    assert.match(badId.stderr, /id: an item id is a relative path/);
    assert.equal((await ws.svc(['item', 'remove', 'plain'])).code, 0);
    assert.equal((await ws.svc(['item', 'remove', 'plain'])).code, 1);
  });

  test('an import that fails part-way writes nothing', async () => {
    const dir = join(ws.dir, 'many');
    mkdirSync(dir);
    for (let i = 0; i < 300; i++) writeFileSync(join(dir, `f${String(i).padStart(3, '0')}.md`), `---\ntitle: File ${i}\n---\ntext ${i}`);
    const db = ws.dbUrl.slice('file:'.length);
    const before = execFileSync('sqlite3', [db, 'SELECT count(*) FROM items;'], { encoding: 'utf8' }).trim();
    // The seventh write fails inside the database, as a full disk would.
    execFileSync('sqlite3', [
      db,
      "CREATE TRIGGER fail_seventh BEFORE INSERT ON items WHEN NEW.id = 'f006' BEGIN SELECT RAISE(ABORT, 'forced failure'); END;",
    ]);
    try {
      const r = await ws.svc(['item', 'import', dir]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /forced failure/);
      assert.equal(
        execFileSync('sqlite3', [db, 'SELECT count(*) FROM items;'], { encoding: 'utf8' }).trim(),
        before,
        'not one of the six before it',
      );
    } finally {
      execFileSync('sqlite3', [db, 'DROP TRIGGER fail_seventh;']);
    }
  });
});
