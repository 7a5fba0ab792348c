// [notify]: mail to users through a real SMTP server (smtp-server) as the peer. Two svc processes share the
// database and each notice is mailed once; an SMTP server that is down delays mail without losing or doubling it,
// across a restart; a user without an address is skipped; no mail carries a secret.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { install, sourceRunner, sqlite3 } from './helpers/installation.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';
import { startSmtpPeer, type SmtpPeer } from './helpers/smtp.ts';
import { loadConfig, type ConfigError } from '../src/config/load.ts';
import { openDatabase } from '../src/db/open.ts';
import { notices } from '../src/db/schema.ts';
import { createUser } from '../src/store/users.ts';
import { pruneNotices } from '../src/store/notices.ts';
import { userRecord } from './helpers/records.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SMTP_PASS = 'smtp-pass-Zq8-do-not-leak';
const DAY = 86_400_000;

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test('notices: one mail per event across two processes, SMTP down then up across a restart, no address, no secrets', async () => {
  // Chosen before the mail peer runs: svc is told its address while it is still down.
  const smtpPort = await freePort();
  const inst = await install(sourceRunner, { env: { SVC_SMTP_URL: `smtp://mailer:${SMTP_PASS}@127.0.0.1:${smtpPort}` } });
  // Each process binds a port of its own choosing: nothing here calls them, and base_url is the installation's.
  // At log_level debug each finished round of the notice job is logged, so the test can wait for rounds.
  const configs = [0, 1].map((i) => {
    const path = join(inst.dir, `svc-${i}.ini`);
    writeFileSync(
      path,
      `[server]\nlisten = 127.0.0.1:0\nbase_url = ${inst.url}\ndatabase = file:svc.db\nlog_level = debug\n[notify]\nsmtp_url_env = SVC_SMTP_URL\nfrom = svc@example.com\nexpiry_warning = 7d\n[auth]\n${DEFAULT_AUTH}`,
    );
    return path;
  });
  const logs = ['', ''];
  const serve = async (i: number): Promise<ChildProcess> => {
    const { file, args } = sourceRunner.command(['serve', '--config', configs[i]!]);
    const child = spawn(file, args, { env: inst.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d) => (logs[i] += d));
    child.stderr!.on('data', (d) => (logs[i] += d));
    await until(`svc ${i} to listen`, () => logs[i]!.includes('"event":"listening"'));
    return child;
  };
  const rounds = (i: number) => logs[i]!.split('"event":"notice_round_done"').length - 1;
  const moreRounds = async (which: number[], n: number) => {
    const from = which.map(rounds);
    await until(`${n} more notice rounds of processes ${which.join(', ')}`, () => which.every((i, k) => rounds(i) >= from[k]! + n));
  };
  const stop = async (child: ChildProcess) => {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  };
  let peer: SmtpPeer | null = null;
  const running: ChildProcess[] = [];
  try {
    for (const [uid, email] of [
      ['ann', 'ann@example.com'],
      ['nomail', 'nomail@example.com'],
      ['carl', 'carl@example.com'],
    ]) {
      assert.equal((await inst.cli(['user', 'add', uid!, '--email', email!, '--name', uid === 'ann' ? 'Ann Example' : ''])).code, 0);
    }
    await sqlite3(inst.dbPath, "UPDATE users SET email = '' WHERE uid = 'nomail';");
    // Events made from the CLI before any server runs: a token an administrator made, a password change.
    const minted = (await inst.cli(['token', 'create', 'ann', '--name', 'deploy-bot', '--ttl', '30d'])).stdout.trim();
    assert.match(minted, /^svc_/);
    assert.equal((await inst.cli(['user', 'set', 'ann', '--password-stdin'], 'ann password 1\n')).code, 0);
    // Tokens whose expiry came within the window (as time would bring them): ann's, nomail's; carl's was made
    // for two days and is not warned about; a revoked one neither.
    const now = Date.now();
    for (const [uid, name] of [
      ['nomail', 'old-nomail'],
      ['carl', 'short'],
      ['carl', 'revoked'],
    ]) {
      assert.equal((await inst.cli(['token', 'create', uid!, '--name', name!, '--ttl', '30d'])).code, 0);
    }
    await sqlite3(
      inst.dbPath,
      `
      UPDATE tokens SET created_at = ${now - 28 * DAY}, expires_at = ${now + 2 * DAY} WHERE name IN ('deploy-bot', 'old-nomail', 'revoked');
      UPDATE tokens SET created_at = ${now}, expires_at = ${now + 2 * DAY} WHERE name = 'short';
      UPDATE tokens SET revoked_at = ${now} WHERE name = 'revoked';`,
    );

    // The SMTP server is down: svc tries, records the failure, and stops; nothing is sent or lost.
    const first = await serve(0);
    await until('a failed attempt', () => logs[0]!.includes('"event":"notice_failed"'));
    await stop(first);
    assert.doesNotMatch(logs[0]!, new RegExp(SMTP_PASS), 'the SMTP password is never logged');
    // ann: token made, password changed, token expiring; nomail: token made, token expiring; carl: two tokens made.
    assert.equal(await sqlite3(inst.dbPath, 'SELECT count(*) FROM notices;'), '7');
    assert.equal(await sqlite3(inst.dbPath, "SELECT count(*) FROM notices WHERE outcome IS NOT NULL AND outcome <> 'no_email';"), '0');

    // Up again, with two processes on the database: each notice is mailed once.
    peer = await startSmtpPeer(smtpPort, { user: 'mailer', pass: SMTP_PASS });
    running.push(await serve(0), await serve(1));
    const expected = 3 + 2;
    await until(`${expected} mails`, () => peer!.received.length >= expected);
    // An event while both run: announced once too.
    assert.equal((await inst.cli(['token', 'create', 'ann', '--name', 'second-bot'])).code, 0);
    await until('the new event', () => peer!.received.some((m) => m.subject.includes('second-bot')));
    // Two more finished rounds of each process (the first may have begun before the event): nothing is sent twice.
    await moreRounds([0, 1], 2);
    await stop(running.pop()!);
    running.push(await serve(1));
    await moreRounds([1], 1); // the restarted process's first round, begun after it started

    const subjects = peer.received.map((m) => `${m.to} ${m.subject}`).sort();
    assert.deepEqual(
      subjects,
      [
        'ann@example.com A token was created for your svc account: "deploy-bot"',
        'ann@example.com A token was created for your svc account: "second-bot"',
        'ann@example.com Your svc password was changed',
        `ann@example.com Your svc token "deploy-bot" expires on ${new Date(now + 2 * DAY).toISOString().slice(0, 16).replace('T', ' ')} UTC`,
        'carl@example.com A token was created for your svc account: "revoked"',
        'carl@example.com A token was created for your svc account: "short"',
      ].sort(),
    );
    assert.deepEqual(
      peer.logins.filter((l) => l !== 'mailer'),
      [],
      'svc signs in with the configured user',
    );
    const outcomes = await sqlite3(inst.dbPath, "SELECT kind || ' ' || outcome FROM notices ORDER BY id;");
    assert.match(outcomes, /token_expiring no_email/, 'nomail has no address: skipped, not retried');
    assert.doesNotMatch(outcomes, /pending|gave_up/);

    for (const mail of peer.received) {
      assert.equal(mail.from, 'svc@example.com');
      assert.ok(mail.text.includes(`${inst.url}/`), 'links to the token page');
      assert.match(mail.html, new RegExp(`href="${inst.url}/"`));
      assert.ok(!mail.raw.includes(minted) && !/svc_[a-z2-7]{20}/.test(mail.raw), 'no token in any mail');
    }
    const expiring = peer.received.find((m) => m.subject.includes('expires on'))!;
    assert.match(expiring.text, /^Hello Ann Example,/);
    assert.match(expiring.text, /"deploy-bot" expires on/);
  } finally {
    for (const c of running) c.kill('SIGTERM');
    await peer?.stop();
    inst.remove();
  }
});

