import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT } from './helpers/workspace.ts';
import { SVC_NODE_FLAGS } from '../scripts/node-flags.ts';

/** Runs `npm start` until it prints its URL, checks /healthz, then stops it with SIGTERM. */
async function quickstart(dataDir: string, port: number): Promise<{ stdout: string; health: unknown; exit: number | null }> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PORT: String(port),
    SVC_DATA_DIR: dataDir,
  };
  const child = spawn('npm', ['start', '--silent'], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const deadline = Date.now() + 60_000;
    while (!stdout.includes('Stop with Ctrl-C')) {
      if (Date.now() > deadline || child.exitCode !== null) assert.fail(`npm start did not come up:\n${stdout}\n${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const health = await (await fetch(`http://127.0.0.1:${port}/healthz`)).json();
    process.kill(-child.pid!, 'SIGTERM');
    return { stdout, health, exit: await exited };
  } finally {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
  }
}

test('npm start brings up svc with example data, and a second run keeps it', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-quickstart-'));
  try {
    const first = await quickstart(dataDir, await freePort());
    assert.deepEqual(first.health, { status: 'ok' });
    assert.match(first.stdout, /svc is running at http:\/\/127\.0\.0\.1:\d+\/ +\(6 example items/);
    assert.match(first.stdout, /Sign in as "admin" with password: \S{12,}/);
    assert.match(first.stdout, /"Authorization": "Bearer svc_[a-z2-7]{48}"/);
    assert.match(first.stdout, /SVC_SESSION_SECRET is not set/);
    assert.match(first.stdout, /connect by URL alone .*: http:\/\/127\.0\.0\.1:\d+\/oauth\/mcp/);

    const second = await quickstart(dataDir, await freePort());
    assert.deepEqual(second.health, { status: 'ok' });
    assert.match(second.stdout, /The admin user exists from an earlier run/);
    assert.doesNotMatch(second.stdout, /with password:/);
    assert.match(second.stdout, /6 example items/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('npm start and npm run svc give node the flags svc runs with from source (scripts/node-flags.ts)', () => {
  const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  assert.ok(SVC_NODE_FLAGS.length > 0);
  for (const name of ['start', 'svc']) {
    // Node's own options come before the script it runs: a flag after the entry point would be the script's argument.
    const options = scripts[name]!.split(' --import tsx ')[0]!.split(/\s+/);
    for (const flag of SVC_NODE_FLAGS) assert.ok(options.includes(flag), `package.json's ${name} script lacks ${flag}`);
  }
});
