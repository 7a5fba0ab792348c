// The MCP conformance suite's server scenarios (@modelcontextprotocol/conformance, run on the Node 24 the project
// ships as a dev dependency) against a running svc, once for each protocol era: every scenario the suite has at
// 2025-11-25 (initialize and sessions) and every one at 2026-07-28 (no handshake: `_meta` on each request,
// `server/discover`). The suite cannot send a bearer token, so it reaches svc through a loopback proxy that adds one.
// The suite's own verdicts are asserted, per check as it saved them: every check passes except those listed below,
// which need the suite's fixture tools, prompts and resources (svc serves its own tools, whoami, search and fetch,
// and its documents as `svc://items/{id}`). A check that newly fails and one that newly passes both fail the test.
// The suite's extension scenarios (tasks-*, sep-2640-skills-*) belong to no era and are not run.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdirSync, readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { bearer } from './helpers/http.ts';
import { itemRecord } from './helpers/records.ts';
import { putItem } from '../src/store/items.ts';
import { exitWithin, NODE_24, SUITE, type Check } from './helpers/conformance.ts';

/** The suite runs an era's scenarios one after another (a few seconds in all), each within PER_SCENARIO_MS. */
const SUITE_LIMIT_MS = 75_000;
const PER_SCENARIO_MS = 10_000;

type Era = '2025-11-25' | '2026-07-28';

interface SuiteRun {
  code: number | null;
  output: string;
  /** scenario name -> the checks the suite saved for it */
  scenarios: Map<string, Check[]>;
}

interface BearerProxy {
  readonly url: string;
  /** where to forward and with which token: set once svc listens (svc's base_url is the proxy's address) */
  target: { port: number; token: string } | null;
  close(): Promise<void>;
}

/**
 * A loopback proxy in front of svc that adds `Authorization: Bearer <token>` to every request and forwards everything
 * else as it came (Host and Origin too, so the suite's DNS-rebinding probes reach svc as they were sent), and streams
 * each answer back as it arrives: an SSE answer or a listen stream event by event.
 */