test('[notify] is checked: the SMTP URL comes from the environment, and is never echoed', () => {
  const load = (notify: string, env: Record<string, string> = {}, mode: 'serve' | 'data' = 'serve') =>
    loadConfig(`[server]\nlisten = 127.0.0.1:8080\n[notify]\n${notify}\n[auth]\ntoken\n    enabled true\n`, env, { mode });
  const ok = load('smtp_url_env = SMTP\nfrom = svc@example.com', { SMTP: 'smtps://u:p@mail.example.com:465' });
  assert.deepEqual(ok.notify, { smtpUrl: 'smtps://u:p@mail.example.com:465', from: 'svc@example.com', expiryWarningSeconds: 7 * 86400 });
  assert.equal(
    load('smtp_url_env = SMTP\nfrom = svc@example.com', {}, 'data').notify?.smtpUrl,
    null,
    'the data commands do not need the secret',
  );
  const problems = (notify: string, env: Record<string, string> = {}) => {
    try {
      load(notify, env);
    } catch (e) {
      return (e as ConfigError).message;
    }
    return '';
  };
  assert.match(problems('from = svc@example.com'), /notify\.smtp_url_env: required/);
  assert.match(problems('smtp_url_env = SMTP\nfrom = svc@example.com'), /environment variable SMTP is not set/);
  const bad = problems('smtp_url_env = SMTP\nfrom = svc@example.com', { SMTP: 'http://u:hunter2-secret@mail' });
  assert.match(bad, /must hold an smtp:\/\/ or smtps:\/\/ URL/);
  assert.doesNotMatch(bad, /hunter2-secret/);
  assert.match(problems('smtp_url_env = SMTP\nfrom = nobody', { SMTP: 'smtp://m' }), /notify\.from: "nobody" is not a mail address/);
  assert.match(
    problems('smtp_url_env = SMTP\nfrom = a@b\nexpiry_warning = soon', { SMTP: 'smtp://m' }),
    /notify\.expiry_warning: "soon" is not a duration/,
  );
  assert.match(problems('smtp_url_env = SMTP\nfrom = a@b\nsmtp_host = x', { SMTP: 'smtp://m' }), /notify\.smtp_host: unknown key/);
  assert.equal(
    loadConfig('[server]\nlisten = 127.0.0.1:8080\n[auth]\ntoken\n    enabled true\n', {}, { mode: 'serve' }).notify,
    null,
    'off when absent',
  );
});

