// MCP upstreams on loopback for the tests of svc's upstream client: a web-standard handler (Request in, Response out,
// as the SDK's v2 createMcpHandler is) served over node:http, and a proxy that passes everything to another server
// and writes down each request it carried (its HTTP method, its JSON-RPC method, its session).
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { freePort, ROOT } from './workspace.ts';
import { listening, waitFor } from './wait.ts';

export interface Served {
  readonly url: string;
  stop(): Promise<void>;
}

function bodyOf(req: IncomingMessage): Promise<string> {
  return new Promise((ok, fail) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => ok(Buffer.concat(chunks).toString('utf8')));
    req.on('error', fail);
  });
}

async function listen(server: Server, path: string): Promise<Served> {
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    stop: () =>
      new Promise((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}

/** Writes a web Response to a node response, its body as it comes (an SSE stream stays open until it ends). */
async function writeResponse(answer: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  answer.headers.forEach((value, key) => {
    headers[key] = value;
  });
  res.writeHead(answer.status, headers);
  if (answer.body === null) {
    res.end();
    return;
  }
  const reader = answer.body.getReader();
  res.on('close', () => void reader.cancel().catch(() => undefined));
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    res.write(value);
  }
  res.end();
}

/**
 * Serves `handle` at `path` on a free loopback port. It gets each request with its body read whole (as text too, for a
 * test to look at), and a signal that aborts when the client goes away.
 */
export async function serveWeb(handle: (request: Request, body: string) => Promise<Response>, path = '/mcp'): Promise<Served> {
  let base = '';
  const server = createServer(async (req, res) => {
    try {
      const body = await bodyOf(req);
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const headers = new Headers();
      for (const [key, value] of Object.entries(req.headers))
        for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(key, v);
      const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && body !== '';
      const request = new Request(`${base}${req.url}`, {
        method: req.method ?? 'GET',
        headers,
        ...(hasBody ? { body } : {}),
        signal: gone.signal,
      });
      await writeResponse(await handle(request, body), res);
    } catch {
      res.destroy();
    }
  });
  const served = await listen(server, path);
  base = new URL(served.url).origin;
  return served;
}

/** One request a proxy carried. */
export interface Carried {
  /** GET, POST, DELETE */
  readonly http: string;
  /** the JSON-RPC method of a POST's message, if it has one */
  readonly rpc: string | undefined;
  readonly session: string | undefined;
  /** the W3C trace context it came with */
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
  /** the identity assertion it came with (X-Svc-Identity) */
  readonly identity: string | undefined;
}

/** A proxy on loopback to `target` (a URL): everything passes, and each request is added to `carried`. */
export async function countingProxy(target: string): Promise<Served & { readonly carried: Carried[] }> {
  const to = new URL(target);
  const carried: Carried[] = [];
  const server = createServer(async (req, res) => {
    const body = await bodyOf(req);
    let rpc: string | undefined;
    try {
      rpc = (JSON.parse(body) as { method?: string }).method;
    } catch {
      rpc = undefined;
    }
    const header = (name: string) => {
      const value = req.headers[name];
      return typeof value === 'string' ? value : undefined;
    };
    carried.push({
      http: req.method ?? 'GET',
      rpc,
      session: header('mcp-session-id'),
      traceparent: header('traceparent'),
      tracestate: header('tracestate'),
      identity: header('x-svc-identity'),
    });
    const headers = { ...req.headers, host: to.host };
    const onward = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    onward.on('error', () => res.destroy());
    res.on('close', () => onward.destroy());
    onward.end(body);
  });
  const served = await listen(server, to.pathname);
  return { ...served, carried };
}

const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

/** The real @modelcontextprotocol/server-everything over Streamable HTTP on a loopback port (2025 era). */
export async function startEverything(): Promise<{ process: ChildProcess; url: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
  await waitFor('server-everything listening', () => listening(port), { everyMs: 100 });
  return { process: child, url: `http://127.0.0.1:${port}/mcp` };
}
