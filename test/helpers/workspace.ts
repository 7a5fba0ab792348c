// A throwaway svc installation: a temp folder with svc.ini, a database, and ways to run svc against it.
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { randomBytes } from 'node:crypto';

export const ROOT = new URL('../..', import.meta.url).pathname;
export const MAIN = join(ROOT, 'src/main.ts');
/** tsx resolved from the project, so children started in a temp folder can load TypeScript. */
export const TSX = import.meta.resolve('tsx');

export const DEFAULT_AUTH = `
session
    cookie_name svc_session
    ttl 24h
    secret_env SVC_SESSION_SECRET
local
    enabled true
token
    enabled true
`;

/** DEFAULT_AUTH with OAuth for MCP clients on, as the example configuration has it. */
export const OAUTH_ON = `${DEFAULT_AUTH}oauth\n    enabled true\n`;

export function newSecret(): string {
  return randomBytes(48).toString('base64url');
}

/**
 * A loopback port for a server whose address must be known before it starts: svc's base_url (issuer, cookie
 * scope and redirect URIs follow from it and are fixed when the configuration is read), nginx's configuration,
 * an issuer that svc is configured with. Where nothing needs the port in advance, listen on port 0 instead.
 *
 * Several test processes run at once (npm test runs two files side by side, and other checkouts may test on this
 * machine too), so a port found free and released could be handed to another process before its server binds it.
 * Two things prevent that: ports are taken below the kernel's ephemeral range, where neither listen(0) nor
 * outgoing connections land; and each port is claimed across processes by a file created exclusively in a shared
 * folder, naming the claiming process. A claim whose process is gone is taken over; this process's claims are
 * removed when it exits. A claimed port is handed out only when a probe could bind it.
 */
const CLAIMS = join(tmpdir(), 'svc-test-ports');
const PORT_FLOOR = 20_000;
const claimed: string[] = [];

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > PORT_FLOOR + 1000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True when this process now holds the claim on `port`. */
function claim(port: number): boolean {
  const file = join(CLAIMS, String(port));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      claimed.push(file);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // its owner removed it just now
    }
    // empty: another process created it and is writing its id this moment
    const owner = Number(text);
    if (text === '' || !Number.isInteger(owner) || owner <= 0 || alive(owner)) return false;
    rmSync(file, { force: true }); // left by a process that is gone
  }
  return false;
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

process.once('exit', () => {
  for (const file of claimed) rmSync(file, { force: true });
});

export async function freePort(): Promise<number> {
  mkdirSync(CLAIMS, { recursive: true });
  const span = ephemeralLow() - PORT_FLOOR;
  // Start where the process id points, so processes starting together look in different places first.
  const start = (process.pid * 7919 + claimed.length * 104_729) % span;
  for (let i = 0; i < span; i++) {
    const port = PORT_FLOOR + ((start + i) % span);
    if (!claim(port)) continue;
    if (await bindable(port)) return port;
  }
  throw new Error(`no free loopback port between ${PORT_FLOOR} and ${PORT_FLOOR + span}`);
}

export interface Workspace {
  readonly dir: string;
  readonly configPath: string;
  readonly dbUrl: string;
  readonly port: number;
  readonly baseUrl: string;
  env: Record<string, string>;
  writeConfig(auth?: string, server?: string): void;
  svc(args: string[], options?: { stdin?: string; env?: Record<string, string> }): Promise<CliResult>;
  remove(): void;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export type AuthSection = string | ((where: { port: number; baseUrl: string }) => string);

export interface WorkspaceOptions {
  auth?: AuthSection;
  server?: string;
  serverExtra?: string;
  baseUrl?: string;
  /** a database server (sqld) instead of the file svc.db; its token is given through database_token_env */
  remote?: { url: string; token: string | null };
}

export async function createWorkspace(options: WorkspaceOptions = {}): Promise<Workspace> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  const port = await freePort();
  const baseUrl = options.baseUrl ?? `http://127.0.0.1:${port}`;
  const dbUrl = options.remote?.url ?? `file:${join(dir, 'svc.db')}`;
  const tokenLine = options.remote?.token ? 'database_token_env = SVC_DATABASE_TOKEN\n' : '';
  const configPath = join(dir, 'svc.ini');
  const ws: Workspace = {
    dir,
    configPath,
    dbUrl,
    port,
    baseUrl,
    env: { SVC_SESSION_SECRET: newSecret(), ...(options.remote?.token ? { SVC_DATABASE_TOKEN: options.remote.token } : {}) },
    writeConfig(auth = DEFAULT_AUTH, server) {
      const serverSection =
        server ?? `listen = 127.0.0.1:${port}\nbase_url = ${baseUrl}\ndatabase = ${dbUrl}\n${tokenLine}${options.serverExtra ?? ''}`;
      writeFileSync(configPath, `[server]\n${serverSection}\n[auth]\n${auth}\n`);
    },
    svc(args, opts = {}) {
      return runSvc(
        [
          '--import',
          TSX,
          MAIN,
          ...args,
          ...(args.some((a) => a === '--config' || a.startsWith('--config=')) ? [] : ['--config', configPath]),
        ],
        { ...ws.env, ...opts.env },
        opts.stdin,
        dir,
      );
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
  ws.writeConfig(typeof options.auth === 'function' ? options.auth({ port, baseUrl }) : options.auth, options.server);
  return ws;
}

/** Runs node with the given arguments; the environment is only what is passed (plus PATH and HOME). */
export function runSvc(nodeArgs: string[], env: Record<string, string>, stdin: string | undefined, cwd: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, nodeArgs, {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin ?? '');
  });
}

/**
 * A database file's bytes, read by another process. Opening and closing a file in this process would drop every
 * POSIX lock the process holds on it, SQLite's included: another process could then delete the WAL and shared-memory
 * files under svc running here (the database would split in two).
 */
export function readDatabaseFile(path: string): Buffer {
  return execFileSync('cat', [path], { maxBuffer: 1 << 30 });
}
