// The single executable: built from this checkout, copied alone into an empty folder, and run with only a
// svc.ini and its environment, as an operator would.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  mkdtempSync,
  mkdirSync,
  copyFileSync,
  writeFileSync,
  rmSync,
  readdirSync,
  readFileSync,
  openSync,
  writeSync,
  closeSync,
  chownSync,
  chmodSync,
  symlinkSync,
  lstatSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as StableLineClient, StreamableHTTPClientTransport as StableLineTransport } from '@modelcontextprotocol/client';
import { ROOT, freePort, newSecret, DEFAULT_AUTH } from './helpers/workspace.ts';
import { binaryRunner } from './helpers/installation.ts';
import { lockedDatabase, crashRounds, cliBesideServer } from './helpers/durability.ts';
import { twoWorkers } from './helpers/workers.ts';
import { startReceiver } from './helpers/otlp.ts';

const run = promisify(execFile);
let work: string;
let binary: string;
let env: Record<string, string>;

function config(dir: string, port: number, db = 'svc.db'): string {
  const path = join(dir, `svc-${port}.ini`);
  writeFileSync(
    path,
    `[server]\nlisten = 127.0.0.1:${port}\nbase_url = http://127.0.0.1:${port}\ndatabase = file:${join(dir, db)}\n[auth]\n${DEFAULT_AUTH}`,
  );
  return path;
}

