// The fetch svc's requests to an `auth = oauth` upstream and its authorization server go through (oauth4webapi's
// customFetch): Node's own http/https client, which connects only to addresses a rule lets through. The rule is
// asked about the address the socket is about to connect to: an address in the URL as it is, a name through a lookup
// that hands the socket only the addresses the rule allows. A name that resolves elsewhere a second time (DNS
// rebinding) is judged again at that connection, never by an earlier answer. No keep-alive: every request is a
// connection of its own, judged on its own.
//
// What it keeps of fetch: a Response, an AbortSignal that ends the request, and no redirect followed (a 3xx comes back
// as it is, and oauth4webapi refuses it). An answer over ANSWER_MAX bytes is cut off: metadata, a registration and
// tokens are small.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';

/** An authorization server's answer of more than this many bytes is not read. */
const ANSWER_MAX = 1024 * 1024;

/** Statuses whose response has no body (a web Response refuses one). */
const NO_BODY = new Set([101, 103, 204, 205, 304]);

/** Why svc may not connect to `address` (the URL's host or what its name resolved to), or null when it may. */
export type AddressRule = (address: string) => string | null;

/** A request refused for where it would connect: nothing was sent. */
export class AddressRefused extends Error {}

/** oauth4webapi's customFetch: it passes the URL as a string and a body that is a string or form parameters. */
export type OauthFetch = (
  url: string,
  init: { method: string; headers: Record<string, string>; body?: unknown; signal?: AbortSignal },
) => Promise<Response>;

/** A fetch that connects to a URL's host only where `ruleFor(url)` allows; null from it: anywhere. */
export function guardedFetch(ruleFor: (url: URL) => AddressRule | null): OauthFetch {
  return (input, init) => {
    const url = new URL(input);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.reject(new TypeError(`cannot fetch ${url.protocol} URLs`));
    const rule = ruleFor(url);
    // A URL's address is connected to as it is, without a lookup: judged here.
    const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const why = rule !== null && isIP(literal) !== 0 ? rule(literal) : null;
    if (why !== null) return Promise.reject(new AddressRefused(why));
    const body = bodyOf(init.body);
    if (body instanceof Error) return Promise.reject(body);
    const headers = { ...init.headers, ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }) };
    return new Promise<Response>((resolve, reject) => {
      const request = (url.protocol === 'https:' ? https : http).request(url, {
        method: init.method,
        headers,
        agent: false,
        ...(rule === null ? {} : { lookup: guardedLookup(rule) }),
        ...(init.signal ? { signal: init.signal } : {}),
      });
      request.once('error', (e) => reject(e instanceof AddressRefused ? e : new TypeError('fetch failed', { cause: e })));
      request.once('response', (response) => {
        const status = response.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let seen = 0;
        response.on('data', (chunk: Buffer) => {
          seen += chunk.byteLength;
          if (seen > ANSWER_MAX) request.destroy(new Error('the authorization server answered more than 1 MiB'));
          else chunks.push(chunk);
        });
        response.once('error', (e) => reject(new TypeError('fetch failed', { cause: e })));
        response.once('close', () => {
          if (!response.complete) reject(new TypeError('fetch failed: the answer ended early'));
        });
        response.once('end', () => {
          try {
            const headers = new Headers();
            for (const [key, value] of Object.entries(response.headers))
              for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(key, v);
            const content = NO_BODY.has(status) ? null : Buffer.concat(chunks);
            resolve(new Response(content, { status, statusText: response.statusMessage ?? '', headers }));
          } catch (e) {
            reject(e);
          }
        });
      });
      request.end(body);
    });
  };
}

function bodyOf(body: unknown): string | undefined | Error {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return body;
  if (body instanceof URLSearchParams) return body.toString();
  return new TypeError('a request to an authorization server has a string or form body');
}

/**
 * The system's lookup (read at each call, as dns.lookup), keeping only the addresses the rule allows: the socket
 * connects to one of those or to none. When it allows none, the connection fails with the rule's reason for the first.
 */
function guardedLookup(rule: AddressRule): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const allowed = addresses.filter((a) => rule(a.address) === null);
      const first = allowed[0];
      if (first === undefined) {
        const why = addresses[0] === undefined ? `${hostname} has no address` : rule(addresses[0].address)!;
        return callback(new AddressRefused(why), '', 0);
      }
      if (options.all) return callback(null, allowed);
      return callback(null, first.address, first.family);
    });
  };
}
