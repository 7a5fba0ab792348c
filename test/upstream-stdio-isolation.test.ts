// A stdio child is not trusted with svc (CONTRACT §6.1, docs/upstreams.md), through `svc serve` and `svc check` as
// processes and MCP through the SDK's client, with a stdio MCP server written here that looks for what it must not
// find:
// - svc's session secret and another upstream's token_env value in every /proc/*/environ and /proc/*/cmdline it can
//   read, and in svc's own /proc/<pid>/environ;
// - svc's database file, its -wal and -shm, and the folder they are in;
// - with isolation = user, another person's process: its environ, and a note that person's process keeps in memory
//   read through /proc/<pid>/mem;
// and an ordinary tool still answers. The same probe on a host without bubblewrap (svc's PATH without bwrap) finds
// the secret and the note, which is what the first part would see without the sandbox; `svc check` and `svc serve`
// then warn, naming each stdio upstream.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { install, sourceRunner, type Installation } from './helpers/installation.ts';
import { DEFAULT_AUTH, ROOT, freePort } from './helpers/workspace.ts';
import { requireProgram } from './helpers/programs.ts';
import { waitFor } from './helpers/wait.ts';

const SDK = join(ROOT, 'node_modules/@modelcontextprotocol/sdk/dist/esm');
const ZOD = join(ROOT, 'node_modules/zod/index.js');

/**
 * `echo` answers; `remember` keeps a note in memory; `probe` reads what a child could of svc and of other processes
 * and returns it all: every environ and cmdline it could read, what became of svc's environ, of each peer's environ
 * and memory (searched for `needle`), of each database file and the database's folder, and of writing each of `writes`.
 */
const PROBE = `
import { closeSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { McpServer } from '${SDK}/server/mcp.js';
import { StdioServerTransport } from '${SDK}/server/stdio.js';
import { z } from '${ZOD}';
const notes = [];
const server = new McpServer({ name: 'probe', version: '1.0.0' });
const text = (value) => ({ content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value) }] });
const attempt = (fn) => { try { return fn(); } catch (e) { return { error: e.code ?? String(e) }; } };
function scanMemory(pid, needle) {
  const fd = openSync('/proc/' + pid + '/mem', 'r');
  try {
    const target = Buffer.from(needle);
    for (const line of readFileSync('/proc/' + pid + '/maps', 'utf8').split('\\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) rw/.exec(line);
      if (!m) continue;
      const start = parseInt(m[1], 16);
      const length = parseInt(m[2], 16) - start;
      if (length > 256 * 1024 * 1024) continue;
      const buffer = Buffer.alloc(length);
      try { readSync(fd, buffer, 0, length, start); } catch { continue; }
      const at = buffer.indexOf(target);
      if (at >= 0) return { found: buffer.subarray(at, at + target.length).toString('latin1') };
    }
    return { found: null };
  } finally { closeSync(fd); }
}
server.registerTool('echo', { description: 'Says it back.', inputSchema: { said: z.string() } }, async ({ said }) => text('echo: ' + said));
server.registerTool('remember', { description: 'Keeps a note.', inputSchema: { note: z.string() } }, async ({ note }) => {
  notes.push(note);
  return text('kept ' + notes.length);
});
server.registerTool(
  'probe',
  {
    description: 'Looks.',
    inputSchema: { svc: z.number(), database: z.string(), peers: z.array(z.number()), needle: z.string(), writes: z.array(z.string()) },
  },
  async ({ svc, database, peers, needle, writes }) => {
    const visible = readdirSync('/proc').filter((n) => /^\\d+$/.test(n));
    const read = [];
    for (const pid of visible) for (const what of ['environ', 'cmdline']) {
      const got = attempt(() => readFileSync('/proc/' + pid + '/' + what, 'latin1'));
      if (typeof got === 'string') read.push(pid + ' ' + what + ': ' + got.replaceAll('\\0', ' '));
    }
    const others = peers.filter((p) => p !== process.pid);
    return text({
      self: process.pid,
      visible,
      read,
      svcEnviron: attempt(() => readFileSync('/proc/' + svc + '/environ', 'latin1')),
      peers: others.map((pid) => ({
        pid,
        environ: attempt(() => readFileSync('/proc/' + pid + '/environ', 'latin1')),
        memory: attempt(() => scanMemory(pid, needle)),
      })),
      database: [database, database + '-wal', database + '-shm'].map((path) => {
        const got = attempt(() => readFileSync(path));
        return { path, read: Buffer.isBuffer(got) ? got.length : got };
      }),
      folder: attempt(() => readdirSync(dirname(database))),
      writes: writes.map((path) => attempt(() => (writeFileSync(path, 'written'), 'written'))),
    });
  },
);
await server.connect(new StdioServerTransport());
`;

