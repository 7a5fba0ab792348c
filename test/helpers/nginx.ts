// Debian's nginx as the trusted reverse proxy: it authenticates users itself (auth_basic) and sets the identity
// and secret headers with proxy_set_header, overwriting whatever the client sent.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listening, waitFor } from './wait.ts';
import { requireProgram } from './programs.ts';

export const NGINX = '/usr/sbin/nginx';

/** Debian's nginx, or an error saying to install nginx-light. */
export function nginxProgram(): string {
  return requireProgram(NGINX, 'nginx-light');
}

export interface Nginx {
  readonly url: string;
  stop(): Promise<void>;
}

export interface NginxOptions {
  port: number;
  /** one svc; or several, taken in turn (round-robin) */
  upstreamPort: number | number[];
  secret: string;
  /** user -> password for auth_basic */
  users: Record<string, string>;
  /** user -> comma-separated groups the proxy asserts */
  groups?: Record<string, string>;
  names?: Record<string, string>;
}

const READY_TOKEN = `ready-${process.pid}-${Date.now()}`;

export async function startNginx(o: NginxOptions): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-nginx-'));
  mkdirSync(join(dir, 'tmp'));
  writeFileSync(
    join(dir, 'htpasswd'),
    `${Object.entries(o.users)
      .map(([u, p]) => `${u}:{PLAIN}${p}`)
      .join('\n')}\n`,
  );
  const mapLines = (m: Record<string, string> = {}) =>
    Object.entries(m)
      .map(([u, v]) => `    ${u} "${v}";`)
      .join('\n');
  const conf = `
master_process off;
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  map $remote_user $svc_groups {
    default "";
${mapLines(o.groups)}
  }
  map $remote_user $svc_name {
    default "";
${mapLines(o.names)}
  }
  upstream svc {
${(Array.isArray(o.upstreamPort) ? o.upstreamPort : [o.upstreamPort]).map((p) => `    server 127.0.0.1:${p};`).join('\n')}
  }
  server {
    listen 127.0.0.1:${o.port};
    # How the helper knows it is this nginx that listens, not something else on the port.
    location = /.nginx-ready {
      add_header X-Nginx-Ready ${READY_TOKEN};
      return 204;
    }
    # The sign-in form needs no proxy authentication; nginx passes the client's address on.
    location = /login {
      proxy_pass http://svc;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
    location / {
      auth_basic "svc";
      auth_basic_user_file ${dir}/htpasswd;
      proxy_pass http://svc;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      # The proxy's own credentials stay here; svc sees only the identity headers below.
      proxy_set_header Authorization "";
      proxy_set_header X-Authenticated-User $remote_user;
      proxy_set_header X-Authenticated-Email $remote_user@example.com;
      proxy_set_header X-Authenticated-Name $svc_name;
      proxy_set_header X-Authenticated-Groups $svc_groups;
      proxy_set_header X-Auth-Secret "${o.secret}";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`;
  writeFileSync(join(dir, 'nginx.conf'), conf);
  const child: ChildProcess = spawn(nginxProgram(), ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  try {
    await waitFor(`nginx listening on ${o.port}`, () => listening(o.port), { timeoutMs: 10_000 });
    const ready = await fetch(`http://127.0.0.1:${o.port}/.nginx-ready`).catch(() => null);
    if (child.exitCode !== null || ready?.headers.get('x-nginx-ready') !== READY_TOKEN) {
      throw new Error(`port ${o.port} is answered by something other than this nginx`);
    }
  } catch (e) {
    child.kill('SIGKILL');
    let log = '';
    try {
      log = readFileSync(join(dir, 'error.log'), 'utf8');
    } catch {}
    throw new Error(`${(e as Error).message}\n${stderr}\n${log}`);
  }
  return {
    url: `http://127.0.0.1:${o.port}`,
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGQUIT');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
