// svc installed as an operator runs it: a folder with svc.ini (its database given as a relative file: path),
// the CLI and `svc serve` as separate processes, from source or as the single executable. Tests that kill,
// restart or lock around svc use this rather than an in-process server.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAIN, ROOT, TSX, DEFAULT_AUTH, freePort, newSecret, type CliResult } from './workspace.ts';
import { waitFor } from './wait.ts';

/** How to start svc: the node running these tests with tsx, or a built executable. */
export interface Runner {
  readonly name: string;
  command(args: readonly string[]): { file: string; args: string[] };
}

export const sourceRunner: Runner = {
  name: 'source',
  command: (args) => ({ file: process.execPath, args: ['--import', TSX, MAIN, ...args] }),
};

export function binaryRunner(path: string): Runner {
  return { name: 'single executable', command: (args) => ({ file: path, args: [...args] }) };
}

export interface Serving {
  readonly child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<number | null>;
  log(): string;
}

export interface Installation {
  readonly dir: string;
  /** the database file; for a database server, where it would be (nothing is there) */
  readonly dbPath: string;
  /** the `database` line of svc.ini */
  readonly database: string;
  /** the database server, when svc uses one */
  readonly remote: { url: string; token: string | null } | null;
  readonly port: number;
  readonly url: string;
  readonly env: Record<string, string>;
  cli(args: string[], stdin?: string): Promise<CliResult>;
  serve(): Promise<Serving>;
  remove(): void;
}

export interface InstallOptions {
  auth?: string;
  env?: Record<string, string>;
  server?: string;
  /** a database server instead of the file svc.db: its URL and auth token (given through database_token_env) */
  remote?: { url: string; token: string | null };
}

export async function install(runner: Runner, options: InstallOptions = {}): Promise<Installation> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-install-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const configPath = join(dir, 'svc.ini');
  const database = options.remote?.url ?? 'file:svc.db';
  const tokenLine = options.remote?.token ? 'database_token_env = SVC_DATABASE_TOKEN\n' : '';
  writeFileSync(
    configPath,
    `[server]\nlisten = 127.0.0.1:${port}\nbase_url = ${url}\ndatabase = ${database}\n${tokenLine}${options.server ?? ''}\n[auth]\n${options.auth ?? DEFAULT_AUTH}\n`,
  );
  // tsx looks for tsconfig.json (JSX settings) from the working directory; from source, name the project's.
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    SVC_SESSION_SECRET: newSecret(),
    TSX_TSCONFIG_PATH: join(ROOT, 'tsconfig.json'),
    ...(options.remote?.token ? { SVC_DATABASE_TOKEN: options.remote.token } : {}),
    ...options.env,
  };
  // Started from another folder than the config's: the relative database path must follow the config file.
  const cwd = tmpdir();
  const start = (args: string[], stdio: 'pipe' | 'ignore') => {
    const { file, args: argv } = runner.command([...args, '--config', configPath]);
    return spawn(file, argv, { cwd, env, stdio: [stdio === 'pipe' ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  };
  return {
    dir,
    dbPath: join(dir, 'svc.db'),
    database,
    remote: options.remote ?? null,
    port,
    url,
    env,
    cli(args, stdin) {
      return new Promise((resolve, reject) => {
        const child = start(args, 'pipe');
        let stdout = '';
        let stderr = '';
        child.stdout!.on('data', (d) => (stdout += d));
        child.stderr!.on('data', (d) => (stderr += d));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, stdout, stderr }));
        child.stdin!.end(stdin ?? '');
      });
    },
    async serve() {
      const child = start(['serve'], 'ignore');
      let log = '';
      child.stdout!.on('data', (d) => (log += d));
      child.stderr!.on('data', (d) => (log += d));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      const deadline = Date.now() + 20_000;
      for (;;) {
        try {
          if ((await fetch(`${url}/healthz`)).status === 200) break;
        } catch {
          // not listening yet
        }
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`svc serve did not come up:\n${log}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return { child, url, exited, log: () => log };
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A `svc serve` process started by serveTogether: its address once it listens, and what it has logged. */
export interface ServeProcess {
  readonly child: ChildProcess;
  readonly url: string;
  log(): string;
}

/**
 * `svc serve` processes started at the same moment on one configuration that listens on port 0, each with its own
 * environment; resolves once each has reported the port it took.
 */
export async function serveTogether<N extends string>(
  runner: Runner,
  configPath: string,
  names: readonly N[],
  envOf: (name: N) => NodeJS.ProcessEnv,
): Promise<Record<N, ServeProcess>> {
  const started = names.map((name) => {
    const { file, args } = runner.command(['serve', '--config', configPath]);
    const child = spawn(file, args, { env: envOf(name), stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout!.on('data', (d) => (log += d));
    child.stderr!.on('data', (d) => (log += d));
    return { name, child, log: () => log };
  });
  const servers = {} as Record<N, ServeProcess>;
  for (const { name, child, log } of started) {
    await waitFor(`svc ${name} to report its port`, () => listenedPort(log()) !== null || child.exitCode !== null);
    const port = listenedPort(log()) ?? assert.fail(`svc ${name} did not start:\n${log()}`);
    servers[name] = { child, url: `http://127.0.0.1:${port}`, log };
  }
  return servers;
}

/** The port svc reports in its "listening" log line (it binds port 0 itself when so configured); null before it. */
export function listenedPort(log: string): number | null {
  for (const line of log.split('\n')) {
    if (!line.includes('"event":"listening"')) continue;
    const listen = (JSON.parse(line) as { listen?: string }).listen ?? '';
    const port = Number(listen.slice(listen.lastIndexOf(':') + 1));
    if (Number.isInteger(port) && port > 0) return port;
  }
  return null;
}

/** Runs sqlite3 (Debian's shell, a separate process) on the database file; returns its output. */
export function sqlite3(dbPath: string, script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('sqlite3', ['-batch', dbPath], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`sqlite3 exited ${code}: ${err}`))));
    child.stdin.end(`.timeout 10000\n${script}\n`);
  });
}

/**
 * Runs SQL on the installation's database from outside svc: sqlite3 on the file, or a client of its own on the
 * database server. One statement per line; rows come back as sqlite3 prints them (columns joined by |).
 */
export async function sqlOn(inst: Installation, script: string): Promise<string> {
  if (!inst.remote) return sqlite3(inst.dbPath, script);
  const { createClient } = await import('@libsql/client');
  const client = createClient({ url: inst.remote.url, ...(inst.remote.token ? { authToken: inst.remote.token } : {}) });
  try {
    const out: string[] = [];
    for (const statement of script
      .split(/;\s*(?:\n|$)/)
      .map((x) => x.trim())
      .filter((x) => x !== '')) {
      const result = await client.execute(statement);
      for (const row of result.rows)
        out.push(Array.from({ length: row.length }, (_, i) => (row[i] === null ? '' : String(row[i]))).join('|'));
    }
    return out.join('\n');
  } finally {
    client.close();
  }
}

/** Another process (sqlite3) holding the database's write lock until release(). */
export async function holdWriteLock(dbPath: string): Promise<{ release(): Promise<void> }> {
  const child = spawn('sqlite3', ['-batch', dbPath], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.stdin.write(".timeout 10000\nBEGIN IMMEDIATE;\nSELECT 'held';\n");
  const deadline = Date.now() + 10_000;
  while (!out.includes('held')) {
    if (Date.now() > deadline) throw new Error('sqlite3 did not take the write lock');
    await new Promise((r) => setTimeout(r, 10));
  }
  return {
    async release() {
      child.stdin.end('COMMIT;\n.quit\n');
      await exited;
    },
  };
}