async function startBearerProxy(): Promise<BearerProxy> {
  const server = createServer((req, res) => {
    if (!proxy.target) return void res.writeHead(503).end();
    const { port, token } = proxy.target;
    const headers: string[] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2)
      if (req.rawHeaders[i]!.toLowerCase() !== 'authorization') headers.push(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
    headers.push('Authorization', bearer(token).authorization!);
    const upstream = request({ host: '127.0.0.1', port, method: req.method, path: req.url, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, answer.rawHeaders);
      // A stream's headers go out before its first event, which may be a while coming.
      res.flushHeaders();
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    // The suite closing a request (or a stream it has read enough of) closes svc's side too.
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy: BearerProxy = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    target: null,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return proxy;
}

/**
 * Runs every server scenario the suite has at `era` against `url`, with `expected` as the suite's own baseline of
 * expected failures (so its exit code is its verdict on exactly those failing), and reads each scenario's checks.json.
 */
async function runSuite(url: string, era: Era, expected: string[]): Promise<SuiteRun> {
  const out = mkdtempSync(join(tmpdir(), 'svc-conformance-server-'));
  try {
    const baseline = join(out, 'expected-failures.yaml');
    // `<scenario>:<check>` per line; JSON strings are YAML scalars.
    writeFileSync(baseline, `server:\n${expected.map((key) => `  - ${JSON.stringify(key.replace(' › ', ':'))}\n`).join('')}`);
    const args = [SUITE, 'server', '--url', url, '--suite', 'all', '--spec-version', era, '--timeout', String(PER_SCENARIO_MS)];
    const child = spawn(NODE_24, [...args, '--expected-failures', baseline, '--output-dir', join(out, 'results')], {
      cwd: out,
      env: { PATH: process.env.PATH ?? '', HOME: out, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d));
    child.stderr.on('data', (d: Buffer) => (output += d));
    const code = await exitWithin(child, SUITE_LIMIT_MS, `the conformance suite (${era})`, () => output);
    const scenarios = new Map<string, Check[]>();
    for (const dir of readdirSync(join(out, 'results'))) {
      const name = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(dir)?.[1];
      if (name) scenarios.set(name, JSON.parse(readFileSync(join(out, 'results', dir, 'checks.json'), 'utf8')) as Check[]);
    }
    return { code, output, scenarios };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** A check that did not pass, as the suite's baseline judges one: a failure, or a warning (a SHOULD not met). */
const failed = (c: Check) => c.status === 'FAILURE' || c.status === 'WARNING';

/** `scenario › check` for every check that did not pass (a check id the suite repeats counts once). */
function failures(run: SuiteRun): string[] {
  const found = new Set<string>();
  for (const [name, checks] of run.scenarios) for (const c of checks.filter(failed)) found.add(`${name} › ${c.id}`);
  return [...found].sort();
}

/** What the suite said of each check that did not pass, for an assertion's message. */
function why(run: SuiteRun): string {
  const lines: string[] = [];
  for (const [name, checks] of [...run.scenarios].sort(([a], [b]) => a.localeCompare(b)))
    for (const c of checks.filter(failed)) lines.push(`${name} › ${c.id}: ${c.status}${c.errorMessage ? ` (${c.errorMessage})` : ''}`);
  return lines.join('\n');
}

const SCENARIOS_2025 = [
  ...['server-initialize', 'server-session-lifecycle', 'logging-set-level', 'ping', 'completion-complete', 'dns-rebinding-protection'],
  ...['tools-list', 'tools-call-simple-text', 'tools-call-image', 'tools-call-audio', 'tools-call-embedded-resource'],
  ...['tools-call-mixed-content', 'tools-call-with-logging', 'tools-call-error', 'tools-call-with-progress', 'tools-call-sampling'],
  ...['tools-call-elicitation', 'json-schema-2020-12', 'elicitation-sep1034-defaults', 'elicitation-sep1330-enums'],
  ...['server-sse-polling', 'server-sse-multiple-streams', 'resources-list', 'resources-read-text', 'resources-read-binary'],
  ...['resources-templates-read', 'resources-subscribe', 'resources-unsubscribe', 'prompts-list', 'prompts-get-simple'],
  ...['prompts-get-with-args', 'prompts-get-embedded-resource', 'prompts-get-with-image'],
];

const INPUT_REQUIRED = [
  ...['basic-elicitation', 'basic-sampling', 'basic-list-roots', 'request-state', 'multiple-input-requests', 'multi-round'],
  ...['missing-input-response', 'non-tool-request', 'result-type', 'unsupported-methods', 'tampered-state', 'capability-check'],
  ...['ignore-extra-params', 'validate-input'],
];

const SCENARIOS_2026 = [
  ...['server-stateless', 'completion-complete', 'tools-list', 'tools-call-simple-text', 'tools-call-image', 'tools-call-audio'],
  ...['tools-call-embedded-resource', 'tools-call-mixed-content', 'tools-call-error', 'tools-call-with-progress'],
  ...['json-schema-2020-12', 'server-sse-multiple-streams', 'resources-list', 'resources-read-text', 'resources-read-binary'],
  ...['resources-templates-read', 'sep-2164-resource-not-found', 'prompts-list', 'prompts-get-simple', 'prompts-get-with-args'],
  ...['prompts-get-embedded-resource', 'prompts-get-with-image', 'dns-rebinding-protection', 'caching', 'http-header-validation'],
  ...['http-custom-header-server-validation', ...INPUT_REQUIRED.map((s) => `input-required-result-${s}`)],
];

const tool = (name: string) => `calls the suite's fixture tool ${name}; svc serves whoami, search and fetch`;
const prompt = (name: string) => `gets the suite's fixture prompt ${name}; svc has prompts only from upstreams, none here`;
const resource = (uri: string) => `reads the suite's fixture resource ${uri}; svc's resources are svc://items/{id}`;

/** The checks of both eras that need the suite's own fixture tools, prompts and resources, which svc does not have. */
const FIXTURES_BOTH: Record<string, string> = {
  'json-schema-2020-12 › json-schema-2020-12-tool-found': tool('json_schema_2020_12_tool'),
  'prompts-get-embedded-resource › prompts-get-embedded-resource': prompt('test_prompt_with_embedded_resource'),
  'prompts-get-simple › prompts-get-simple': prompt('test_simple_prompt'),
  'prompts-get-with-args › prompts-get-with-args': prompt('test_prompt_with_arguments'),
  'prompts-get-with-image › prompts-get-with-image': prompt('test_prompt_with_image'),
  'resources-read-binary › resources-read-binary': resource('test://static-binary'),
  'resources-read-text › resources-read-text': resource('test://static-text'),
  'resources-templates-read › resources-templates-read': resource('test://template/123/data'),
  'tools-call-audio › tools-call-audio': tool('test_audio_content'),
  'tools-call-embedded-resource › tools-call-embedded-resource': tool('test_embedded_resource'),
  'tools-call-image › tools-call-image': tool('test_image_content'),
  'tools-call-mixed-content › tools-call-mixed-content': tool('test_multiple_content_types'),
  'tools-call-with-progress › tools-call-with-progress': tool('test_tool_with_progress'),
};

/**
 * Expected failures at 2025-11-25, `scenario › check` -> why. tools-call-simple-text and tools-call-error pass without
 * their fixture tools: the suite takes svc's `isError` "Tool … not found" result for the text and the error it wants.
 */
const EXPECTED_2025: Record<string, string> = {
  ...FIXTURES_BOTH,
  'elicitation-sep1034-defaults › elicitation-sep1034-general': tool('test_elicitation_sep1034_defaults'),
  'elicitation-sep1330-enums › elicitation-sep1330-general': tool('test_elicitation_sep1330_enums'),
  'logging-set-level › logging-set-level': 'svc sends no log messages and declares no logging, so logging/setLevel is not found',
  'resources-subscribe › resources-subscribe':
    'subscribes to the fixture test://watched-resource; svc offers subscriptions to upstreams’ resources only, and has no upstream here',
  'resources-unsubscribe › resources-unsubscribe':
    'unsubscribes from the fixture test://watched-resource; svc offers subscriptions to upstreams’ resources only, and has no upstream here',
  'tools-call-elicitation › tools-call-elicitation': tool('test_elicitation'),
  'server-sse-polling › incoming-sse-event': tool('test_reconnection'),
  'server-sse-polling › server-sse-priming-event':
    'svc keeps no event store: a call answered on a stream ends with its answer, so there is no priming event to resume from',
  'server-sse-polling › server-sse-retry-field':
    'svc keeps no event store, so it names no retry interval for a reconnection it could not resume',
  'tools-call-sampling › tools-call-sampling': tool('test_sampling'),
  'tools-call-with-logging › tools-call-with-logging': `${tool('test_tool_with_logging')}, after logging/setLevel`,
};

/**
 * Expected failures at 2026-07-28, `scenario › check` -> why: only what needs the suite's fixtures (read from each
 * scenario's source; a reference SDK v2 server with svc's tools and resources fails the same). An unknown tool is a
 * protocol error (-32602) as the specification says, so tools-call-simple-text and tools-call-error fail here too
 * (and input-required-result-validate-input, which wants an error for malformed answers, passes). Not listed as svc
 * declares no tools.listChanged without upstreams, so the suite skips it: the check
 * `server-stateless › sep-2575-server-sends-tools-list-changed-on-subscription`, which would warn (it changes the
 * tool list with the fixture tool test_trigger_tool_change).
 */
const EXPECTED_2026: Record<string, string> = {
  ...FIXTURES_BOTH,
  ...Object.fromEntries(
    [
      'sep-2243-server-no-xmcp-tool',
      'sep-2243-server-decode-base64',
      'sep-2243-server-validate-param-match',
      'sep-2243-server-reject-invalid-param-chars',
      'sep-2243-server-reject-param-mismatch',
    ].map((check) => [
      `http-custom-header-server-validation › ${check}`,
      'needs a tool with an x-mcp-header (Mcp-Param-*) argument; none of svc’s tools has one',
    ]),
  ),
  'input-required-result-basic-elicitation › sep-2322-elicitation-incomplete': tool('test_input_required_result_elicitation'),
  'input-required-result-basic-list-roots › sep-2322-list-roots-incomplete': tool('test_input_required_result_list_roots'),
  'input-required-result-basic-sampling › sep-2322-sampling-incomplete': tool('test_input_required_result_sampling'),
  'input-required-result-capability-check › sep-2322-respect-client-capabilities': tool('test_input_required_result_capabilities'),
  'input-required-result-ignore-extra-params › sep-2322-ignore-unexpected-params': tool('test_input_required_result_elicitation'),
  'input-required-result-missing-input-response › sep-2322-missing-response-rerequests': tool('test_input_required_result_elicitation'),
  'input-required-result-multi-round › sep-2322-multi-round-r1': tool('test_input_required_result_multi_round'),
  'input-required-result-multiple-input-requests › sep-2322-multiple-inputs-incomplete': tool('test_input_required_result_multiple_inputs'),
  'input-required-result-non-tool-request › sep-2322-non-tool-incomplete': prompt('test_input_required_result_prompt'),
  'input-required-result-request-state › sep-2322-request-state-incomplete': tool('test_input_required_result_request_state'),
  'input-required-result-result-type › sep-2322-result-type-included': tool('test_input_required_result_elicitation'),
  'input-required-result-tampered-state › sep-2322-reject-tampered-state': tool('test_input_required_result_tampered_state'),
  'server-stateless › sep-2575-server-rejects-undeclared-capability': tool('test_missing_capability'),
  'server-stateless › sep-2575-missing-capability-http-400': tool('test_missing_capability'),
  'server-stateless › sep-2575-http-server-no-independent-requests-on-stream': tool('test_streaming_elicitation'),
  'server-stateless › sep-2575-server-no-log-without-loglevel': tool('test_logging_tool'),
  'tools-call-error › tools-call-error': tool('test_error_handling'),
  'tools-call-simple-text › tools-call-simple-text': tool('test_simple_text'),
};

/**
 * Scenarios that judge nothing at 2025-11-25 (every check INFO or SKIPPED), scenario -> why: none. (server-sse-polling
 * judged nothing while svc answered every POST in JSON; a call from a client that declares what an upstream may ask of
 * the person is now answered on a stream.)
 */
const INAPPLICABLE_2025: Record<string, string> = {};

interface Expectations {
  scenarios: string[];
  /** `scenario › check` -> why it cannot pass against svc */
  failures: Record<string, string>;
  /** scenario -> why it judges nothing against svc */
  inapplicable: Record<string, string>;
}

async function assertEra(proxy: BearerProxy, era: Era, expected: Expectations): Promise<void> {
  const run = await runSuite(`${proxy.url}/mcp`, era, Object.keys(expected.failures));
  assert.deepEqual(
    [...run.scenarios.keys()].sort(),
    [...expected.scenarios].sort(),
    `the scenarios the suite ran at ${era}:\n${run.output}`,
  );
  const judgedNothing = [...run.scenarios].filter(([, checks]) => !checks.some((c) => c.status === 'SUCCESS' || c.status === 'FAILURE'));
  assert.deepEqual(
    judgedNothing.map(([name]) => name).sort(),
    Object.keys(expected.inapplicable).sort(),
    `the scenarios that judged nothing at ${era}: ${JSON.stringify(judgedNothing)}`,
  );
  assert.deepEqual(failures(run), Object.keys(expected.failures).sort(), `the checks that did not pass at ${era}:\n${why(run)}`);
  assert.equal(run.code, 0, `the suite, given the same expected failures, exited ${run.code}:\n${run.output}`);
}

/** The JSON-RPC answer to request `id`, whether svc answered with JSON or with an SSE stream. */
interface RpcAnswer {
  id?: unknown;
  result?: Record<string, unknown>;
  error?: unknown;
}

async function rpcAnswer(res: Response, id: number): Promise<RpcAnswer> {
  const text = await res.text();
  if (!/^text\/event-stream\b/.test(res.headers.get('content-type') ?? '')) return JSON.parse(text);
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
      .join('\n');
    const message = data ? (JSON.parse(data) as RpcAnswer) : null;
    if (message?.id === id) return message;
  }
  assert.fail(`no answer to request ${id} in the stream:\n${text}`);
}

describe('the MCP conformance suite, server scenarios (through a proxy that adds a token)', () => {
  let s: TestServer;
  let proxy: BearerProxy;
  let token: string;
  before(async () => {
    proxy = await startBearerProxy();
    // svc answers at the proxy's address, so the Origin the suite sends there is svc's own.
    s = await startTestServer({ baseUrl: proxy.url });
    const user = await s.addUser({ uid: 'conformance', email: 'conformance@example.com', name: 'Conformance suite' });
    token = await s.tokenFor(user);
    // One document, so resources/list and resources/read have something to show.
    await s.database.write((tx) => putItem(tx, 'handbook', itemRecord({ title: 'Handbook', text: 'How we work.' })));
    proxy.target = { port: s.ws.port, token };
  });
  after(async () => {
    await proxy?.close();
    await s?.stop();
  });

  test('2025-11-25: every check passes but those that need the suite’s fixtures', async () => {
    await assertEra(proxy, '2025-11-25', { scenarios: SCENARIOS_2025, failures: EXPECTED_2025, inapplicable: INAPPLICABLE_2025 });
  });

  test('2026-07-28: every check passes but those that need the suite’s fixtures', async () => {
    await assertEra(proxy, '2026-07-28', { scenarios: SCENARIOS_2026, failures: EXPECTED_2026, inapplicable: {} });
  });

  // Claude Code 2.1.33x opens with server/discover at 2026-07-28 (and falls back to initialize on a 400).
  test('Claude Code’s first request, server/discover at 2026-07-28: served with a token, 401 as at 2025 without', async () => {
    const discover = {
      jsonrpc: '2.0',
      id: 1,
      method: 'server/discover',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'claude-code', version: '2.1.332' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    };
    const headers = {
      'MCP-Protocol-Version': '2026-07-28',
      'Mcp-Method': 'server/discover',
      Accept: 'application/json, text/event-stream',
      'Content-Type': 'application/json',
    };
    const post = (extra: Record<string, string>, body: unknown) =>
      fetch(`${s.url}/mcp`, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });

    const served = await post(bearer(token), discover);
    const answer = await rpcAnswer(served, 1);
    assert.equal(served.status, 200, JSON.stringify(answer));
    const versions = answer.result?.supportedVersions;
    assert.ok(Array.isArray(versions) && versions.includes('2026-07-28'), `no 2026-07-28 in ${JSON.stringify(answer)}`);

    const anonymous = await post({}, discover);
    const anonymous2025 = await fetch(`${s.url}/mcp`, {
      method: 'POST',
      headers: { Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'claude-code', version: '2.1.332' } },
      }),
    });
    assert.equal(anonymous2025.status, 401);
    assert.equal(anonymous.status, 401, await anonymous.text());
    assert.ok(anonymous.headers.get('www-authenticate'));
    assert.equal(anonymous.headers.get('www-authenticate'), anonymous2025.headers.get('www-authenticate'));
  });
});
