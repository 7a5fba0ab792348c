// Traces (CONTRACT §8), with svc serving as a process and a real OTLP/HTTP receiver on loopback that decodes what it
// gets with OpenTelemetry's own protobuf definitions (helpers/otlp.ts), or as OTLP/JSON:
// - a 2025 and a 2026-07-28 tools/call, each to server-everything over HTTP (behind a proxy that writes down the
//   headers it carried) and to a stdio upstream (whose tool answers the `_meta` it got), each one trace under the
//   caller's traceparent (a header, or the request's `_meta`): svc's HTTP span, the authentication step, the MCP span,
//   database spans and the upstream's client span with the identity assertion's jti; the upstream got svc's
//   traceparent of that trace; the call's audit row carries the trace id;
// - refusals (401, 403, an unknown tool) are spans with an error status;
// - nothing secret in any exported span or resource: tokens, the session cookie, the password, arguments, document text;
// - OTLP/JSON as well; a receiver that never answers neither delays nor fails a request, and svc still stops;
// - with no exporter named, a serving svc never loads OpenTelemetry; a malformed setting is named by svc check.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as StableLineClient, StreamableHTTPClientTransport as StableLineTransport } from '@modelcontextprotocol/client';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { install, sourceRunner, type Installation, type Runner, type Serving } from './helpers/installation.ts';
import { startReceiver, type Receiver, type ReceivedSpan } from './helpers/otlp.ts';
import { countingProxy, startEverything } from './helpers/web-upstream.ts';
import { DEFAULT_AUTH, MAIN, ROOT, TSX } from './helpers/workspace.ts';
import { startSqld, type Sqld } from './helpers/sqld.ts';
import { waitFor } from './helpers/wait.ts';
import { Browser } from './helpers/http.ts';

const SDK = join(ROOT, 'node_modules/@modelcontextprotocol/sdk/dist/esm');

/** A 2025 stdio upstream whose `echo` answers the `_meta` it was called with. */
const STDIO = `
import { Server } from '${SDK}/server/index.js';
import { StdioServerTransport } from '${SDK}/server/stdio.js';
import { ListToolsRequestSchema, CallToolRequestSchema } from '${SDK}/types.js';
const server = new Server({ name: 'meta-echo', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'echo', description: 'Answers the _meta it got.', inputSchema: { type: 'object' } }] }));
server.setRequestHandler(CallToolRequestSchema, async (r) => ({ content: [{ type: 'text', text: JSON.stringify(r.params._meta ?? {}) }] }));
await server.connect(new StdioServerTransport());
`;

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

/** A caller's own trace context: a fresh trace id and span id. */
function callerContext(): { traceparent: string; traceId: string; spanId: string } {
  const traceId = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('hex');
  const spanId = Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString('hex');
  return { traceparent: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

/**
 * What a caller sends beside its traceparent that must never reach an upstream: its tracestate (the caller's own text)
 * and, in `_meta`, an identity assertion of its own making.
 */
const CALLER_STATE = 'caller=state-marker-Hv2';
const callerMeta = (traceparent: string) => ({ traceparent, tracestate: CALLER_STATE, 'svc/identity': 'forged-assertion-marker' });

const textOf = (r: unknown) => ((r as CallToolResult).content as { text: string }[])[0]!.text;

async function legacyClient(url: string, token: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } },
    }),
  );
  return client;
}

