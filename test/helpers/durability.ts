// Durability scenarios (CONTRACT §5 "Durability") against svc as separate processes, so they run the same from
// source and as the single executable: a write lock held by another process, kill -9 under concurrent writes,
// and CLI writes beside a loaded server. A 2xx or a CLI exit 0 must mean committed: visible at once to other
// processes and still there after a restart.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { Browser, bearer, fetchRetryingGet } from './http.ts';
import { loadClient } from './load.ts';
import { install, holdWriteLock, sqlOn, type Installation, type InstallOptions, type Runner, type Serving } from './installation.ts';
import { freePort, type CliResult } from './workspace.ts';
import { scrape } from './metrics.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function ok(r: CliResult, what: string): CliResult {
  assert.equal(r.code, 0, `${what}: ${r.stderr}`);
  return r;
}

async function stop(server: Serving): Promise<void> {
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0, server.log());
}

/** A GET's status; a request that fails names why and shows the server's log, so a failure says what to look at. */
async function statusOf(server: Serving, url: string, headers: Record<string, string>): Promise<number> {
  try {
    const r = await fetchRetryingGet(url, { headers });
    await r.arrayBuffer();
    return r.status;
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`GET ${url} failed (${cause?.code ?? ''} ${cause?.message ?? String(e)}); server log:\n${server.log()}`);
  }
}