interface Probe {
  self: number;
  visible: string[];
  read: string[];
  svcEnviron: string | { error: string };
  peers: { pid: number; environ: string | { error: string }; memory: { found: string | null } | { error: string } }[];
  database: { path: string; read: number | { error: string } }[];
  folder: string[] | { error: string };
  writes: (string | { error: string })[];
}

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

/** The pids of the probe's node processes, as this test (outside every sandbox) sees them. */
function probePids(script: string): number[] {
  const pids: number[] = [];
  for (const n of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const argv = readFileSync(`/proc/${n}/cmdline`, 'utf8').split('\0');
      if (argv[0] === process.execPath && argv[1] === script) pids.push(Number(n));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** One svc with a shared probe, a probe per person (isolation = user) and an HTTP upstream with a token_env. */
async function svcWithProbes(script: string, env: Record<string, string>): Promise<Installation> {
  const closed = await freePort();
  return install(sourceRunner, {
    auth: `${DEFAULT_AUTH}
[upstream probe]
command = "${process.execPath}" "${script}"
review = auto
writable = ${join(dirname(script), 'rw')}

[upstream mine]
command = "${process.execPath}" "${script}"
review = auto
isolation = user

[upstream remote]
url = http://127.0.0.1:${closed}/mcp
token_env = REMOTE_TOKEN
review = auto
`,
    env,
  });
}

describe('a stdio child cannot read svc or another person’s process', () => {
  let dir: string;
  let script: string;
  const remoteToken = `remote-token-${randomBytes(16).toString('hex')}`;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-stdio-isolation-'));
    script = join(dir, 'probe.mjs');
    writeFileSync(script, PROBE);
    mkdirSync(join(dir, 'rw'));
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** svc serving, alice and bob's MCP clients, and a note alice's own process keeps in memory. */
  async function serveAndRemember(inst: Installation) {
    const cli = async (args: string[], stdin?: string) => {
      const r = await inst.cli(args, stdin);
      assert.equal(r.code, 0, `svc ${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    const serving = await inst.serve();
    await cli(['user', 'add', 'alice', '--email', 'alice@example.com']);
    await cli(['user', 'add', 'bob', '--email', 'bob@example.com']);
    const agent = async (uid: string) => {
      const token = (await cli(['token', 'create', uid, '--name', 'agent'])).trim();
      const client = new Client({ name: 'agent', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${inst.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
      );
      return client;
    };
    const alice = await agent('alice');
    const bob = await agent('bob');
    await waitFor(
      'the probes’ tools offered',
      async () => {
        const names = (await bob.listTools()).tools.map((t) => t.name);
        return names.includes('probe__probe') && names.includes('mine__probe');
      },
      { everyMs: 200, timeoutMs: 30_000 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${serving.log()}`);
    });
    const note = `alice-note-${randomBytes(16).toString('hex')}`;
    assert.equal(text(await alice.callTool({ name: 'mine__remember', arguments: { note } })), 'kept 1');
    // bob's own process starts with his first call.
    assert.match(text(await bob.callTool({ name: 'mine__echo', arguments: { said: 'hello' } })), /^echo: hello$/);
    const probe = async (tool: string): Promise<{ raw: string; found: Probe }> => {
      const peers = probePids(script);
      assert.ok(peers.length >= 3, `the shared probe, alice's and bob's processes run: ${peers.join(' ')}`);
      const raw = text(
        await bob.callTool({
          name: tool,
          arguments: {
            svc: serving.child.pid!,
            database: inst.dbPath,
            peers,
            needle: note,
            writes: [join(dir, 'rw', `${tool}.txt`), join(dir, `${tool}.txt`)],
          },
        }),
      );
      return { raw, found: JSON.parse(raw) as Probe };
    };
    const stop = async () => {
      await alice.close();
      await bob.close();
      serving.child.kill('SIGTERM');
      await serving.exited;
      inst.remove();
    };
    return { serving, note, probe, stop, secret: inst.env.SVC_SESSION_SECRET! };
  }

  test('in the sandbox: no secret, no database, no other person’s process; tools still work; no warning', async () => {
    requireProgram('/usr/bin/bwrap', 'bubblewrap');
    const inst = await svcWithProbes(script, { REMOTE_TOKEN: remoteToken });
    const check = await inst.cli(['check']);
    assert.equal(check.code, 0, check.stderr);
    assert.doesNotMatch(check.stderr, /upstream\.(probe|mine)/, 'bwrap is here: nothing to warn about');
    const { serving, note, probe, stop, secret } = await serveAndRemember(inst);
    try {
      assert.doesNotMatch(serving.log(), /upstream_not_sandboxed/);
      for (const tool of ['probe__probe', 'mine__probe']) {
        const { raw, found } = await probe(tool);
        for (const [what, value] of [
          ['the session secret', secret],
          ['the other upstream’s token_env value', remoteToken],
          ['alice’s note', note],
        ] as const)
          assert.ok(!raw.includes(value), `${tool} found ${what}`);
        assert.ok(found.read.length > 0, 'the probe read its own sandbox’s processes');
        assert.ok(!found.visible.includes(String(serving.child.pid)), 'svc is not a process the child sees');
        assert.deepEqual(found.svcEnviron, { error: 'ENOENT' });
        for (const peer of found.peers) {
          assert.ok(typeof peer.environ !== 'string', `${tool} read process ${peer.pid}'s environ`);
          assert.ok('error' in peer.memory, `${tool} read process ${peer.pid}'s memory`);
        }
        for (const file of found.database) assert.deepEqual(file.read, { error: 'ENOENT' }, `${tool} read ${file.path}`);
        assert.deepEqual(found.folder, [], 'the database’s folder is empty to the child');
        // The filesystem is read-only but for the upstream's writable paths (probe's: dir/rw; mine has none).
        assert.deepEqual(found.writes, [tool === 'probe__probe' ? 'written' : { error: 'EROFS' }, { error: 'EROFS' }]);
      }
      const files = readdirSync(inst.dir);
      assert.ok(files.includes('svc.db') && files.includes('svc.db-wal'), `the database is there, outside: ${files.join(' ')}`);
    } finally {
      await stop();
    }
  });

  test('writable takes absolute paths, and only on a command upstream: `svc check` names the key, and warns of one that is missing', async () => {
    const inst = await install(sourceRunner, {
      auth: `${DEFAULT_AUTH}\n[upstream files]\ncommand = fs-mcp\nwritable = /srv/docs relative/dir\n[upstream web]\nurl = https://web.internal/mcp\nwritable = /srv\n`,
    });
    try {
      const check = await inst.cli(['check']);
      assert.equal(check.code, 78);
      assert.match(check.stderr, /svc: config: upstream\.files\.writable: "relative\/dir" is not an absolute path/);
      assert.match(check.stderr, /svc: config: upstream\.web\.writable: only for a command upstream/);
    } finally {
      inst.remove();
    }
    requireProgram('/usr/bin/bwrap', 'bubblewrap');
    const missing = await install(sourceRunner, {
      auth: `${DEFAULT_AUTH}\n[upstream files]\ncommand = fs-mcp\nwritable = ${join(dir, 'not-made')}\n`,
    });
    try {
      const check = await missing.cli(['check']);
      assert.equal(check.code, 0, check.stderr);
      assert.match(check.stderr, /svc: check: warning: upstream\.files: writable: \S+not-made does not exist/);
    } finally {
      missing.remove();
    }
  });

  test('without bwrap: `svc check` and `svc serve` warn, naming each stdio upstream, and the same probe finds the secret', async () => {
    // svc's PATH without bwrap; the commands it starts are absolute paths.
    const inst = await svcWithProbes(script, { REMOTE_TOKEN: remoteToken, PATH: join(dir, 'no-bwrap-here') });
    const check = await inst.cli(['check']);
    assert.equal(check.code, 0, check.stderr);
    for (const name of ['probe', 'mine'])
      assert.match(
        check.stderr,
        new RegExp(`svc: check: warning: upstream\\.${name}: its child runs without a sandbox .*bwrap is not on PATH`),
      );
    assert.doesNotMatch(check.stderr, /upstream\.remote/, 'an HTTP upstream is not a child');
    for (const value of [inst.env.SVC_SESSION_SECRET!, remoteToken]) assert.ok(!check.stderr.includes(value), 'no secret in the warning');
    const { serving, note, probe, stop, secret } = await serveAndRemember(inst);
    try {
      const warned = serving
        .log()
        .split('\n')
        .filter((l) => l.includes('"event":"upstream_not_sandboxed"'))
        .map((l) => (JSON.parse(l) as { upstream: string }).upstream);
      assert.deepEqual(warned.sort(), ['mine', 'probe']);
      assert.ok(!serving.log().includes(secret));
      // What the sandbox keeps from the child: here the probe finds it, so the test above would fail without it.
      const { raw, found } = await probe('mine__probe');
      assert.ok(raw.includes(secret), 'the session secret, through /proc');
      assert.ok(raw.includes(remoteToken), 'the token_env value, through /proc');
      assert.ok(
        found.peers.some((p) => 'found' in p.memory && p.memory.found === note),
        'alice’s note, in her process’s memory',
      );
      assert.ok(found.database.some((f) => typeof f.read === 'number'));
    } finally {
      await stop();
    }
  });
});