async function svc(
  args: string[],
  options: { stdin?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { cwd: join(work, 'app'), env: { ...env, ...options.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(options.stdin ?? '');
  });
}

function serve(configPath: string, extraEnv: Record<string, string> = {}) {
  const child = spawn(binary, ['serve', '--config', configPath], {
    cwd: join(work, 'app'),
    env: { ...env, ...extraEnv },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, log: () => log };
}

async function healthy(port: number, deadline = Date.now() + 15_000): Promise<void> {
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no healthy svc on ${port}`);
}

describe('svc as a single executable', () => {
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'svc-binary-'));
    await run(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/build-binary.ts'), '--out', join(work, 'build')], {
      cwd: ROOT,
      timeout: 300_000,
    });
    mkdirSync(join(work, 'app'));
    mkdirSync(join(work, 'home'));
    binary = join(work, 'app', 'svc');
    copyFileSync(join(work, 'build', 'svc'), binary);
    // Nothing but the environment an operator gives it; NODE_OPTIONS would break a binary that honoured it.
    env = {
      PATH: '/nonexistent',
      HOME: join(work, 'home'),
      SVC_SESSION_SECRET: newSecret(),
      NODE_OPTIONS: '--require /nonexistent/preload.js',
    };
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('--version prints the version and the build commit', async () => {
    const r = await svc(['--version']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout.trim(), /^svc 0\.1\.0 \(build [0-9a-f]{12}(-dirty)?\)$/);
    assert.equal(readdirSync(join(work, 'app')).join(','), 'svc', 'the binary is alone in its folder');
  });

  test('check with a bad config exits 78 and lists the problems', async () => {
    const bad = join(work, 'app', 'bad.ini');
    writeFileSync(bad, '[server]\nlisten = nowhere\n[auth]\noidc\n    enabled true\n');
    const r = await svc(['check', '--config', bad]);
    assert.equal(r.code, 78);
    assert.match(r.stderr, /^svc: config: server\.listen: "nowhere" is not host:port/m);
    assert.match(r.stderr, /^svc: config: auth\.oidc\.issuer: required when oidc is enabled$/m);
  });

  test('every CLI command works as from source, then serve, /healthz, MCP whoami, and a clean SIGTERM', async () => {
    const port = await freePort();
    const cfg = config(join(work, 'app'), port);
    const ok = async (args: string[], stdin?: string) => {
      const r = await svc([...args, '--config', cfg], stdin === undefined ? {} : { stdin });
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    assert.match(await ok(['check']), /is valid/);
    await ok(['migrate']);
    await ok(['user', 'add', 'ops', '--email', 'ops@example.com', '--labels', 'eng', '--admin', '--password-stdin'], 'binary password 1\n');
    await ok(['user', 'set', 'ops', '--name', 'Operator']);
    await ok(['item', 'put', 'docs/binary', '--title', 'Binary', '--labels', 'eng'], 'built into one file');
    mkdirSync(join(work, 'app', 'import'));
    writeFileSync(join(work, 'app', 'import', 'note.md'), '---\ntitle: Note\n---\nimported text');
    assert.match(await ok(['item', 'import', join(work, 'app', 'import')]), /imported 1 item/);
    assert.deepEqual(
      JSON.parse(await ok(['item', 'list', '--json'])).map((i: { id: string }) => i.id),
      ['docs/binary', 'note'],
    );
    assert.equal(JSON.parse(await ok(['user', 'list', '--json']))[0].name, 'Operator');
    const token = (await ok(['token', 'create', 'ops', '--name', 'smoke'])).trim();
    assert.match(token, /^svc_[a-z2-7]{48}$/);
    await ok(['item', 'remove', 'note']);
    await ok(['user', 'add', 'temp', '--email', 'temp@example.com']);
    await ok(['user', 'remove', 'temp']);

    const server = serve(cfg);
    try {
      await healthy(port);
      const client = new Client({ name: 'binary-smoke', version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      const who = (await client.callTool({ name: 'whoami', arguments: {} })) as unknown as {
        structuredContent: { uid: string; labels: string[] };
      };
      assert.deepEqual([who.structuredContent.uid, who.structuredContent.labels], ['ops', ['eng']]);
      const found = (await client.callTool({ name: 'search', arguments: { query: 'one file' } })) as unknown as {
        structuredContent: { results: { id: string }[] };
      };
      assert.deepEqual(
        found.structuredContent.results.map((r) => r.id),
        ['docs/binary'],
      );
      await client.close();
      // The 2026-07-28 era inside the binary too (the SDK's stable line, run by Node 24 there).
      const modern = new StableLineClient({ name: 'binary-smoke', version: '2' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
      await modern.connect(
        new StableLineTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      assert.equal(modern.getProtocolEra(), 'modern');
      const whoModern = (await modern.callTool({ name: 'whoami', arguments: {} })) as unknown as { structuredContent: { uid: string } };
      assert.equal(whoModern.structuredContent.uid, 'ops');
      await modern.close();
      const login = await fetch(`http://127.0.0.1:${port}/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { origin: `http://127.0.0.1:${port}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'username=ops&password=binary+password+1',
      });
      assert.equal(login.status, 303, 'argon2 works inside the binary');
    } finally {
      server.child.kill('SIGTERM');
    }
    assert.equal(await server.exited, 0);
    assert.match(server.log(), /"event":"stopped"/);
  });

  test('guards an HTTP and a stdio upstream: tools discovered, approved, called; identity assertions signed inside the binary', async () => {
    const port = await freePort();
    const upstreamPort = await freePort();
    const sdk = join(ROOT, 'node_modules/@modelcontextprotocol/sdk/dist/esm');
    // Not beside the database (work/app): its folder is hidden from every stdio child.
    const kit = join(work, 'kit.mjs');
    writeFileSync(
      kit,
      `import { Server } from '${sdk}/server/index.js';
import { StdioServerTransport } from '${sdk}/server/stdio.js';
import { ListToolsRequestSchema, CallToolRequestSchema } from '${sdk}/types.js';
const server = new Server({ name: 'kit', version: '1' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'meta', description: 'Answers its _meta.', inputSchema: { type: 'object' } }] }));
server.setRequestHandler(CallToolRequestSchema, async (r) => ({ content: [{ type: 'text', text: JSON.stringify(r.params._meta ?? {}) }] }));
await server.connect(new StdioServerTransport());
`,
    );
    const everything = spawn(
      process.execPath,
      [join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'streamableHttp'],
      {
        env: { ...process.env, PORT: String(upstreamPort) },
        stdio: 'ignore',
      },
    );
    const cfg = config(join(work, 'app'), port, 'upstreams.db');
    writeFileSync(
      cfg,
      `${readFileSync(cfg, 'utf8')}\n[upstream everything]\nurl = http://127.0.0.1:${upstreamPort}/mcp\nreview = auto\ntools = echo\n` +
        `[upstream kit]\ncommand = "${process.execPath}" "${kit}"\nreview = auto\nidentity = jwt\n`,
    );
    const server = serve(cfg);
    try {
      await healthy(port);
      const ok = async (args: string[]) => {
        const r = await svc([...args, '--config', cfg]);
        assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
        return r.stdout;
      };
      await ok(['user', 'add', 'ops', '--email', 'ops@example.com']);
      const token = (await ok(['token', 'create', 'ops', '--name', 'upstreams'])).trim();
      const deadline = Date.now() + 30_000;
      while (!/kit\tmeta\tapproved/.test(await ok(['tool', 'list'])) || !/everything\techo\tapproved/.test(await ok(['tool', 'list']))) {
        assert.ok(Date.now() < deadline, `tools not discovered: ${server.log().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 250));
      }
      const client = new Client({ name: 'binary-upstreams', version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      const echoed = (await client.callTool({ name: 'everything__echo', arguments: { message: 'through the binary' } })) as {
        content: { text: string }[];
      };
      assert.match(echoed.content[0]!.text, /through the binary/);
      const meta = (await client.callTool({ name: 'kit__meta', arguments: {} })) as { content: { text: string }[] };
      const assertion = (JSON.parse(meta.content[0]!.text) as Record<string, string>)['svc/identity']!;
      const kid = (JSON.parse(Buffer.from(assertion.split('.')[0]!, 'base64url').toString()) as { kid: string }).kid;
      await client.close();
      const jwks = (await (await fetch(`http://127.0.0.1:${port}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
      assert.deepEqual(
        jwks.keys.map((k) => k.kid),
        [kid],
      );
    } finally {
      server.child.kill('SIGTERM');
      everything.kill();
    }
    assert.equal(await server.exited, 0);
  });

  test('traces from inside the binary: the OpenTelemetry SDK and both OTLP/HTTP encodings are bundled and export a call', async () => {
    const port = await freePort();
    const cfg = config(join(work, 'app'), port, 'traces.db');
    const ok = async (args: string[]) => {
      const r = await svc([...args, '--config', cfg]);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    await ok(['migrate']);
    await ok(['user', 'add', 'ops', '--email', 'ops@example.com']);
    const token = (await ok(['token', 'create', 'ops', '--name', 'traces'])).trim();
    const receiver = await startReceiver();
    try {
      for (const [protocol, encoding] of [
        ['http/protobuf', 'protobuf'],
        ['http/json', 'json'],
      ] as const) {
        const traceId = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('hex');
        const spanId = Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString('hex');
        const server = serve(cfg, {
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
          OTEL_BSP_SCHEDULE_DELAY: '100',
        });
        try {
          await healthy(port).catch((e: Error) => assert.fail(`${e.message}: ${server.log()}`));
          const client = new Client({ name: 'binary-traces', version: '1' });
          await client.connect(
            new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
              requestInit: { headers: { authorization: `Bearer ${token}`, traceparent: `00-${traceId}-${spanId}-01` } },
            }),
          );
          const who = (await client.callTool({ name: 'whoami', arguments: {} })) as unknown as { structuredContent: { uid: string } };
          assert.equal(who.structuredContent.uid, 'ops');
          await client.close();
          const [mcp] = await receiver.spansOf(
            `the ${protocol} MCP span`,
            (s) => s.traceId === traceId && s.attributes['mcp.method.name'] === 'tools/call',
          );
          // The HTTP span ends after its answer: it may come in a later export than the MCP span under it.
          const [http] = await receiver.spansOf(`the ${protocol} HTTP span`, (s) => s.spanId === mcp!.parentSpanId);
          assert.deepEqual(
            [http!.traceId, http!.kind, http!.name, http!.attributes['http.route'], http!.parentSpanId],
            [traceId, 2, 'POST /mcp', '/mcp', spanId],
            'the server span of the call continues the traceparent header',
          );
          assert.deepEqual([mcp!.kind, mcp!.name, mcp!.attributes['gen_ai.tool.name']], [2, 'tools/call whoami', 'whoami']);
          for (const span of [mcp!, http!]) {
            assert.equal(span.protocol, encoding, `exported as ${protocol}`);
            assert.equal(span.resource['service.name'], 'svc');
          }
        } finally {
          server.child.kill('SIGTERM');
        }
        assert.equal(await server.exited, 0, server.log());
        assert.match(server.log(), new RegExp(`"event":"tracing".*"protocol":"${protocol}"`), 'svc loaded the SDK and said so');
        assert.doesNotMatch(server.log(), /tracing_export_failed/);
      }
    } finally {
      await receiver.close();
    }
  });

  test('several copies started at once on an empty cache all come up', async () => {
    const cache = join(work, 'fresh-cache');
    const ports = await Promise.all([1, 2, 3, 4].map(() => freePort()));
    const servers = ports.map((port, i) => serve(config(join(work, 'app'), port, `copy${i}.db`), { SVC_CACHE_DIR: cache }));
    try {
      await Promise.all(ports.map((port) => healthy(port)));
    } finally {
      for (const s of servers) s.child.kill('SIGTERM');
    }
    for (const s of servers) assert.equal(await s.exited, 0, s.log());
    const [build] = readdirSync(cache);
    // Only the database's native addon is unpacked: migrations are read from the executable itself, argon2 is
    // loaded at the first password check, and no temporary files stay.
    assert.deepEqual(readdirSync(join(cache, build!)).sort(), ['libsql.node']);
  });

  test('an unusable cache override falls back; a tampered cached addon is replaced before it is loaded', async () => {
    const blocked = join(work, 'app', 'not-a-dir');
    writeFileSync(blocked, 'a file, not a folder');
    const r = await svc(['migrate', '--config', config(join(work, 'app'), await freePort(), 'fallback.db')], {
      env: { SVC_CACHE_DIR: blocked },
    });
    assert.equal(r.code, 0, r.stderr);

    const cache = join(work, 'tamper-cache');
    const cfg = config(join(work, 'app'), await freePort(), 'tamper.db');
    assert.equal((await svc(['migrate', '--config', cfg], { env: { SVC_CACHE_DIR: cache } })).code, 0);
    const [build] = readdirSync(cache);
    // Overwrite the ELF header: loading this file unchecked would fail.
    const fd = openSync(join(cache, build!, 'libsql.node'), 'r+');
    writeSync(fd, Buffer.from('tampered'), 0, 8, 0);
    closeSync(fd);
    const again = await svc(['user', 'list', '--config', cfg], { env: { SVC_CACHE_DIR: cache } });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(
      readFileSync(join(cache, build!, 'libsql.node'))
        .subarray(0, 4)
        .toString('latin1'),
      '\x7fELF',
      'the damaged copy was replaced in place',
    );
  });

  test('only a private folder holds code it loads: another owner, mode 0777 and a symlinked folder are refused, a symlinked file replaced', async () => {
    const cfg = config(join(work, 'app'), await freePort(), 'private.db');
    const home = join(work, 'private-home');
    mkdirSync(home);
    const run = (cacheDir: string, extra: Record<string, string> = {}) =>
      svc(['migrate', '--config', cfg], { env: { SVC_CACHE_DIR: cacheDir, HOME: home, ...extra } });
    const homeCache = join(home, '.cache', 'svc');
    const planted = () => readdirSync(join(work, 'hostile'), { recursive: true }).length;

    mkdirSync(join(work, 'hostile'));
    const foreign = join(work, 'hostile', 'foreign');
    mkdirSync(foreign, { mode: 0o700 });
    chownSync(foreign, 65534, 65534);
    const open = join(work, 'hostile', 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    const target = join(work, 'hostile', 'target');
    mkdirSync(target, { mode: 0o700 });
    const linked = join(work, 'hostile', 'linked');
    symlinkSync(target, linked);
    const before = planted();
    for (const refused of [foreign, open, linked]) {
      rmSync(homeCache, { recursive: true, force: true });
      const r = await run(refused);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(readdirSync(homeCache).length, 1, `${refused}: fell back to the next folder`);
    }
    assert.equal(planted(), before, 'nothing was written into a refused folder');

    // A cached addon replaced by a link to someone else's file: replaced by a checked copy before loading.
    const [build] = readdirSync(homeCache);
    const addon = join(homeCache, build!, 'libsql.node');
    const evil = join(work, 'hostile', 'evil.node');
    writeFileSync(evil, 'not the addon');
    rmSync(addon);
    symlinkSync(evil, addon);
    const r = await run(foreign);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!lstatSync(addon).isSymbolicLink(), 'a regular file now');
    assert.equal(readFileSync(addon).subarray(0, 4).toString('latin1'), '\x7fELF');
    assert.equal(readFileSync(evil, 'utf8'), 'not the addon', 'the link target was not written through');

    // Nothing usable but the temporary directory: a fresh private folder there, removed at exit.
    const tmp = join(work, 'tmp');
    mkdirSync(tmp);
    const viaTemp = await svc(['migrate', '--config', cfg], { env: { SVC_CACHE_DIR: open, HOME: foreign, TMPDIR: tmp } });
    assert.equal(viaTemp.code, 0, viaTemp.stderr);
    assert.deepEqual(readdirSync(tmp), [], 'the private temporary folder is gone');
    // Nothing usable at all: one line that says what to do.
    const none = await svc(['migrate', '--config', cfg], {
      env: { SVC_CACHE_DIR: open, HOME: foreign, TMPDIR: join(work, 'nonexistent') },
    });
    assert.equal(none.code, 1);
    assert.match(
      none.stderr,
      /^svc migrate: no private folder to unpack native code into \(set SVC_CACHE_DIR to a folder only this user can write/,
    );
    assert.equal(none.stderr.trim().split('\n').length, 1, none.stderr);
  });

  // CONTRACT §5 "Durability", the same scenarios as test/durability.test.ts, on the executable.
  test('durability: a write lock held past the busy wait gives 503 and no change; afterwards every 2xx is committed', (t) =>
    lockedDatabase(binaryRunner(binary), t));
  test('durability: 20 rounds of kill -9 under concurrent writes lose nothing acknowledged', (t) =>
    crashRounds(binaryRunner(binary), t, 20));
  test('durability: CLI writes beside a server under 50 connections: only 2xx or 503, nothing lost', (t) =>
    cliBesideServer(binaryRunner(binary), t));
  test('serve --workers 2 on the executable: shared socket and database, a dead worker replaced, SIGTERM ends all', (t) =>
    twoWorkers(binaryRunner(binary), t));
});
