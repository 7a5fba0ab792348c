// What loads lazily stays lazy: the admin pages, the token page and the routes of people's upstream accounts are
// part of every svc, and must not pull in the MCP SDK (loaded on the first /mcp request), nor the OAuth and JWT
// libraries the upstream gateway uses (loaded only with [upstream] sections). Each set of modules is imported in a
// fresh process, which reports every library it resolved.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');

/** The libraries (package names under node_modules) that importing these modules of svc resolves. */
async function librariesOf(modules: string[]): Promise<string[]> {
  const hook = pathToFileURL(join(ROOT, 'test/helpers/resolved-modules.mjs')).href;
  const script = `
    import { register } from 'node:module';
    import { MessageChannel } from 'node:worker_threads';
    const { port1, port2 } = new MessageChannel();
    const seen = new Set();
    port1.on('message', (url) => {
      const at = url.indexOf('/node_modules/');
      if (at < 0) return;
      const parts = url.slice(at + 14).split('/');
      seen.add(parts[0].startsWith('@') ? parts[0] + '/' + parts[1] : parts[0]);
    });
    port1.unref();
    register(${JSON.stringify(hook)}, { data: { port: port2 }, transferList: [port2] });
    for (const m of ${JSON.stringify(modules.map((m) => pathToFileURL(join(ROOT, m)).href))}) await import(m);
    await new Promise((ok) => setTimeout(ok, 100));
    process.stdout.write(JSON.stringify([...seen].sort()));
  `;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT });
  return JSON.parse(stdout) as string[];
}

const NOT_AT_START = [
  '@modelcontextprotocol/server',
  '@modelcontextprotocol/client',
  '@modelcontextprotocol/sdk',
  'jose',
  'oauth4webapi',
  'zod',
];

test('the admin pages, the token page and the upstream account routes load neither the MCP SDK nor jose nor oauth4webapi', async () => {
  const libraries = await librariesOf([
    'src/http/routes/admin-pages.tsx',
    'src/http/routes/admin-tools.tsx',
    'src/http/routes/admin-tools-api.ts',
    'src/http/routes/tokens.tsx',
    'src/http/routes/upstream-accounts.tsx',
  ]);
  assert.ok(libraries.includes('hono'), `the report works: ${libraries.join(', ')}`);
  assert.deepEqual(
    libraries.filter((l) => NOT_AT_START.includes(l)),
    [],
  );
});

test('svc as it serves, with every layer a request passes through, loads no OpenTelemetry until tracing starts', async () => {
  const libraries = await librariesOf([
    'src/server.ts',
    'src/http/app.ts',
    'src/upstream/gateway.ts',
    'src/mcp/server.ts',
    'src/trace/spans.ts',
  ]);
  assert.ok(libraries.includes('@modelcontextprotocol/server'), libraries.join(', '));
  assert.deepEqual(
    libraries.filter((l) => l.startsWith('@opentelemetry/')),
    [],
  );
});

test('the MCP layer, once loaded, is the stable line only: the server package, and neither the legacy SDK nor the client', async () => {
  const libraries = await librariesOf(['src/mcp/server.ts']);
  assert.ok(libraries.includes('@modelcontextprotocol/server'), libraries.join(', '));
  assert.deepEqual(
    libraries.filter((l) => ['@modelcontextprotocol/sdk', '@modelcontextprotocol/client', 'oauth4webapi'].includes(l)),
    [],
  );
});
