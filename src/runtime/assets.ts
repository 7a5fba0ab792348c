// Where svc finds the files it ships. From a checkout they sit in the repository. Inside the single executable
// they are SEA assets: native addons and migrations are extracted once to a private, versioned cache directory,
// atomically, and checked against the hashes recorded at build time before anything is loaded from there.
import { createHash } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync, accessSync, openSync, readSync, closeSync, readFileSync, constants as fsConstants } from 'node:fs';
import { dirname, join } from 'node:path';
import { homedir, tmpdir, constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';

/** Written by scripts/build-binary.ts into the bundle; absent when running from source. */
interface BuildInfo {
  readonly id: string;
  readonly version: string;
  readonly commit: string;
  /** asset key -> SHA-256 (hex) */
  readonly assets: Readonly<Record<string, string>>;
}
declare const __SVC_BUILD__: BuildInfo | undefined;
export const BUILD: BuildInfo | null = typeof __SVC_BUILD__ === 'undefined' ? null : __SVC_BUILD__;

interface SeaApi {
  isSea(): boolean;
  getRawAsset(key: string): ArrayBuffer;
  getAsset(key: string, encoding: 'utf8'): string;
}

function seaApi(): SeaApi | null {
  try {
    const sea = process.getBuiltinModule?.('node:sea') as SeaApi | undefined;
    return sea?.isSea() ? sea : null;
  } catch {
    return null;
  }
}
const sea = BUILD ? seaApi() : null;

/** The repository root, when running from a checkout or from a plain `node dist/svc.cjs`. */
function repositoryRoot(): string {
  if (BUILD) return join(__dirname, '..');
  return fileURLToPath(new URL('../..', import.meta.url));
}

/**
 * Cache roots, first usable wins: $SVC_CACHE_DIR (override), $XDG_CACHE_HOME/svc, ~/.cache/svc, then the
 * system temporary directory. Each build gets its own folder, so versions never mix.
 */
function cacheRoots(): string[] {
  const env = process.env;
  const roots = [
    env.SVC_CACHE_DIR,
    env.XDG_CACHE_HOME ? join(env.XDG_CACHE_HOME, 'svc') : undefined,
    env.HOME || homedir() ? join(env.HOME || homedir(), '.cache', 'svc') : undefined,
    join(tmpdir(), `svc-${process.getuid?.() ?? 'user'}`),
  ];
  return roots.filter((r): r is string => typeof r === 'string' && r !== '');
}

/** SHA-256 of a file, read in small chunks: no large buffer, and nothing of it stays resident. */
function fileSha256(path: string): string | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null;
  }
  try {
    const hash = createHash('sha256');
    const chunk = Buffer.allocUnsafe(256 * 1024);
    for (let n; (n = readSync(fd, chunk, 0, chunk.length, null)) > 0; ) hash.update(chunk.subarray(0, n));
    return hash.digest('hex');
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes `dest` hold the asset `key`, checked against the hash recorded at build time: an intact copy is kept,
 * anything else is replaced atomically (other processes see the old file or the new one, never half of one).
 */
function place(dest: string, key: string): void {
  const expected = BUILD!.assets[key];
  if (!sea || expected === undefined) throw new Error(`svc: this build has no asset ${key}`);
  if (fileSha256(dest) === expected) return;
  mkdirSync(dirname(dest), { recursive: true, mode: 0o700 });
  const tmp = `${dest}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(tmp, new Uint8Array(sea.getRawAsset(key)), { mode: 0o700 });
  if (fileSha256(tmp) !== expected) throw new Error(`svc: the embedded ${key} does not match its recorded hash; the executable is damaged`);
  renameSync(tmp, dest);
}

/** Extracts the assets under `prefix` into the first usable cache root that `use` accepts; returns that folder. */
function extract<T>(keys: readonly string[], use: (dir: string) => T): T {
  const problems: string[] = [];
  for (const root of cacheRoots()) {
    const dir = join(root, BUILD!.id);
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      accessSync(dir, fsConstants.W_OK);
      for (const key of keys) place(join(dir, key), key);
      return use(dir);
    } catch (e) {
      problems.push(`${dir}: ${(e as Error).message}`);
    }
  }
  throw new Error(`svc: no usable cache directory for the files this executable unpacks (set SVC_CACHE_DIR to a writable, non-noexec folder):\n  ${problems.join('\n  ')}`);
}

/** A native addon: from the single executable's assets (extracted and loaded), else the installed package. */
export function loadNativeAddon(key: string, packageId: string): unknown {
  if (!sea) return require(packageId);
  return extract([key], (dir) => {
    const mod = { exports: {} as unknown };
    process.dlopen(mod, join(dir, key), osConstants.dlopen.RTLD_NOW);
    return mod.exports;
  });
}

/**
 * A file of drizzle's migrations (an SQL file or meta/_journal.json), by its path under drizzle/. Inside the single
 * executable it is read from the executable itself, never from a file on disk that someone else could change.
 */
export function migrationText(path: string): string {
  if (!sea) return readFileSync(join(repositoryRoot(), 'drizzle', path), 'utf8');
  return sea.getAsset(`drizzle/${path}`, 'utf8');
}
