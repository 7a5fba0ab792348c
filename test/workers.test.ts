// svc serve --workers N from source; binary.test.ts runs the same on the executable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { request } from 'node:http';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { install, sourceRunner } from './helpers/installation.ts';
import { waitFor } from './helpers/wait.ts';
import { twoWorkers } from './helpers/workers.ts';
import { DEFAULT_AUTH, ROOT } from './helpers/workspace.ts';

test('serve --workers 2: shared socket and database, a dead worker replaced, SIGTERM ends all', (t) => twoWorkers(sourceRunner, t));

test("serve --workers 2: an upstream's rate holds for a person across both workers, not once per worker", async () => {
  const everything = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  const inst = await install(sourceRunner, {
    auth: `${DEFAULT_AUTH}\n[upstream ev]\ncommand = "${process.execPath}" "${everything}"\nreview = auto\ntools = echo\nrate = 3/m\n`,
  });
  const primary = spawn(
    ...(() => {
      const { file, args } = sourceRunner.command(['serve', '--workers', '2', '--config', `${inst.dir}/svc.ini`]);
      return [file, args] as const;
    })(),
    { env: inst.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  primary.stdout.on('data', (d) => (log += d));
  primary.stderr.on('data', (d) => (log += d));
  try {
    assert.equal((await inst.cli(['user', 'add', 'rita', '--email', 'rita@example.com'])).code, 0);
    const token = (await inst.cli(['token', 'create', 'rita', '--name', 'r'])).stdout.trim();
    await waitFor('both workers listening', async () => (log.match(/"event":"listening"/g) ?? []).length === 2, { everyMs: 100 });
    await waitFor('ev/echo found', async () => (await inst.cli(['tool', 'list'])).stdout.includes('ev\techo'), { everyMs: 300 });
    // Each call on a connection of its own (closed after the answer), so the workers take turns.
    const call = async () => {
      const r = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const body = JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'ev__echo', arguments: { message: 'hi' } },
        });
        const req = request(
          `${inst.url}/mcp`,
          {
            method: 'POST',
            agent: false,
            headers: {
              authorization: `Bearer ${token}`,
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              connection: 'close',
            },
          },
          (res) => {
            let text = '';
            res.on('data', (d) => (text += d));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
      assert.equal(r.status, 200, r.body);
      const result = (JSON.parse(r.body) as { result: CallToolResult }).result;
      return result.isError ? (result.content[0] as { text: string }).text : 'ok';
    };
    const answers: string[] = [];
    for (let i = 0; i < 8; i++) answers.push(await call());
    assert.equal(answers.filter((a) => a === 'ok').length, 3, answers.join('\n'));
    for (const refused of answers.filter((a) => a !== 'ok')) assert.match(refused, /^upstream "ev" rate_limited: .*try again in \d+ s$/);
  } finally {
    primary.kill('SIGTERM');
    await new Promise((r) => primary.once('exit', r));
    inst.remove();
  }
});
