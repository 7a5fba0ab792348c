// Where svc finds the files it ships. From a checkout they sit in the repository. Inside the single executable
// they are SEA assets: migrations are read from the executable itself, and native addons, which must be files to
// be loaded, are unpacked into a folder only this user can write, checked against the hashes recorded at build
// time, and loaded from there.
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  writeFileSync,
  openSync,
  readSync,
  closeSync,
  readFileSync,
  lstatSync,
  statSync,
  realpathSync,
  type Stats,
} from 'node:fs';
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
/** true inside the single executable, which applies its own node flags (sea-config execArgv) in every process */
export const IN_EXECUTABLE = sea !== null;

/** The repository root, when running from a checkout or from a plain `node dist/svc.cjs`. */
function repositoryRoot(): string {
  if (BUILD) return join(__dirname, '..');
  return fileURLToPath(new URL('../..', import.meta.url));
}

/**
 * Where native addons may be unpacked, first usable wins: $SVC_CACHE_DIR (override), $XDG_CACHE_HOME/svc,
 * ~/.cache/svc. Each build gets its own folder there, so versions never mix. Failing those, a fresh private
 * folder in the system temporary directory, removed at exit; never a shared, predictable path.
 */
function cacheRoots(): string[] {
  const env = process.env;
  const home = env.HOME || homedir();
  const roots = [
    env.SVC_CACHE_DIR,
    env.XDG_CACHE_HOME ? join(env.XDG_CACHE_HOME, 'svc') : undefined,
    home ? join(home, '.cache', 'svc') : undefined,
  ];
  return roots.filter((r): r is string => typeof r === 'string' && r !== '');
}

const uid = () => process.getuid?.() ?? -1;

/**
 * Why a folder is not safe to load code from, or null when it is: it must be a real folder (no symlink) owned by
 * this user and writable by nobody else, and no folder above it may let another user rename it away (owned by
 * root or this user, and not writable by others unless sticky, as /tmp is).
 */
export function unsafeFolder(dir: string): string | null {
  let info: Stats;
  try {
    info = lstatSync(dir);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? 'cannot be read';
  }
  if (info.isSymbolicLink()) return 'is a symbolic link';
  if (!info.isDirectory()) return 'is not a folder';
  if (info.uid !== uid()) return `is owned by user ${info.uid}, not by this user (${uid()})`;
  if ((info.mode & 0o077) !== 0) return `is open to other users (mode ${(info.mode & 0o777).toString(8)}); it must be 700`;
  for (let up = dirname(realpathSync(dir)); ; up = dirname(up)) {
    const a = statSync(up);
    if (a.uid !== 0 && a.uid !== uid()) return `${up} above it is owned by another user`;
    if ((a.mode & 0o022) !== 0 && (a.mode & 0o1000) === 0) return `${up} above it can be written by other users`;
    if (up === dirname(up)) return null;
  }
}

/** Makes dir (0700) if it is missing; then it must pass unsafeFolder. */
function privateFolder(dir: string): string {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new Error(`${dir} cannot be made (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  const unsafe = unsafeFolder(dir);
  if (unsafe) throw new Error(`${dir} ${unsafe}`);
  return dir;
}

let temporary: string | null = null;
function temporaryFolder(): string {
  if (temporary === null) {
    temporary = mkdtempSync(join(tmpdir(), 'svc-'));
    const made = temporary;
    process.once('exit', () => rmSync(made, { recursive: true, force: true }));
  }
  return privateFolder(temporary);
}

/** SHA-256 of a regular file of this user's, read in small chunks; null for anything else. */
function fileSha256(path: string): string | null {
  try {
    const info = lstatSync(path);
    if (!info.isFile() || info.uid !== uid()) return null;
  } catch {
    return null;
  }
  const fd = openSync(path, 'r');
  try {
    const hash = createHash('sha256');
    const chunk = Buffer.allocUnsafe(256 * 1024);
    for (let n = readSync(fd, chunk, 0, chunk.length, null); n > 0; n = readSync(fd, chunk, 0, chunk.length, null))
      hash.update(chunk.subarray(0, n));
    return hash.digest('hex');
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes `dir/key` hold the asset, checked against the hash recorded at build time. `dir` is private (see
 * unsafeFolder), so what is checked here is what is loaded: nobody else can change it in between. A copy that is
 * damaged, not a regular file, or a link is replaced atomically.
 */
function place(dir: string, key: string): string {
  const expected = BUILD!.assets[key];
  if (!sea || expected === undefined) throw new Error(`this build has no asset ${key}`);
  const dest = join(dir, key);
  if (fileSha256(dest) === expected) return dest;
  const tmp = `${dest}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(tmp, new Uint8Array(sea.getRawAsset(key)), { mode: 0o700, flag: 'wx' });
  renameSync(tmp, dest);
  if (fileSha256(dest) !== expected) throw new Error(`the unpacked ${key} does not match its recorded hash`);
  return dest;
}

/** Unpacks `key` into the first usable private folder; returns the file to load. */
function extract(key: string): string {
  const problems: string[] = [];
  const candidates: (() => string)[] = [
    ...cacheRoots().map((root) => () => privateFolder(join(privateFolder(root), BUILD!.id))),
    temporaryFolder,
  ];
  for (const folder of candidates) {
    try {
      return place(folder(), key);
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  throw new Error(
    `no private folder to unpack native code into (set SVC_CACHE_DIR to a folder only this user can write, on a filesystem that allows executing files): ${problems.join('; ')}`,
  );
}

/** A native addon: from the single executable's assets (extracted and loaded), else the installed package. */
export function loadNativeAddon(key: string, packageId: string): unknown {
  if (!sea) return require(packageId);
  const path = extract(key);
  const mod = { exports: {} as unknown };
  process.dlopen(mod, path, osConstants.dlopen.RTLD_NOW);
  return mod.exports;
}

/**
 * A file of drizzle's migrations (an SQL file or meta/_journal.json), by its path under drizzle/. Inside the single
 * executable it is read from the executable itself, never from a file on disk that someone else could change.
 */
export function migrationText(path: string): string {
  if (!sea) return readFileSync(join(repositoryRoot(), 'drizzle', path), 'utf8');
  return sea.getAsset(`drizzle/${path}`, 'utf8');
}
