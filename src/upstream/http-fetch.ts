// The fetch an HTTP upstream's SDK transport is given: Node's own http/https client behind the fetch interface, with
// one keep-alive agent per upstream connection. The SDK's transport only needs fetch's shape; Node's global fetch
// costs about 2.7 times the CPU per call here (776–836 µs against 291–302 µs for one SDK client calling a bare
// server at 50 in flight, docs/performance.md), which is most of what svc adds to an upstream call.
//
// What it keeps of fetch: a response whose body streams, an AbortSignal that ends the request, and no redirect
// followed (a 3xx comes back as it is, and the SDK refuses it). What it adds: an answer over ANSWER_MAX bytes is cut
// off as it arrives, the request is ended, and `oversized` is told. A signal's listener is removed as soon as its
// request has ended, so a transport's one long-lived signal does not collect a listener per call.
import { setMaxListeners } from 'node:events';
import http from 'node:http';
import https from 'node:https';

/** An answer of more than this many bytes is not read: the request is cut off. */
export const ANSWER_MAX = 10 * 1024 * 1024;

/** A call whose answer was larger than ANSWER_MAX: it is cut off, and the connection with it. */
export class AnswerTooLarge extends Error {}

/** Statuses whose response has no body (a web Response refuses one). */
const NO_BODY = new Set([101, 103, 204, 205, 304]);

function headerRecord(init: HeadersInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  (init instanceof Headers ? init : new Headers(init)).forEach((value, key) => {
    out[key] = value;
  });
  return out;
}

function responseHeaders(raw: http.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [key, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(key, v);
  }
  return headers;
}

export interface UpstreamFetch {
  readonly fetch: typeof fetch;
  /** closes the agent's idle sockets */
  close(): void;
}

/** A fetch for one upstream connection; `oversized` is told when an answer is cut off for its size. */
export function upstreamFetch(oversized: () => void): UpstreamFetch {
  const options = { keepAlive: true, scheduling: 'lifo' as const };
  const agents = { 'http:': new http.Agent(options), 'https:': new https.Agent(options) };
  const fetchOne = (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    if (input instanceof Request) return Promise.reject(new TypeError('an upstream request is made from a URL'));
    const url = new URL(input);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.reject(new TypeError(`cannot fetch ${url.protocol} URLs`));
    const signal = init.signal ?? null;
    if (signal?.aborted) return Promise.reject(signal.reason);
    // Each call in flight listens on the transport's one signal until it ends: many at once are not a leak, and
    // Node's warning for more than 10 would tell operators otherwise.
    if (signal !== null) setMaxListeners(0, signal);
    const body = init.body;
    if (body !== undefined && body !== null && typeof body !== 'string')
      return Promise.reject(new TypeError('an upstream request body is a string'));
    const headers = headerRecord(init.headers);
    if (typeof body === 'string') headers['content-length'] = String(Buffer.byteLength(body));
    return new Promise<Response>((resolve, reject) => {
      const request = (url.protocol === 'https:' ? https : http).request(url, {
        method: init.method ?? 'GET',
        headers,
        agent: agents[url.protocol as 'http:' | 'https:'],
      });
      const abort = () => request.destroy(signal!.reason instanceof Error ? signal!.reason : new Error('the request was aborted'));
      const release = () => signal?.removeEventListener('abort', abort);
      signal?.addEventListener('abort', abort, { once: true });
      request.once('close', release);
      request.once('error', (e) => reject(new TypeError('fetch failed', { cause: e })));
      request.once('response', (response) => {
        const status = response.statusCode ?? 0;
        const answer = { status, statusText: response.statusMessage ?? '', headers: responseHeaders(response.headers) };
        if (NO_BODY.has(status)) {
          response.resume();
          resolve(new Response(null, answer));
          return;
        }
        const json = status >= 200 && status < 300 && /^application\/json\s*(;|$)/i.test(response.headers['content-type'] ?? '');
        resolve(
          json
            ? (new JsonAnswer(answer, readWhole(response, oversized)) as unknown as Response)
            : new Response(bodyOf(response, oversized), answer),
        );
      });
      request.end(body ?? undefined);
    });
  };
  return {
    fetch: fetchOne as typeof fetch,
    close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}

/**
 * A successful JSON answer (how most upstreams answer a call), read whole as it arrives: the part of a web Response
 * the SDK's transport uses (status, headers, json, text, body), without building the web stream a Response is made
 * of, which cost about a tenth of svc's CPU per upstream call. An SSE answer, an error or a redirect is a real
 * Response (above).
 */
class JsonAnswer {
  readonly ok = true;
  readonly redirected = false;
  readonly type = 'basic';
  readonly url = '';
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  #text: Promise<string> | null;

  constructor(answer: { status: number; statusText: string; headers: Headers }, text: Promise<string>) {
    ({ status: this.status, statusText: this.statusText, headers: this.headers } = answer);
    // Read or not, a failed answer must not become an unhandled rejection.
    text.catch(() => undefined);
    this.#text = text;
  }

  get bodyUsed(): boolean {
    return this.#text === null;
  }

  get body(): ReadableStream<Uint8Array> | null {
    if (this.#text === null) return null;
    const text = this.#take();
    return new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(new TextEncoder().encode(await text));
        controller.close();
      },
    });
  }

  text(): Promise<string> {
    if (this.#text === null) return Promise.reject(new TypeError('the body has already been read'));
    return this.#take();
  }

  json(): Promise<unknown> {
    return this.text().then((t) => JSON.parse(t) as unknown);
  }

  arrayBuffer(): Promise<ArrayBuffer> {
    return this.text().then((t) => new TextEncoder().encode(t).buffer as ArrayBuffer);
  }

  #take(): Promise<string> {
    const text = this.#text!;
    this.#text = null;
    return text;
  }
}