async function modernClient(url: string, token: string): Promise<Client> {
  const client = new StableLineClient({ name: 'agent', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new StableLineTransport(new URL(`${url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client as unknown as Client;
}

/** The span of `trace` that is `parent`'s child and matches. */
function childOf(spans: readonly ReceivedSpan[], parent: ReceivedSpan, match: (s: ReceivedSpan) => boolean): ReceivedSpan {
  const found = spans.filter((s) => s.parentSpanId === parent.spanId && match(s));
  assert.equal(found.length, 1, `one child of ${parent.name} matching, among ${spans.map((s) => s.name).join(', ')}`);
  return found[0]!;
}

/** The `jti` of a JWT, read without verifying (the upstream tests verify assertions). */
const jtiOf = (jwt: string) => (JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8')) as { jti: string }).jti;

interface AuditRow {
  action: string;
  target: string | null;
  trace_id: string | null;
}

describe('traces of requests and upstream calls, exported over OTLP/HTTP protobuf', () => {
  let receiver: Receiver;
  let everything: Awaited<ReturnType<typeof startEverything>>;
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  let inst: Installation;
  let serving: Serving;
  let dir: string;
  let token: string;
  const PASSWORD = 'alice password with-a-marker-7Qx';
  const DOCUMENT = 'the body of a labelled document, marker-Kd93';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-traces-'));
    writeFileSync(join(dir, 'echo.mjs'), STDIO);
    receiver = await startReceiver();
    everything = await startEverything();
    proxy = await countingProxy(everything.url);
    inst = await install(sourceRunner, {
      auth: `${DEFAULT_AUTH}
[upstream everything]
url = ${proxy.url}
tools = echo
review = auto
identity = jwt

[upstream local]
command = "${process.execPath}" "${join(dir, 'echo.mjs')}"
review = auto
identity = jwt

[upstream mine]
command = "${process.execPath}" "${join(dir, 'echo.mjs')}"
isolation = user
review = auto
identity = jwt
`,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'svc-under-test', OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
    assert.equal((await inst.cli(['migrate'])).code, 0);
    assert.equal((await inst.cli(['user', 'add', 'alice', '--email', 'alice@example.com', '--password-stdin'], `${PASSWORD}\n`)).code, 0);
    assert.equal((await inst.cli(['item', 'put', 'doc-1', '--title', 'Plan'], DOCUMENT)).code, 0);
    token = (await inst.cli(['token', 'create', 'alice', '--name', 'agent'])).stdout.trim();
    serving = await inst.serve();
    await waitFor(
      'every upstream listed, up',
      async () => {
        const listed = JSON.parse((await inst.cli(['upstream', 'list', '--json'])).stdout) as { state: string }[];
        return listed.length === 3 && listed.every((u) => u.state === 'up');
      },
      { everyMs: 300, timeoutMs: 60_000 },
    );
  });

  after(async () => {
    serving?.child.kill('SIGTERM');
    await serving?.exited;
    inst?.remove();
    await proxy?.stop();
    everything?.process.kill();
    await receiver?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const auditRows = async () => JSON.parse((await inst.cli(['audit', 'list', '--json'])).stdout) as AuditRow[];

  /**
   * The spans of one call's trace once its upstream span has come, and those of the HTTP request it came in: the same
   * trace when the caller sent a traceparent header, else the trace the MCP span links to.
   */
  async function traceOf(traceId: string, upstreamName: string): Promise<ReceivedSpan[]> {
    await receiver.spansOf(
      `the upstream span of ${upstreamName}`,
      (s) => s.traceId === traceId && s.attributes['svc.upstream.name'] === upstreamName,
    );
    const [mcp] = await receiver.spansOf(
      'the MCP span',
      (s) => s.traceId === traceId && s.name.startsWith('tools/call ') && s.kind === SERVER,
    );
    const httpTrace = mcp!.links[0]?.traceId ?? traceId;
    // The HTTP request's span ends after its answer: it may come in a later export.
    await receiver.spansOf('the HTTP span', (s) => s.traceId === httpTrace && s.attributes['http.route'] === '/mcp');
    return receiver.spans.filter((s) => s.traceId === traceId || s.traceId === httpTrace);
  }

  /** One trace: HTTP span under the caller's, auth step, MCP span, database and upstream spans; what reached the upstream. */
  function checkTrace(spans: readonly ReceivedSpan[], caller: { traceId: string; spanId: string }, via: 'header' | 'meta', tool: string) {
    const mcp = spans.find((s) => s.traceId === caller.traceId && s.attributes['mcp.method.name'] === 'tools/call' && s.kind === SERVER)!;
    // The client's other requests (initialize, its stream) carry the header too: the call's HTTP span is the one the
    // MCP span is under, or (continued from `_meta`) links to.
    const httpId = via === 'header' ? mcp.parentSpanId : mcp.links[0]?.spanId;
    const http = spans.find((s) => s.spanId === httpId)!;
    assert.ok(http, 'the HTTP span of the call');
    assert.equal(http.kind, SERVER);
    assert.equal(http.name, 'POST /mcp');
    assert.equal(http.attributes['http.request.method'], 'POST');
    assert.equal(http.attributes['http.response.status_code'], 200);
    assert.equal(http.attributes['user.id'], 'alice');
    assert.equal(http.attributes['svc.credential.kind'], 'token');
    assert.equal(http.resource['service.name'], 'svc-under-test');
    const auth = childOf(spans, http, (s) => s.name === 'svc.authenticate');
    assert.equal(auth.attributes['svc.credential.kind'], 'token');
    // Database time: the statements of the call's own work (a bearer lookup may be made together with another
    // request's, in that request's turn).
    const statements = spans.filter((s) => s.traceId === caller.traceId && s.attributes['db.operation.name'] !== undefined);
    assert.ok(statements.length > 0, 'database spans');
    for (const s of statements)
      assert.deepEqual([s.kind, s.name, s.attributes['db.system.name']], [CLIENT, s.attributes['db.operation.name'], 'sqlite']);
    assert.equal(mcp.name, `tools/call ${tool}`);
    assert.equal(mcp.attributes['gen_ai.tool.name'], tool);
    assert.equal(mcp.attributes['gen_ai.operation.name'], 'execute_tool');
    assert.equal(typeof mcp.attributes['jsonrpc.request.id'], 'string');
    if (via === 'header') {
      assert.equal(http.parentSpanId, caller.spanId, 'the HTTP span continues the caller traceparent header');
      assert.equal(mcp.parentSpanId, http.spanId);
    } else {
      assert.equal(mcp.parentSpanId, caller.spanId, "the MCP span continues the request's _meta traceparent");
      assert.deepEqual(mcp.links, [{ traceId: http.traceId, spanId: http.spanId }], 'and links to the HTTP span');
    }
    const upstream = childOf(spans, mcp, (s) => s.kind === CLIENT && s.attributes['mcp.method.name'] === 'tools/call');
    assert.equal(upstream.attributes['svc.upstream.outcome'], 'ok');
    assert.equal(upstream.attributes['gen_ai.tool.name'], 'echo');
    assert.match(String(upstream.attributes['svc.identity.jti']), /^[A-Za-z0-9_-]{16,}$/);
    assert.notEqual(upstream.status, ERROR);
    return upstream;
  }

  for (const era of ['2025', '2026-07-28'] as const) {
    test(`a ${era} tools/call to server-everything over HTTP: one trace, svc's traceparent and the assertion reached the upstream, the audit row names the trace`, async () => {
      const caller = callerContext();
      const before = proxy.carried.length;
      const client =
        era === '2025'
          ? await legacyClient(inst.url, token, { traceparent: caller.traceparent, tracestate: CALLER_STATE })
          : await modernClient(inst.url, token);
      try {
        const answer = await client.callTool({
          name: 'everything__echo',
          arguments: { message: 'argument-marker-Pz41' },
          _meta: era === '2025' ? { 'svc/identity': 'forged-assertion-marker' } : callerMeta(caller.traceparent),
        });
        assert.equal(textOf(answer), 'Echo: argument-marker-Pz41');
      } finally {
        await client.close();
      }
      const spans = await traceOf(caller.traceId, 'everything');
      const upstream = checkTrace(spans, caller, era === '2025' ? 'header' : 'meta', 'everything__echo');
      assert.equal(upstream.attributes['server.address'], '127.0.0.1');
      assert.equal(upstream.attributes['network.transport'], 'tcp');
      const call = proxy.carried.slice(before).find((c) => c.rpc === 'tools/call')!;
      assert.equal(
        call.traceparent,
        `00-${caller.traceId}-${upstream.spanId}-01`,
        "the upstream got svc's traceparent, under its client span",
      );
      assert.equal(jtiOf(call.identity!), upstream.attributes['svc.identity.jti'], "the span names the assertion's jti");
      assert.equal(call.tracestate, undefined, "the caller's tracestate does not reach the upstream");
      const row = (await auditRows()).find(
        (r) => r.action === 'upstream.call' && r.target === 'everything/echo' && r.trace_id === caller.traceId,
      );
      assert.ok(row, 'the call audit row carries the trace id');
    });

    for (const [upstreamName, kind] of [
      ['local', 'a shared'],
      ['mine', 'a per-person'],
    ] as const)
      test(`a ${era} tools/call to ${kind} stdio upstream: one trace, svc's traceparent reached it in _meta, the audit row names the trace`, async () => {
        const caller = callerContext();
        const client =
          era === '2025'
            ? await legacyClient(inst.url, token, { traceparent: caller.traceparent, tracestate: CALLER_STATE })
            : await modernClient(inst.url, token);
        let meta: Record<string, string>;
        try {
          const answer = await client.callTool({
            name: `${upstreamName}__echo`,
            arguments: { secret: 'argument-marker-Pz41' },
            _meta: era === '2025' ? { 'svc/identity': 'forged-assertion-marker' } : callerMeta(caller.traceparent),
          });
          meta = JSON.parse(textOf(answer)) as Record<string, string>;
        } finally {
          await client.close();
        }
        const spans = await traceOf(caller.traceId, upstreamName);
        const upstream = checkTrace(spans, caller, era === '2025' ? 'header' : 'meta', `${upstreamName}__echo`);
        assert.equal(upstream.attributes['network.transport'], 'pipe');
        assert.equal(meta.traceparent, `00-${caller.traceId}-${upstream.spanId}-01`);
        assert.equal(jtiOf(meta['svc/identity']!), upstream.attributes['svc.identity.jti']);
        // svc's traceparent and assertion (and for a 2026-07-28 call, held in rounds, svc's own progress token), and
        // nothing of the caller's `_meta` or tracestate.
        assert.deepEqual(
          Object.keys(meta).sort(),
          era === '2025' ? ['svc/identity', 'traceparent'] : ['progressToken', 'svc/identity', 'traceparent'],
        );
        const rows = await auditRows();
        assert.ok(rows.some((r) => r.action === 'upstream.call' && r.target === `${upstreamName}/echo` && r.trace_id === caller.traceId));
      });
  }

  test('refusals are spans with an error status: a bad token (401), a token without mcp (403), an unknown tool', async () => {
    const bad = callerContext();
    const refused = await fetch(`${inst.url}/mcp`, {
      method: 'POST',
      headers: {
        Authorization: 'Bearer svc_pat_not-a-real-token-marker-Zq8',
        traceparent: bad.traceparent,
        'content-type': 'application/json',
      },
      body: '{}',
    });
    assert.equal(refused.status, 401);
    const [unauthorized] = await receiver.spansOf('the 401', (s) => s.traceId === bad.traceId && s.kind === SERVER);
    assert.deepEqual(
      [unauthorized!.status, unauthorized!.attributes['error.type'], unauthorized!.attributes['http.response.status_code']],
      [ERROR, '401', 401],
    );
    const [step] = await receiver.spansOf('its authentication step', (s) => s.traceId === bad.traceId && s.name === 'svc.authenticate');
    assert.equal(step!.status, ERROR);

    const apiOnly = (await inst.cli(['token', 'create', 'alice', '--name', 'api', '--scopes', 'api'])).stdout.trim();
    const forbidden = callerContext();
    const answer = await fetch(`${inst.url}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiOnly}`, traceparent: forbidden.traceparent, 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(answer.status, 403);
    const [denied] = await receiver.spansOf('the 403', (s) => s.traceId === forbidden.traceId && s.kind === SERVER);
    assert.deepEqual([denied!.status, denied!.attributes['error.type']], [ERROR, '403']);

    for (const era of ['2025', '2026-07-28'] as const) {
      const caller = callerContext();
      const client =
        era === '2025' ? await legacyClient(inst.url, token, { traceparent: caller.traceparent }) : await modernClient(inst.url, token);
      try {
        await client
          .callTool({ name: 'nobody__nothing', arguments: {}, ...(era === '2025' ? {} : { _meta: { traceparent: caller.traceparent } }) })
          .catch(() => undefined);
      } finally {
        await client.close();
      }
      const [span] = await receiver.spansOf(
        `the ${era} unknown tool`,
        (s) => s.traceId === caller.traceId && s.name === 'tools/call nobody__nothing',
      );
      assert.equal(span!.status, ERROR, `${era}: ${JSON.stringify(span!.attributes)}`);
      assert.equal(span!.attributes['error.type'], era === '2025' ? 'tool_error' : '-32602');
    }
  });

  test("a caller's long names make short span names: a 1 MiB tool name, a 64 KiB method", async () => {
    const caller = callerContext();
    const long = `t${'x'.repeat(1024 * 1024)}`;
    const client = await legacyClient(inst.url, token, { traceparent: caller.traceparent });
    try {
      const answer = await client.callTool({ name: long, arguments: {} });
      assert.equal(answer.isError, true);
      await client.notification({ method: `notifications/${'y'.repeat(64 * 1024)}` });
    } finally {
      await client.close();
    }
    const [call] = await receiver.spansOf(
      'the call',
      (s) => s.traceId === caller.traceId && s.attributes['mcp.method.name'] === 'tools/call',
    );
    assert.equal(call!.name, 'tools/call');
    assert.equal(String(call!.attributes['gen_ai.tool.name']).length, 512);
    const [note] = await receiver.spansOf('the notification', (s) => s.traceId === caller.traceId && s.name === 'unknown');
    assert.equal(String(note!.attributes['mcp.method.name']).length, 512);
    assert.ok(
      receiver.spans.filter((s) => s.traceId === caller.traceId).every((s) => s.name.length <= 128),
      'every span name of the trace is short',
    );
  });

  test('nothing secret in what svc exports: no token, cookie, password, argument or document text', async () => {
    // A person signs in with the password and opens the token page; an agent reads the document.
    const browser = new Browser(inst.url);
    const signedIn = await browser.login('alice', PASSWORD);
    assert.equal(signedIn.status, 303);
    const cookie = [...browser.cookies.values()].join(';');
    assert.ok(cookie.length > 10);
    assert.equal((await browser.request('/auth/tokens')).status, 200);
    const client = await legacyClient(inst.url, token);
    try {
      const read = await client.callTool({ name: 'fetch', arguments: { id: 'doc-1' } });
      assert.ok(JSON.stringify(read).includes('marker-Kd93'), 'the document was read');
      await client.callTool({ name: 'search', arguments: { query: 'argument-marker-Pz41 labelled' } });
    } finally {
      await client.close();
    }
    await receiver.spansOf('the token page', (s) => s.attributes['http.route'] === '/auth/tokens');
    await receiver.spansOf('the fetch', (s) => s.name === 'tools/call fetch');
    assert.ok(receiver.spans.length > 20, `${receiver.spans.length} spans`);
    const exported = `${JSON.stringify(receiver.spans)}\n${receiver.bodies.join('\n')}`;
    for (const secret of [
      token,
      token.slice(-24),
      PASSWORD,
      cookie,
      ...cookie.split(';').map((c) => c.slice(-24)),
      'argument-marker-Pz41',
      'marker-Kd93',
      'marker-Zq8',
    ])
      assert.ok(!exported.includes(secret), `an exported span holds ${secret.slice(0, 12)}…`);
  });
});

/** svc from source with every module it resolves written to SVC_RESOLUTIONS_LOG (helpers/log-resolutions.mjs). */
const resolutionsLogged: Runner = {
  name: 'source, resolutions logged',
  command: (args) => ({
    file: process.execPath,
    args: ['--import', TSX, '--import', join(ROOT, 'test/helpers/log-resolutions.mjs'), MAIN, ...args],
  }),
};

/** A 2025 `whoami` with a traceparent header of a fresh trace; its context. */
async function whoami(url: string, token: string): Promise<ReturnType<typeof callerContext>> {
  const caller = callerContext();
  const client = await legacyClient(url, token, { traceparent: caller.traceparent });
  try {
    assert.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /alice/);
  } finally {
    await client.close();
  }
  return caller;
}

