// The MCP conformance suite's authorization-server scenarios (@modelcontextprotocol/conformance, run on the Node 24
// the project ships as a dev dependency) against a running svc: the metadata document, and a whole authorization
// code grant whose browser step is a person in headless Chromium signing in and pressing Allow. The suite's own
// verdict is asserted: its exit code and each scenario's checks as it saved them.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser as Chromium } from 'playwright-core';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { launchChromium } from './helpers/chromium.ts';
import { allowInChromium, type Person } from './helpers/consent.ts';
import { OAUTH_ON, freePort } from './helpers/workspace.ts';
import { exitWithin, NODE_24, SUITE, type Check } from './helpers/conformance.ts';

/** The suite waits up to five minutes for the browser step; a run that is not done by then has failed. */
const SUITE_LIMIT_MS = 90_000;

interface SuiteRun {
  code: number | null;
  output: string;
  /** scenario name -> the checks the suite saved for it */
  scenarios: Map<string, Check[]>;
  /** what the person saw in Chromium */
  consent: string | null;
}

const PETRA: Person = { uid: 'petra', password: 'petra password 1' };

/**
 * Runs `conformance authorization` against svc for `clientId` with its callback on `port`, and plays the person when
 * the suite prints the authorization URL.
 */
async function runSuite(s: TestServer, chromium: Chromium, clientId: string, port: number): Promise<SuiteRun> {
  const out = mkdtempSync(join(tmpdir(), 'svc-conformance-'));
  try {
    const args = [
      SUITE,
      'authorization',
      '--url',
      s.url,
      '--client-id',
      clientId,
      '--port',
      String(port),
      '--resource',
      `${s.url}/oauth/mcp`,
      '--output-dir',
      out,
    ];
    const child = spawn(NODE_24, args, {
      cwd: out,
      env: { PATH: process.env.PATH ?? '', HOME: out, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let browserStep: Promise<string | null> | null = null;
    const authorizeAt = `${s.url}/oauth/authorize?`;
    const onData = (d: Buffer) => {
      output += d;
      if (browserStep) return;
      const line = output.split('\n').find((l) => l.startsWith(authorizeAt));
      if (!line) return;
      browserStep = (async () => {
        const page = await chromium.newPage();
        try {
          return (await allowInChromium(page, line.trim(), PETRA, `http://127.0.0.1:${port}`)).consent;
        } finally {
          await page.close();
        }
      })();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (d: Buffer) => (output += d));
    const code = await exitWithin(child, SUITE_LIMIT_MS, 'the conformance suite', () => output);
    assert.ok(browserStep, `the suite never printed an authorization URL at ${authorizeAt}; its output:\n${output}`);
    const consent = await (browserStep as Promise<string | null>).catch((e: Error) =>
      assert.fail(`the browser step failed: ${e.message}\nsuite output:\n${output}`),
    );
    const scenarios = new Map<string, Check[]>();
    for (const dir of readdirSync(out)) {
      const name = /^authorization-server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(dir)?.[1];
      if (name) scenarios.set(name, JSON.parse(readFileSync(join(out, dir, 'checks.json'), 'utf8')) as Check[]);
    }
    return { code, output, scenarios, consent };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** Every scenario the suite ran, with each check's status (and why, when it did not pass). */
function verdicts(run: SuiteRun): Record<string, string[]> {
  return Object.fromEntries(
    [...run.scenarios].map(([name, checks]) => [
      name,
      checks.map((c) => `${c.id}: ${c.status}${c.errorMessage ? ` (${c.errorMessage})` : ''}`),
    ]),
  );
}

const PASSED = {
  'authorization-server-metadata-endpoint': ['authorization-server-metadata: SUCCESS', 'authorization-server-metadata-cimd: SUCCESS'],
  'authorization-code-grant': ['authorization-code-grant: SUCCESS'],
};

describe('the MCP conformance suite, authorization server scenarios', () => {
  let s: TestServer;
  let chromium: Chromium;
  before(async () => {
    s = await startTestServer({ auth: OAUTH_ON });
    await s.addUser({ uid: PETRA.uid, email: 'petra@example.com', password: PETRA.password });
    chromium = await launchChromium();
  });
  after(async () => {
    await chromium?.close();
    await s?.stop();
  });

  test('a public client the operator registered ahead with `svc oauth client add`', async () => {
    const port = await freePort();
    const added = await s.ws.svc(['oauth', 'client', 'add', 'Conformance suite', '--redirect-uri', `http://127.0.0.1:${port}/callback`]);
    assert.equal(added.code, 0, added.stderr);
    const clientId = /^client_id: (\S+)$/m.exec(added.stdout)?.[1];
    assert.ok(clientId, `no client_id in: ${added.stdout}`);
    const run = await runSuite(s, chromium, clientId, port);
    assert.deepEqual(verdicts(run), PASSED, run.output);
    assert.equal(run.code, 0, `the suite exited ${run.code}:\n${run.output}`);
    assert.equal(run.consent, 'Allow “Conformance suite” to use svc as petra?', 'the person was asked, by the name the operator gave');
  });

  test('a client that registered itself (RFC 7591), as most MCP clients do', async () => {
    const port = await freePort();
    const res = await fetch(`${s.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Conformance suite (self-registered)',
        redirect_uris: [`http://127.0.0.1:${port}/callback`],
        token_endpoint_auth_method: 'none',
      }),
    });
    const registered = (await res.json()) as { client_id?: string };
    assert.equal(res.status, 201, JSON.stringify(registered));
    assert.ok(registered.client_id);
    const run = await runSuite(s, chromium, registered.client_id, port);
    assert.deepEqual(verdicts(run), PASSED, run.output);
    assert.equal(run.code, 0, `the suite exited ${run.code}:\n${run.output}`);
    assert.equal(run.consent, 'Allow “Conformance suite (self-registered)” to use svc as petra?');
  });
});
