// The request pipeline shared by every route: security headers, the request log, the client's address and the
// caller's resolution. What each route allows (body limits, the Origin rule) is its policy, declared where it is
// mounted (policy.ts).
import { randomBytes } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import { getCookie } from 'hono/cookie';
import { nonceOf, type Ctx, type Env, type Services } from './context.ts';
import { addressMatcher, clientAddress } from '../domain/addresses.ts';
import { credentialKind } from '../auth/core.ts';
import { inSpan, tracing } from '../trace/spans.ts';

/**
 * The Content-Security-Policy of svc's pages: `frames`, the sources a page may frame (none but /admin/tools, which
 * frames its sandboxed preview of an app).
 */
export function pagePolicy(nonce: string, formTo?: string, frames?: string): string {
  return `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; img-src 'self' data:; form-action 'self'${formTarget(formTo)};${frames === undefined ? '' : ` frame-src ${frames};`} frame-ancestors 'none'; base-uri 'none'`;
}

export function securityHeaders(): MiddlewareHandler<Env> {
  return async (c, next) => {
    await next();
    setHeader(c, 'X-Content-Type-Options', 'nosniff');
    setHeader(c, 'Referrer-Policy', 'same-origin');
    // A route that set its own framing and policy keeps them (an admin's app preview: framed by svc's page alone).
    if (!c.res.headers.has('X-Frame-Options')) setHeader(c, 'X-Frame-Options', 'DENY');
    setHeader(c, 'Cache-Control', 'no-store');
    if ((c.res.headers.get('content-type') ?? '').startsWith('text/html') && !c.res.headers.has('Content-Security-Policy'))
      setHeader(c, 'Content-Security-Policy', pagePolicy(nonceOf(c), c.get('formTarget')));
  };
}

/**
 * A header on the answer a route has already made. Hono's `c.header` copies the whole response for each header set
 * after the route answered (and turns @hono/node-server's light response into a web Response with a stream, about a
 * sixth of a `/mcp` request's CPU for the five headers here); the answer's own Headers take it in place. Headers that
 * cannot change (a Response.redirect's, a fetch's) go through `c.header`.
 */
function setHeader(c: Ctx, name: string, value: string): void {
  try {
    c.res.headers.set(name, value);
  } catch {
    c.header(name, value);
  }
}

/** A CSP source for a redirect target: its origin, or for an app's own scheme (cursor://), the scheme. */
function formTarget(uri: string | undefined): string {
  if (uri === undefined) return '';
  try {
    const u = new URL(uri);
    const source = u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : u.protocol;
    return /^[a-z][a-z0-9+.-]*:(\/\/[A-Za-z0-9.:[\]-]+)?$/.test(source) ? ` ${source}` : '';
  } catch {
    return '';
  }
}

/** The pattern of the handler that answered (middleware patterns aside), so ids in paths do not make every line or span differ. */
const routeOf = (c: Ctx): string | null => [...matchedRoutes(c)].reverse().find((r) => r.method !== 'ALL')?.path ?? null;

/**
 * Each HTTP request a server span (CONTRACT §8), continuing the caller's W3C `traceparent`: its method, route and
 * status, and who called (uid and the kind of credential, never the credential). A refusal (any 4xx or 5xx) marks it
 * failed with the status as `error.type`. Nothing when tracing is off.
 */
export function requestSpan(): MiddlewareHandler<Env> {
  return (c, next) => {
    if (!tracing()) return next();
    const method = c.req.method;
    const parent = { traceparent: c.req.header('traceparent'), tracestate: c.req.header('tracestate') };
    return inSpan(method, { kind: 'server', parent, attributes: { 'http.request.method': method } }, async (span) => {
      await next();
      const route = routeOf(c);
      span.rename(route === null ? method : `${method} ${route}`);
      span.set('http.route', route ?? undefined);
      span.set('http.response.status_code', c.res.status);
      const r = c.get('resolution');
      if (r?.kind === 'principal') {
        span.set('user.id', r.principal.user.uid);
        span.set('svc.credential.kind', credentialKind(r.principal));
      }
      if (c.res.status >= 400) span.fail(String(c.res.status));
    });
  };
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Request ids need to be unique, not secret: a random prefix per process and a counter. */
const ID_PREFIX = randomBytes(6).toString('base64url');
let requestCount = 0;

/**
 * One line per request, with a request id: the X-Request-Id a trusted proxy sent, else a new one; it is echoed in
 * the response. `route` is the pattern of the handler that answered (middleware patterns aside), so ids in paths
 * do not make every line different; null when no route matched.
 */
export function requestLog(services: Services): MiddlewareHandler<Env> {
  const trustedProxy = addressMatcher(services.config.server.trustedProxies);
  return async (c, next) => {
    const start = performance.now();
    await next();
    const r = c.get('resolution');
    const route = routeOf(c);
    const ms = performance.now() - start;
    services.metrics.request(route ?? 'unmatched', c.req.method, c.res.status, ms / 1000);
    const given = c.req.header('x-request-id');
    const requestId =
      given !== undefined && REQUEST_ID.test(given) && trustedProxy(c.get('peer') ?? '')
        ? given
        : `${ID_PREFIX}${(requestCount++).toString(36)}`;
    setHeader(c, 'X-Request-Id', requestId);
    services.log.info('request', {
      request_id: requestId,
      method: c.req.method,
      route,
      path: c.req.path,
      status: c.res.status,
      ms: Math.round(ms * 10) / 10,
      peer: c.get('client'),
      via: r?.kind === 'principal' ? r.principal.via : undefined,
      uid: r?.kind === 'principal' ? r.principal.user.uid : undefined,
      rejected: r?.kind === 'rejected' ? r.rejection.reason : undefined,
    });
  };
}

/** The TCP peer, and the client behind trusted proxies: for every route, before any credential is read. */
export function peerAddresses(services: Services, peerOf: (c: Ctx) => string): MiddlewareHandler<Env> {
  const trustedProxy = addressMatcher(services.config.server.trustedProxies);
  return async (c, next) => {
    const peer = peerOf(c);
    c.set('peer', peer);
    c.set('client', clientAddress(peer, c.req.header('x-forwarded-for') ?? null, trustedProxy));
    await next();
  };
}

/** Resolves the caller once per request; routes read it with principalOf(). */
export function resolveCaller(services: Services): MiddlewareHandler<Env> {
  return async (c, next) => {
    const request = { method: c.req.method, headers: c.req.raw.headers, peer: c.get('peer'), cookie: (name: string) => getCookie(c, name) };
    // The authentication step is a span of its own: which channel answered and how, never what it was shown.
    const resolution = tracing()
      ? await inSpan('svc.authenticate', {}, async (span) => {
          const answer = await services.auth.resolve(request);
          if (answer.kind === 'principal') {
            span.set('user.id', answer.principal.user.uid);
            span.set('svc.credential.kind', credentialKind(answer.principal));
          } else if (answer.kind === 'rejected') {
            span.set('svc.auth.channel', answer.channel);
            span.fail(answer.rejection.outcome);
          }
          return answer;
        })
      : await services.auth.resolve(request);
    c.set('resolution', resolution);
    if (resolution.kind === 'principal') services.metrics.auth(resolution.principal.via, 'ok');
    else if (resolution.kind === 'rejected') services.metrics.auth(resolution.channel, resolution.rejection.outcome);
    else services.metrics.auth('none', 'missing');
    await next();
  };
}
