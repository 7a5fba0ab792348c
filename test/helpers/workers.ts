// `svc serve --workers 2` as an operator runs it, from source or as the single executable: both workers answer,
// a revocation made through one is seen by the other at once, a killed worker is replaced while the service keeps
// answering, and SIGTERM ends them all cleanly.
import assert from 'node:assert/strict';
import { type ChildProcessByStdio, execFileSync, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { TestContext } from 'node:test';
import { install, type Runner } from './installation.ts';
import { bearer } from './http.ts';
import { freePort } from './workspace.ts';
import { scrape } from './metrics.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const children = (pid: number) => {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter((l) => l !== '')
      .map(Number);
  } catch {
    return [];
  }
};

export async function twoWorkers(runner: Runner, t: TestContext): Promise<void> {
  const metricsPort = await freePort();
  const inst = await install(runner, { server: `metrics_listen = 127.0.0.1:${metricsPort}` });
  let started: ChildProcessByStdio<null, Readable, Readable> | undefined;
  try {
    assert.equal((await inst.cli(['user', 'add', 'wanda', '--email', 'wanda@example.com'])).code, 0);
    const token = (await inst.cli(['token', 'create', 'wanda', '--name', 'w', '--scopes', 'api'])).stdout.trim();
    const { file, args } = runner.command(['serve', '--workers', '2', '--config', `${inst.dir}/svc.ini`]);
    const primary = spawn(file, args, { env: inst.env, stdio: ['ignore', 'pipe', 'pipe'] });
    started = primary;
    let log = '';
    primary.stdout.on('data', (d) => (log += d));
    primary.stderr.on('data', (d) => (log += d));
    const exited = new Promise<number | null>((resolve) => primary.on('exit', (code) => resolve(code)));
    const listening = () => (log.match(/"event":"listening"/g) ?? []).length;
    for (let i = 0; i < 200 && listening() < 2; i++) await sleep(50);
    assert.equal(listening(), 2, log);
    assert.equal(children(primary.pid!).length, 2);

    // Every worker sees the token, then every worker refuses it once it is revoked through either.
    const status = async () => (await fetch(`${inst.url}/auth/tokens`, { headers: bearer(token), keepalive: false })).status;
    const many = async () => Promise.all(Array.from({ length: 20 }, status));
    assert.deepEqual([...new Set(await many())], [200]);
    const id = ((await (await fetch(`${inst.url}/auth/tokens`, { headers: bearer(token) })).json()) as { id: string }[])[0]!.id;
    assert.equal((await fetch(`${inst.url}/auth/tokens/${id}/revoke`, { method: 'POST', headers: bearer(token) })).status, 200);
    assert.deepEqual([...new Set(await many())], [401], 'refused by every worker on the very next request');

    // The primary serves the sum of both workers' counts.
    const counted = await scrape(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.equal(counted.value('svc_http_requests_total', { route: '/auth/tokens', method: 'GET', status: '200' }), 21);
    assert.equal(counted.value('svc_http_requests_total', { route: '/auth/tokens', method: 'GET', status: '401' }), 20);
    assert.equal(counted.value('svc_auth_outcomes_total', { channel: 'token', outcome: 'revoked' }), 20);
    assert.equal(counted.value('svc_users'), 1, 'a database gauge is taken once, not summed over workers');

    // A worker killed: a new one takes its place, and the service answers on both again. (A request handed to the
    // worker in the instant it died is lost with it, as with any crash.)
    const [victim] = children(primary.pid!);
    process.kill(victim!, 'SIGKILL');
    for (let i = 0; i < 100 && listening() < 3; i++) await sleep(50);
    assert.equal(listening(), 3, 'a replacement listens');
    for (let i = 0; i < 10; i++) assert.equal((await fetch(`${inst.url}/healthz`, { signal: AbortSignal.timeout(5000) })).status, 200);
    assert.match(log, /"event":"worker_died"/);
    assert.equal(children(primary.pid!).length, 2);

    primary.kill('SIGTERM');
    assert.equal(await exited, 0, log);
    assert.equal(children(primary.pid!).length, 0);
    assert.equal(log.trim().split('\n').at(-1)!.includes('"event":"stopped"'), true, log);
    t.diagnostic(`${runner.name}: two workers, a revocation refused by both at once, a killed worker replaced, SIGTERM clean`);
  } finally {
    // A failed assertion must not leave the primary and its workers running: the test file would never end.
    if (started?.pid !== undefined && started.exitCode === null && started.signalCode === null) {
      for (const pid of [...children(started.pid), started.pid]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    inst.remove();
  }
}
