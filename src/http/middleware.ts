// The request pipeline shared by every route: security headers, body limits, the request log, caller
// resolution and the same-origin rule for ambient credentials.
import { randomBytes } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { matchedRoutes } from 'hono/route';
import { getCookie } from 'hono/cookie';
import { apiError, nonceOf, principalOf, wantsHtml, type Ctx, type Env, type Services } from './context.ts';
import { addressMatcher, clientAddress } from '../domain/addresses.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
export const LIMITS = { form: 16 * KiB, json: 1 * MiB, mcp: 4 * MiB, upload: 2 * MiB } as const;

export function securityHeaders(): MiddlewareHandler<Env> {
  return async (c, next) => {
    await next();
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('Referrer-Policy', 'same-origin');
    c.header('X-Frame-Options', 'DENY');
    c.header('Cache-Control', 'no-store');
    if ((c.res.headers.get('content-type') ?? '').startsWith('text/html')) {
      const nonce = nonceOf(c);
      c.header(
        'Content-Security-Policy',
        `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; img-src 'self' data:; form-action 'self'${formTarget(c.get('formTarget'))}; frame-ancestors 'none'; base-uri 'none'`,
      );
    }
  };
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

/** Forms 16 KiB, JSON 1 MiB, /mcp 4 MiB, a document uploaded on /admin/items 2 MiB; larger is 413 before the body is read. */
export function bodyLimits(): MiddlewareHandler<Env> {
  const tooLarge = (c: Ctx, maxSize: number) =>
    // Connection: close, so the server does not go on reading a body it has already refused.
    apiError(c, 'payload_too_large', `the request body is larger than ${maxSize / KiB} KiB`, { Connection: 'close' });
  const limiters = new Map<number, MiddlewareHandler<Env>>(
    Object.values(LIMITS).map((maxSize) => [maxSize, bodyLimit({ maxSize, onError: (c) => tooLarge(c as never, maxSize) })]),
  );
  const limitFor = (c: Ctx): number => {
    if (c.req.path === '/mcp' || c.req.path === '/oauth/mcp') return LIMITS.mcp;
    // A registration is a few hundred bytes of JSON; anyone may send one, so it gets the small limit.
    if (c.req.path === '/oauth/register') return LIMITS.form;
    const type = c.req.header('content-type') ?? '';
    if (c.req.path === '/admin/items' && /^multipart\/form-data\b/i.test(type)) return LIMITS.upload;
    return /^application\/json\b/i.test(type) ? LIMITS.json : LIMITS.form;
  };
  return async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    const maxSize = limitFor(c);
    // A declared length is judged from the header alone (asking for the body would build a full Request object for
    // every POST); a chunked body is counted as it is read.
    const declared = c.req.header('content-length');
    const chunked = c.req.header('transfer-encoding') !== undefined;
    if (!chunked) return declared !== undefined && Number(declared) > maxSize ? tooLarge(c, maxSize) : next();
    return limiters.get(maxSize)!(c, next);
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
    const route = [...matchedRoutes(c)].reverse().find((r) => r.method !== 'ALL')?.path ?? null;
    const ms = performance.now() - start;
    services.metrics.request(route ?? 'unmatched', c.req.method, c.res.status, ms / 1000);
    const given = c.req.header('x-request-id');
    const requestId =
      given !== undefined && REQUEST_ID.test(given) && trustedProxy(c.get('peer') ?? '')
        ? given
        : `${ID_PREFIX}${(requestCount++).toString(36)}`;
    c.header('X-Request-Id', requestId);
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
    const resolution = await services.auth.resolve({
      method: c.req.method,
      headers: c.req.raw.headers,
      peer: c.get('peer'),
      cookie: (name) => getCookie(c, name),
    });
    c.set('resolution', resolution);
    if (resolution.kind === 'principal') services.metrics.auth(resolution.principal.via, 'ok');
    else if (resolution.kind === 'rejected') services.metrics.auth(resolution.channel, resolution.rejection.outcome);
    else services.metrics.auth('none', 'missing');
    await next();
  };
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Endpoints that act on what the request itself carries (a bearer token, client credentials), never a cookie. */
const NOT_AMBIENT = new Set(['/mcp', '/oauth/mcp', '/oauth/token', '/oauth/register', '/oauth/revoke']);

/**
 * /mcp from a browser page: the MCP transport requires servers to validate Origin (DNS rebinding). A request that
 * carries one must come from base_url's origin or an allowed_origins entry; clients that send none are not
 * browsers and pass.
 */
export function mcpOrigin(services: Services): MiddlewareHandler<Env> {
  const allowed = new Set([services.config.server.baseUrl, ...services.config.server.allowedOrigins]);
  return async (c, next) => {
    const origin = c.req.header('origin');
    if (origin !== undefined && !allowed.has(origin)) {
      return apiError(
        c,
        'forbidden',
        `requests from the origin ${JSON.stringify(origin.slice(0, 100))} are not allowed; add it to [server] allowed_origins`,
      );
    }
    return next();
  };
}

/** True when Origin (or, without it, Referer) names base_url's origin. */
export function sameOrigin(headers: Headers, baseUrl: string): boolean {
  const origin = headers.get('origin');
  if (origin !== null) return origin === baseUrl;
  const referer = headers.get('referer');
  if (referer === null) return false;
  try {
    return new URL(referer).origin === baseUrl;
  } catch {
    return false;
  }
}

/**
 * State changes whose identity the browser adds by itself (session cookie, or a proxy's identity headers)
 * must come from our own origin. Bearer requests are exempt; /mcp accepts only JSON bodies, which a
 * cross-site form cannot send. POST /login is checked in its route, where no identity exists yet.
 */
export function sameOriginForAmbient(services: Services): MiddlewareHandler<Env> {
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method) || NOT_AMBIENT.has(c.req.path)) return next();
    const principal = principalOf(c);
    if (principal !== null && principal.via !== 'token' && !sameOrigin(c.req.raw.headers, services.config.server.baseUrl)) {
      return crossSite(c);
    }
    return next();
  };
}

export function crossSite(c: Ctx): Response {
  const message = 'cross-site request refused: this form must be sent from the svc site itself';
  return wantsHtml(c) ? c.text(message, 403) : apiError(c, 'forbidden', message);
}
