import { connect } from 'node:net';
// A small HTTP client for tests: keeps cookies like a browser, never follows redirects, and sends the
// same-origin headers a browser would unless told otherwise.

export class Browser {
  readonly cookies = new Map<string, string>();
  constructor(readonly base: string) {}

  async request(
    path: string,
    init: RequestInit & { form?: Record<string, string>; json?: unknown; origin?: string | null } = {},
  ): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size > 0 && !headers.has('cookie')) {
      headers.set('cookie', [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    }
    let body = init.body;
    if (init.form) {
      headers.set('content-type', 'application/x-www-form-urlencoded');
      body = new URLSearchParams(init.form).toString();
    } else if (init.json !== undefined) {
      headers.set('content-type', 'application/json');
      body = JSON.stringify(init.json);
    }
    const method = init.method ?? (body === undefined ? 'GET' : 'POST');
    if (method !== 'GET' && init.origin !== null && !headers.has('origin')) headers.set('origin', init.origin ?? this.base);
    const res = await fetchRetryingGet(this.base + path, { ...init, method, headers, body: body ?? null, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '';
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  async login(username: string, password: string, next?: string): Promise<Response> {
    return this.request('/login', { form: { username, password, ...(next === undefined ? {} : { next }) } });
  }
}

/**
 * fetch, and like a browser: a GET whose pooled connection the server had already closed (across a restart, or idle
 * past its keep-alive while this process was busy) is sent once more on a new connection. A second failure throws.
 */
export async function fetchRetryingGet(url: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    const code = (e as { cause?: { code?: string } }).cause?.code;
    if ((init.method ?? 'GET') !== 'GET' || (code !== 'UND_ERR_SOCKET' && code !== 'ECONNRESET')) throw e;
    return fetch(url, init);
  }
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/**
 * Sends a request exactly as written (repeated header lines stay separate lines), optionally from another local
 * address such as 127.0.0.2; returns the status and body.
 */
export function rawRequest(
  url: string,
  head: string[],
  options: { localAddress?: string; body?: string } = {},
): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  const body = options.body ?? '';
  const lines = [...head, `Host: ${u.host}`, 'Connection: close', ...(body ? [`Content-Length: ${Buffer.byteLength(body)}`] : [])];
  return new Promise((resolve, reject) => {
    const socket = connect(
      { port: Number(u.port), host: u.hostname, ...(options.localAddress ? { localAddress: options.localAddress } : {}) },
      () =>
        // Written without half-closing: a proxy such as nginx drops a request whose client has closed its side.
        socket.write(`${lines.join('\r\n')}\r\n\r\n${body}`),
    );
    let out = '';
    socket.on('data', (d) => (out += d));
    socket.on('error', reject);
    socket.on('close', () =>
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(out)?.[1]), body: out.slice(out.indexOf('\r\n\r\n') + 4) }),
    );
  });
}