/** An installation with alice and her token, serving with `env`. */
async function serveWith(env: Record<string, string>, runner: Runner = sourceRunner, remote?: Sqld) {
  const inst = await install(runner, { env, ...(remote ? { remote: { url: remote.url, token: remote.token } } : {}) });
  assert.equal((await inst.cli(['migrate'])).code, 0);
  assert.equal(
    (await inst.cli(['user', 'add', 'alice', '--email', 'alice@example.com', '--password-stdin'], 'alice password 1\n')).code,
    0,
  );
  const token = (await inst.cli(['token', 'create', 'alice', '--name', 'agent'])).stdout.trim();
  const serving = await inst.serve();
  return {
    inst,
    serving,
    token,
    async stop(): Promise<number | null> {
      serving.child.kill('SIGTERM');
      const code = await serving.exited;
      inst.remove();
      return code;
    },
  };
}

describe('OTLP/JSON, a collector that never answers, and no exporter at all', () => {
  test('http/json to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, with a ratio sampler of 1: the trace continues the caller', async () => {
    const receiver = await startReceiver();
    const svc = await serveWith({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    try {
      const caller = await whoami(svc.inst.url, svc.token);
      const [mcp] = await receiver.spansOf('the MCP span', (s) => s.traceId === caller.traceId && s.name === 'tools/call whoami');
      const [http] = await receiver.spansOf('its HTTP span', (s) => s.spanId === mcp!.parentSpanId);
      assert.deepEqual(
        [http!.protocol, http!.parentSpanId, http!.attributes['http.route'], http!.resource['service.name']],
        ['json', caller.spanId, '/mcp', 'svc'],
      );
      assert.match(String(mcp!.attributes['mcp.protocol.version']), /^2025-\d\d-\d\d$/);
    } finally {
      assert.equal(await svc.stop(), 0);
      await receiver.close();
    }
  });

  test('a collector that takes the connection and never answers: every request is answered, and svc still stops', async () => {
    const receiver = await startReceiver({ hang: true });
    const svc = await serveWith({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '20',
      OTEL_BSP_MAX_QUEUE_SIZE: '64',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '16',
      OTEL_EXPORTER_OTLP_TIMEOUT: '600000',
    });
    try {
      await waitFor('an export under way, unanswered', async () => {
        await whoami(svc.inst.url, svc.token);
        return receiver.requests() > 0;
      });
      // Far more spans than the queue holds, while the collector holds the export: none of it reaches a request.
      const client = await legacyClient(svc.inst.url, svc.token);
      try {
        for (let i = 0; i < 60; i++) assert.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /alice/);
      } finally {
        await client.close();
      }
      assert.equal((await fetch(`${svc.inst.url}/healthz`)).status, 200);
    } finally {
      // The stop waits a bounded time for the last export, then exits cleanly.
      assert.equal(await svc.stop(), 0);
      assert.ok(receiver.requests() > 0);
      await receiver.close();
    }
  });

  test('with no exporter named, a serving svc never loads OpenTelemetry; with one, it does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-resolutions-'));
    const receiver = await startReceiver();
    try {
      const loaded: Record<string, string[]> = {};
      for (const [name, otel] of [
        ['off', {}],
        ['on', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }],
      ] as const) {
        const file = join(dir, `${name}.log`);
        writeFileSync(file, '');
        const svc = await serveWith({ ...otel, SVC_RESOLUTIONS_LOG: file }, resolutionsLogged);
        await whoami(svc.inst.url, svc.token);
        assert.equal(await svc.stop(), 0);
        const urls = readFileSync(file, 'utf8').split('\n');
        assert.ok(
          urls.some((u) => u.includes('/src/mcp/server.ts')),
          `${name}: the report works (the MCP layer was loaded)`,
        );
        loaded[name] = [
          ...new Set(
            urls
              .filter((u) => u.includes('/node_modules/@opentelemetry/'))
              .map((u) => u.split('/node_modules/')[1]!.split('/').slice(0, 2).join('/')),
          ),
        ];
      }
      assert.deepEqual(loaded.off, [], 'tracing off loads no OpenTelemetry module');
      for (const pkg of ['@opentelemetry/api', '@opentelemetry/sdk-trace', '@opentelemetry/exporter-trace-otlp-proto'])
        assert.ok(loaded.on!.includes(pkg), `tracing on loads ${pkg}: ${loaded.on!.join(', ')}`);
    } finally {
      await receiver.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a malformed tracing setting is named', () => {
  let inst: Installation;
  before(async () => {
    inst = await install(sourceRunner);
    assert.equal((await inst.cli(['migrate'])).code, 0);
  });
  after(() => inst?.remove());

  const CASES: [Record<string, string>, string][] = [
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL'],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json',
    ],
    [
      { OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20header-secret-marker,x-tenant' },
      'OTEL_EXPORTER_OTLP_HEADERS: entry 2 must be name=value',
    ],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }, 'OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1'],
    [{ OTEL_TRACES_SAMPLER: 'sometimes' }, 'OTEL_TRACES_SAMPLER must be one of'],
    [{ OTEL_BSP_MAX_QUEUE_SIZE: '-1' }, 'OTEL_BSP_MAX_QUEUE_SIZE must be a whole number from 1 to 65536'],
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, 'OTEL_TRACES_EXPORTER must be otlp or none'],
  ];

  test('svc check names the variable and what it must be, never a header value; svc serve refuses to start on it', async () => {
    for (const [env, message] of CASES) {
      Object.assign(inst.env, env);
      try {
        const checked = await inst.cli(['check']);
        assert.equal(checked.code, 78, `${JSON.stringify(env)}: ${checked.stderr}`);
        assert.ok(checked.stderr.includes(message), checked.stderr);
        assert.ok(!checked.stderr.includes('header-secret-marker'));
      } finally {
        for (const key of Object.keys(env)) delete inst.env[key];
      }
    }
    Object.assign(inst.env, CASES[1]![0]);
    const served = await inst.cli(['serve']);
    assert.equal(served.code, 78, served.stderr);
    assert.ok(served.stderr.includes(CASES[1]![1]));
    for (const key of Object.keys(CASES[1]![0])) delete inst.env[key];
    const valid = await inst.cli(['check']);
    assert.equal(valid.code, 0, valid.stderr);
  });
});

