// A stdio child is not trusted with svc (CONTRACT §6.1): svc starts it through bubblewrap (`bwrap`, Debian's
// `bubblewrap`), in its own PID and IPC namespaces with a fresh /proc, so neither svc (whose environment holds the
// session secret and every token_env value) nor another person's child is a process it can see, let alone read. It
// sees the filesystem as svc does, read-only but for the upstream's `writable` paths, and with the embedded database's
// folder (the file, its -wal and -shm, and whatever else lies there) hidden under an empty tmpfs. It keeps no
// capability, even when svc runs as root, so it can neither unmount what hides the database nor read another user's
// files. Where bwrap is missing or cannot make namespaces here, the child runs as before and `svc check` and
// `svc serve` say so, naming the upstream.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, realpathSync } from 'node:fs';
import { delimiter, dirname, isAbsolute, join, sep } from 'node:path';
import type { Config, UpstreamTransport } from '../config/load.ts';
import { filePath } from '../db/open.ts';

type StdioTransport = Extract<UpstreamTransport, { kind: 'stdio' }>;

/** What the sandbox is made of, before the upstream's own paths: everything but `writable` and the hidden folders. */
const SANDBOX = [
  ...['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc'],
  ...['--unshare-pid', '--unshare-ipc', '--unshare-cgroup-try'],
  // Killed with svc; no controlling terminal to push input into; no capability, also when svc runs as root.
  ...['--die-with-parent', '--new-session', '--cap-drop', 'ALL'],
];

/** Whether this host gives stdio children a sandbox: bwrap's path, or why not. */
export type Sandboxing = { readonly bwrap: string } | { readonly unavailable: string };

let sandboxing: Sandboxing | null = null;

/** Found once per process: bwrap on svc's PATH, and a sandbox it made. */
export function hostSandboxing(): Sandboxing {
  sandboxing ??= probe();
  return sandboxing;
}

function probe(): Sandboxing {
  const bwrap = onPath('bwrap');
  if (bwrap === null) return { unavailable: 'bwrap is not on PATH (Debian: apt-get install bubblewrap)' };
  const tried = spawnSync(bwrap, [...SANDBOX, '--', 'true'], {
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'ignore', 'pipe'],
    timeout: 10_000,
  });
  if (tried.error !== undefined) return { unavailable: `${bwrap} could not be run: ${tried.error.message}` };
  if (tried.status !== 0) {
    const said = tried.stderr.toString('utf8').trim().split('\n')[0]?.slice(0, 200) ?? '';
    return { unavailable: `${bwrap} cannot make a sandbox on this host${said === '' ? '' : `: ${said}`}` };
  }
  return { bwrap };
}

function onPath(name: string): string | null {
  for (const folder of (process.env.PATH ?? '').split(delimiter)) {
    if (!isAbsolute(folder)) continue;
    const path = join(folder, name);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * The folders every child is kept out of: the embedded database's, by the path its links lead to (so no other name of
 * it stays open). A database server's files are not svc's.
 */
export function hiddenFolders(database: string): string[] {
  if (!database.startsWith('file:') || filePath(database) === ':memory:') return [];
  const folder = dirname(filePath(database));
  try {
    return [realpathSync(folder)];
  } catch {
    return [folder];
  }
}

let hidden: readonly string[] | null = null;

/** Told once, when the upstreams start: which database svc serves, so that its folder is hidden from every child. */
export function keepFromChildren(database: string): void {
  hidden = hiddenFolders(database);
}

/**
 * How to start a stdio child: through bwrap where the host has it, else the command itself. A database in `/`
 * cannot be hidden by a folder: its children run as before, and `sandboxWarnings` says so.
 */
export function launch(t: StdioTransport): { command: string; args: string[] } {
  if (hidden === null) throw new Error('svc starts a stdio child only once it knows which database to hide');
  const host = hostSandboxing();
  if ('unavailable' in host || hidden.includes(sep)) return { command: t.command, args: [...t.args] };
  const writable = t.writable.flatMap((path) => ['--bind', path, path]);
  // Last: a writable path that holds the database's folder, or lies in it, does not show it.
  const covered = hidden.flatMap((folder) => ['--tmpfs', folder]);
  return { command: host.bwrap, args: [...SANDBOX, ...writable, ...covered, '--', t.command, ...t.args] };
}

/** Each stdio upstream whose child this host cannot keep from svc's secrets, or that cannot start in the sandbox. */
export function sandboxWarnings(config: Config): { upstream: string; warning: string }[] {
  const stdio = config.upstreams.filter((u) => u.transport.kind === 'stdio');
  if (stdio.length === 0) return [];
  const host = hostSandboxing();
  const folders = hiddenFolders(config.server.database);
  const warnings: { upstream: string; warning: string }[] = [];
  for (const u of stdio) {
    const t = u.transport as StdioTransport;
    if ('unavailable' in host || folders.includes(sep)) {
      const why =
        'unavailable' in host ? host.unavailable : 'the database is in /, whose folder cannot be hidden; give it a folder of its own';
      warnings.push({
        upstream: u.name,
        warning: `its child runs without a sandbox and can read svc's environment (the session secret, token_env values) and database: ${why}`,
      });
      continue;
    }
    const inside = [t.command, ...t.args].find((word) => folders.some((f) => word === f || word.startsWith(f + sep)));
    if (inside !== undefined)
      warnings.push({
        upstream: u.name,
        warning: `${inside} is in the database's folder, which every child is kept out of; keep the database in a folder of its own`,
      });
    const missing = t.writable.find((path) => !existsSync(path));
    if (missing !== undefined)
      warnings.push({ upstream: u.name, warning: `writable: ${missing} does not exist, and bwrap will not start the child without it` });
  }
  return warnings;
}
