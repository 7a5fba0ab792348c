// A throwaway svc installation: a temp folder with svc.ini, a database, and ways to run svc against it.
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
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

/** Ports this process handed out: one that was released again must not be handed out twice (a proxy given a port
 * and the server behind it given the same one would each think they hold it). */
const handedOut = new Set<number>();

export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const s = createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const port = (s.address() as { port: number }).port;
        s.close(() => resolve(port));
      });
    });
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
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
      const serverSection = server ?? `listen = 127.0.0.1:${port}\nbase_url = ${baseUrl}\ndatabase = ${dbUrl}\n${tokenLine}${options.serverExtra ?? ''}`;
      writeFileSync(configPath, `[server]\n${serverSection}\n[auth]\n${auth}\n`);
    },
    svc(args, opts = {}) {
      return runSvc(['--import', TSX, MAIN, ...args, ...(args.some((a) => a === '--config' || a.startsWith('--config=')) ? [] : ['--config', configPath])], { ...ws.env, ...opts.env }, opts.stdin, dir);
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