test('settled notices are removed after their keep time; pending ones never', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-notices-'));
  const database = await openDatabase(`file:${join(dir, 'svc.db')}`, null);
  try {
    await database.migrate();
    const user = await database.write((tx) => createUser(tx, userRecord({ uid: 'pat', email: 'pat@example.com' })));
    const now = Date.now();
    await database.write(async (tx) => {
      for (let i = 0; i < 1500; i++) {
        await tx.insert(notices).values({
          key: `old:${i}`,
          userId: user.id,
          kind: 'password_changed',
          detail: '{}',
          createdAt: now - 90 * DAY,
          nextAttemptAt: now - 90 * DAY,
          doneAt: now - 60 * DAY,
          outcome: 'sent',
        });
      }
      await tx.insert(notices).values({
        key: 'recent',
        userId: user.id,
        kind: 'password_changed',
        detail: '{}',
        createdAt: now,
        nextAttemptAt: now,
        doneAt: now,
        outcome: 'sent',
      });
      await tx
        .insert(notices)
        .values({ key: 'pending', userId: user.id, kind: 'password_changed', detail: '{}', createdAt: now - 90 * DAY, nextAttemptAt: now });
    });
    const batches = [
      await database.write((tx) => pruneNotices(tx, now - 37 * DAY)),
      await database.write((tx) => pruneNotices(tx, now - 37 * DAY)),
      await database.write((tx) => pruneNotices(tx, now - 37 * DAY)),
    ];
    assert.deepEqual(batches, [1000, 500, 0], 'in batches of 1,000');
    assert.deepEqual((await database.db.select({ key: notices.key }).from(notices).all()).map((r) => r.key).sort(), ['pending', 'recent']);
  } finally {
    database.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