const UTF8 = new TextDecoder();

/** A response's body whole, as UTF-8 text, cut off past ANSWER_MAX bytes (readAnswer). */
function readWhole(response: http.IncomingMessage, oversized: () => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    readAnswer(
      response,
      oversized,
      (chunk) => chunks.push(chunk),
      // Decoded as a Response decodes it: a byte-order mark dropped, bytes that are not UTF-8 replaced.
      (failure) => (failure ? reject(failure) : resolve(UTF8.decode(Buffer.concat(chunks)))),
    );
  });
}

/** A response's body as a web stream, read as the reader asks for it, cut off past ANSWER_MAX bytes (readAnswer). */
function bodyOf(response: http.IncomingMessage, oversized: () => void): ReadableStream<Uint8Array> {
  let stop: () => void = () => undefined;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      stop = readAnswer(
        response,
        oversized,
        (chunk) => {
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 1) <= 0) response.pause();
        },
        (failure) => (failure ? controller.error(failure) : controller.close()),
      );
    },
    pull() {
      response.resume();
    },
    cancel() {
      stop();
    },
  });
}

/**
 * Reads an answer as it arrives, each chunk to `chunk`, and cuts it off past ANSWER_MAX bytes: `oversized` is told
 * and the request ended. `done` is called once, at the answer's end, or with why it failed (too large, an error, the
 * connection closed before the end). Returns what stops the reading without calling `done` (a reader that cancelled).
 */
function readAnswer(
  response: http.IncomingMessage,
  oversized: () => void,
  chunk: (chunk: Buffer) => void,
  done: (failure?: Error) => void,
): () => void {
  let seen = 0;
  let ended = false;
  const end = (failure?: Error) => {
    if (ended) return;
    ended = true;
    done(failure);
  };
  response.on('data', (data: Buffer) => {
    if (ended) return;
    seen += data.byteLength;
    if (seen > ANSWER_MAX) {
      oversized();
      end(new AnswerTooLarge('the upstream answered more than 10 MiB'));
      response.destroy();
      return;
    }
    chunk(data);
  });
  response.once('end', () => end());
  response.once('error', (e) => end(e));
  response.once('close', () => {
    if (!response.complete) end(new Error('the upstream ended its answer early'));
  });
  return () => {
    ended = true;
    response.destroy();
  };
}