describe('the audit trail names the trace, on the file and on sqld', () => {
  for (const where of ['file', 'sqld'] as const)
    test(`${where}: a sign-in's audit row carries the trace id of its request; an untraced svc writes none`, async () => {
      const receiver = await startReceiver();
      const sqld = where === 'sqld' ? await startSqld({ auth: true }) : undefined;
      const svc = await serveWith({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' }, sourceRunner, sqld);
      try {
        const caller = callerContext();
        const signedIn = await new Browser(svc.inst.url).request('/login', {
          form: { username: 'alice', password: 'alice password 1' },
          headers: { traceparent: caller.traceparent },
        });
        assert.equal(signedIn.status, 303);
        const rows = JSON.parse((await svc.inst.cli(['audit', 'list', '--json'])).stdout) as AuditRow[];
        const traced = rows.filter((r) => r.trace_id === caller.traceId);
        assert.ok(traced.length > 0 && traced.every((r) => r.action.startsWith('login')), JSON.stringify(rows));
        const [span] = await receiver.spansOf(
          'the sign-in',
          (s) => s.traceId === caller.traceId && s.attributes['http.route'] === '/login',
        );
        assert.equal(span!.parentSpanId, caller.spanId);
        // The CLI's own actions (user add, token create) are in no request's trace.
        assert.ok(
          rows.filter((r) => r.action !== 'login' && !r.action.startsWith('login')).every((r) => r.trace_id === null),
          JSON.stringify(rows),
        );
      } finally {
        assert.equal(await svc.stop(), 0);
        await receiver.close();
        await sqld?.stop();
      }
    });
});