/** Whatever a CLI failure says, it is the busy message, never the driver's "database is locked". */
function assertCliBusyOrOk(r: CliResult, what: string): boolean {
  if (r.code === 0) return true;
  assert.equal(r.code, 1, `${what}: ${r.stderr}`);
  assert.match(r.stderr, /the database is busy \(locked by another process/, `${what}: ${r.stderr}`);
  assert.doesNotMatch(r.stderr, /database is locked|SQLITE_BUSY/, what);
  return false;
}

/** Everything the locked-database scenario may change, read by sqlite3 (a separate process). */
function snapshot(inst: Installation): Promise<string> {
  return sqlOn(
    inst,
    [
      "SELECT 'users:' || group_concat(uid, ',') FROM (SELECT uid FROM users ORDER BY uid);",
      "SELECT 'tokens:' || group_concat(name || '=' || coalesce(revoked_at, 'active'), ',') FROM (SELECT name, revoked_at FROM tokens ORDER BY name);",
      "SELECT 'sessions:' || count(*) FROM sessions;",
      "SELECT 'pat password:' || substr(password_hash, -12) FROM users WHERE uid = 'pat';",
      "SELECT 'audit rows:' || count(*) FROM audit;",
    ].join('\n'),
  );
}

export async function lockedDatabase(runner: Runner, t: TestContext): Promise<void> {
  const metricsPort = await freePort();
  const inst = await install(runner, { server: `metrics_listen = 127.0.0.1:${metricsPort}` });
  const busyRetries = async () => (await scrape(`http://127.0.0.1:${metricsPort}/metrics`)).value('svc_database_busy_retries_total');
  let server: Serving | null = null;
  try {
    ok(
      await inst.cli(['user', 'add', 'admin', '--email', 'admin@example.com', '--admin', '--password-stdin'], 'admin password 1\n'),
      'add admin',
    );
    ok(await inst.cli(['user', 'add', 'victim', '--email', 'victim@example.com']), 'add victim');
    ok(await inst.cli(['user', 'add', 'pat', '--email', 'pat@example.com', '--password-stdin'], 'pat password 1\n'), 'add pat');
    const adminToken = ok(await inst.cli(['token', 'create', 'admin', '--name', 'ops', '--scopes', 'admin']), 'admin token').stdout.trim();
    const victimToken = ok(
      await inst.cli(['token', 'create', 'victim', '--name', 'victim-agent', '--scopes', 'api']),
      'victim token',
    ).stdout.trim();
    const patToken = ok(await inst.cli(['token', 'create', 'pat', '--name', 'pat-agent', '--scopes', 'api']), 'pat token').stdout.trim();
    server = await inst.serve();
    const admin = new Browser(inst.url);
    assert.equal((await admin.login('admin', 'admin password 1')).status, 303);
    const pat = new Browser(inst.url);
    assert.equal((await pat.login('pat', 'pat password 1')).status, 303);
    const patTokenId = ((await (await fetch(`${inst.url}/auth/tokens`, { headers: bearer(patToken) })).json()) as { id: string }[])[0]!.id;
    const api = (method: string, path: string, body?: unknown) =>
      fetch(`${inst.url}${path}`, {
        method,
        headers: { ...bearer(adminToken), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    // Deletes, creates (INSERT … RETURNING), a token mint, a revocation, a password change and a logout.
    const actions: Record<string, [() => Promise<Response>, number]> = {
      'remove user': [() => api('DELETE', '/admin/api/users/victim'), 204],
      'create user': [() => api('POST', '/admin/api/users', { uid: 'newbie', email: 'newbie@example.com' }), 201],
      'mint token': [() => admin.request('/auth/tokens', { json: { name: 'minted-later', scopes: 'api' } }), 201],
      'revoke token': [() => fetch(`${inst.url}/auth/tokens/${patTokenId}/revoke`, { method: 'POST', headers: bearer(patToken) }), 200],
      'change password': [() => api('PATCH', '/admin/api/users/pat', { password: 'pat password 2' }), 200],
      logout: [() => pat.request('/logout', { method: 'POST', form: {} }), 303],
    };

    const before = await snapshot(inst);
    const retriesBefore = await busyRetries();
    const lock = await holdWriteLock(inst.dbPath);
    const started = Date.now();
    let during: [string, Response][];
    let readsDuring: number;
    let cliDuring: CliResult;
    let waited = 0;
    try {
      [during, cliDuring] = await Promise.all([
        Promise.all(Object.entries(actions).map(async ([name, [act]]) => [name, await act()] as [string, Response])).finally(() => {
          waited = Date.now() - started;
        }),
        inst.cli(['user', 'add', 'late', '--email', 'late@example.com']),
      ]);
      // Reads go on while another process writes.
      readsDuring = (await fetch(`${inst.url}/auth/tokens`, { headers: bearer(victimToken) })).status;
    } finally {
      await lock.release();
    }
    for (const [name, res] of during) {
      assert.equal(res.status, 503, `${name} during the lock: ${await res.text()}`);
      assert.equal(res.headers.get('retry-after'), '1', name);
    }
    assert.equal(readsDuring, 200);
    assert.equal(assertCliBusyOrOk(cliDuring, 'user add during the lock'), false, 'the CLI gave up with the busy message');
    // Queued writes share one wait: six of them answer together, not one after another. Counted in lock retries,
    // not milliseconds: the backoff sleeps at least 2, 4, 8, 16, 32, then 50 ms, so one 5 s wait holds at most 104
    // retries, and the writes asked a moment after the first retry a few times each until their own (nearly
    // equal) deadlines. Six waits of 5 s one after another would take about six times as many.
    const queuedRetries = (await busyRetries()) - retriesBefore;
    assert.ok(
      queuedRetries <= 104 + 5 * 10,
      `six queued writes retried ${queuedRetries} times: they waited one after another, not together`,
    );
    assert.equal(await snapshot(inst), before, 'nothing changed while the database was locked');

    for (const [name, [act, status]] of Object.entries(actions)) {
      const res = await act();
      assert.equal(res.status, status, `${name} after the lock: ${await res.text()}`);
    }
    // At once, in other processes: the CLI and sqlite3.
    const expectAfter = async (when: string) => {
      const listed = JSON.parse(ok(await inst.cli(['user', 'list', '--json']), 'user list').stdout) as { uid: string }[];
      assert.deepEqual(listed.map((u) => u.uid).sort(), ['admin', 'newbie', 'pat'], when);
      const now = await snapshot(inst);
      assert.match(now, /^users:admin,newbie,pat$/m, when);
      assert.match(now, /^tokens:minted-later=active,ops=active,pat-agent=\d+$/m, when);
      assert.doesNotMatch(now, /victim-agent/, when);
      assert.notEqual(/^pat password:(.*)$/m.exec(now)![1], /^pat password:(.*)$/m.exec(before)![1], `${when}: the password changed`);
      assert.equal(
        Number(/^audit rows:(\d+)$/m.exec(now)![1]) - Number(/^audit rows:(\d+)$/m.exec(before)![1]),
        5,
        `${when}: one audit row per admin or token action`,
      );
      assert.equal((await fetch(`${inst.url}/auth/tokens`, { headers: bearer(victimToken) })).status, 401, when);
      assert.equal((await fetch(`${inst.url}/auth/tokens`, { headers: bearer(patToken) })).status, 401, when);
      assert.equal((await pat.request('/')).status, 303, `${when}: pat's session ended`);
    };
    await expectAfter('right after');
    await stop(server);
    server = await inst.serve();
    await expectAfter('after a restart');
    t.diagnostic(
      `${runner.name}: 6 writes during a 5 s+ lock answered 503 in ${waited} ms (${queuedRetries} lock retries) and changed nothing; after release all 6 committed`,
    );
  } finally {
    if (server) await stop(server);
    inst.remove();
  }
}

export async function crashRounds(runner: Runner, t: TestContext, rounds: number, options: InstallOptions = {}): Promise<void> {
  const inst = await install(runner, options);
  const minted = new Map<string, string>();
  const revoked = new Set<string>();
  // A revocation sent but never answered (the server died) may or may not have committed.
  const unanswered = new Set<string>();
  const users: string[] = [];
  const items: string[] = [];
  let server: Serving | null = null;
  const lost = { tokens: 0, revocations: 0, users: 0, items: 0 };
  try {
    ok(
      await inst.cli(['user', 'add', 'admin', '--email', 'admin@example.com', '--admin', '--password-stdin'], 'admin password 1\n'),
      'add admin',
    );
    server = await inst.serve();
    for (let round = 0; round < rounds; round++) {
      const admin = new Browser(inst.url);
      assert.equal((await admin.login('admin', 'admin password 1')).status, 303);
      let running = true;
      const attempt = async (fn: () => Promise<void>) => {
        try {
          await fn();
        } catch {
          // the server was killed mid-request: not acknowledged
        }
      };
      const minter = async () => {
        for (let i = 0; running; i++) {
          await attempt(async () => {
            const r = await admin.request('/auth/tokens', { json: { name: `r${round}-${i}`, scopes: 'api' } });
            if (r.status === 201) {
              const body = (await r.json()) as { id: string; token: string };
              minted.set(body.id, body.token);
            }
          });
        }
      };
      const revoker = async () => {
        while (running) {
          const open = [...minted.keys()].filter((id) => !revoked.has(id) && !unanswered.has(id));
          const id = open[Math.floor(Math.random() * open.length)];
          if (id === undefined) {
            await sleep(2);
            continue;
          }
          unanswered.add(id);
          await attempt(async () => {
            const r = await admin.request(`/auth/tokens/${id}/revoke`, { method: 'POST', json: {} });
            if (r.status === 200) revoked.add(id);
            unanswered.delete(id);
          });
        }
      };
      const creator = async () => {
        for (let i = 0; running; i++) {
          const uid = `u${round}x${i}`;
          await attempt(async () => {
            const r = await admin.request('/admin/api/users', { json: { uid, email: `${uid}@example.com` } });
            if (r.status === 201) users.push(uid);
          });
        }
      };
      const cliWriter = (async () => {
        const id = `crash/${round}`;
        if (assertCliBusyOrOk(await inst.cli(['item', 'put', id, '--title', `round ${round}`], `written in round ${round}`), 'item put'))
          items.push(id);
      })();
      const workers = [minter(), revoker(), creator()];
      await sleep(100 + Math.random() * 900);
      server.child.kill('SIGKILL');
      running = false;
      await Promise.all([...workers, server.exited, cliWriter]);

      assert.equal(await sqlOn(inst, 'PRAGMA integrity_check;'), 'ok', `integrity after round ${round}`);
      server = await inst.serve();
      const verifier = new Browser(inst.url);
      assert.equal((await verifier.login('admin', 'admin password 1')).status, 303);
      const entries = [...minted];
      for (let i = 0; i < entries.length; i += 25) {
        await Promise.all(
          entries.slice(i, i + 25).map(async ([id, token]) => {
            const status = await statusOf(server!, `${inst.url}/auth/tokens`, bearer(token));
            if (revoked.has(id) && status !== 401) lost.revocations++;
            if (!revoked.has(id) && !unanswered.has(id) && status !== 200) lost.tokens++;
          }),
        );
      }
      const known = new Set(((await (await verifier.request('/admin/api/users')).json()) as { uid: string }[]).map((u) => u.uid));
      lost.users = users.filter((u) => !known.has(u)).length;
      const itemIds = new Set(((await (await verifier.request('/admin/api/items')).json()) as { id: string }[]).map((i) => i.id));
      lost.items = items.filter((i) => !itemIds.has(i)).length;
      assert.deepEqual(lost, { tokens: 0, revocations: 0, users: 0, items: 0 }, `acknowledged writes lost after kill -9 in round ${round}`);
    }
    t.diagnostic(
      `${runner.name}: ${rounds} rounds of kill -9; acknowledged: ${minted.size} token mints, ${revoked.size} revocations, ` +
        `${users.length} user creations, ${items.length} CLI item puts; lost: ${lost.tokens + lost.revocations + lost.users + lost.items}; integrity ok every round`,
    );
    assert.ok(minted.size > rounds && revoked.size > 0 && users.length > 0, 'the load wrote something every round');
  } finally {
    if (server) await stop(server);
    inst.remove();
  }
}

export async function cliBesideServer(runner: Runner, t: TestContext, options: InstallOptions = {}): Promise<void> {
  const inst = await install(runner, options);
  let server: Serving | null = null;
  try {
    ok(
      await inst.cli(['user', 'add', 'admin', '--email', 'admin@example.com', '--admin', '--password-stdin'], 'admin password 1\n'),
      'add admin',
    );
    const token = ok(await inst.cli(['token', 'create', 'admin', '--name', 'reader']), 'token').stdout.trim();
    server = await inst.serve();
    const admin = new Browser(inst.url);
    assert.equal((await admin.login('admin', 'admin password 1')).status, 303);
    const statuses = new Map<number, number>();
    const seen = (status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1);
    const minted = new Map<string, string>();
    const revoked = new Set<string>();
    const items: string[] = [];
    let running = true;
    const whoami = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } });
    // At most 40 connections for the readers, as a client pool would hold (see helpers/load.ts).
    const pool = loadClient(40);
    const headers = { ...bearer(token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const readers = Array.from({ length: 40 }, async () => {
      while (running) seen((await pool.post(`${inst.url}/mcp`, headers, whoami)).status);
    });
    const writers = Array.from({ length: 10 }, async (_, w) => {
      for (let i = 0; running; i++) {
        const r = await admin.request('/auth/tokens', { json: { name: `w${w}-${i}`, scopes: 'api' } });
        seen(r.status);
        if (r.status !== 201) {
          await r.arrayBuffer();
          continue;
        }
        const body = (await r.json()) as { id: string; token: string };
        minted.set(body.id, body.token);
        const rv = await admin.request(`/auth/tokens/${body.id}/revoke`, { method: 'POST', json: {} });
        seen(rv.status);
        await rv.arrayBuffer();
        if (rv.status === 200) revoked.add(body.id);
      }
    });
    const clis = Array.from({ length: 3 }, async (_, c) => {
      for (let i = 0; i < 4; i++) {
        const id = `cli/${c}/${i}`;
        if (assertCliBusyOrOk(await inst.cli(['item', 'put', id, '--title', 'from the CLI'], 'text'), id)) items.push(id);
        const user = await inst.cli(['token', 'create', 'admin', '--name', `cli-${c}-${i}`, '--scopes', 'api']);
        if (assertCliBusyOrOk(user, 'token create')) minted.set(`cli-${c}-${i}`, user.stdout.trim());
      }
    });
    await Promise.all(clis);
    running = false;
    await Promise.all([...readers, ...writers]);
    pool.close();

    const unexpected = [...statuses.keys()].filter((s) => ![200, 201, 503].includes(s));
    assert.deepEqual(unexpected, [], `every answer is 2xx or 503: ${JSON.stringify([...statuses])}`);
    const check = async (when: string) => {
      for (const [id, tok] of minted) {
        const status = (await fetch(`${inst.url}/auth/tokens`, { headers: bearer(tok) })).status;
        assert.equal(status, revoked.has(id) ? 401 : 200, `${when}: token ${id}`);
      }
      const listed = JSON.parse(ok(await inst.cli(['item', 'list', '--json']), 'item list').stdout) as { id: string }[];
      for (const id of items)
        assert.ok(
          listed.some((i) => i.id === id),
          `${when}: item ${id}`,
        );
    };
    await check('at once');
    await stop(server);
    server = await inst.serve();
    await check('after a restart');
    t.diagnostic(
      `${runner.name}: 50 connections beside 3 CLI writers: ${JSON.stringify(Object.fromEntries(statuses))} by status; ${minted.size} tokens, ${revoked.size} revoked, ${items.length} CLI items, none lost`,
    );
  } finally {
    if (server) await stop(server);
    inst.remove();
  }
}
