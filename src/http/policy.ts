// What a route allows before its handler runs, declared where the route is mounted: how large a body it reads, and
// from where a state change may come. Every mounted route names one policy (test/routes.test.ts walks them all), so a
// new route is safe only by saying what it is, never by someone remembering a table elsewhere.
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { apiError, principalOf, wantsHtml, type Ctx, type Env, type Services } from './context.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
export const LIMITS = { form: 16 * KiB, json: 1 * MiB, mcp: 4 * MiB, upload: 2 * MiB } as const;

/**
 * How large a body may be, larger being 413 before it is read:
 * - `form`: a form 16 KiB, JSON 1 MiB (by its Content-Type);
 * - `upload`: a multipart form 2 MiB (a document uploaded on /admin/items), else as `form`;
 * - `small`: 16 KiB whatever its type (a request anyone may send, such as a client registration);
 * - `mcp`: 4 MiB (/mcp);
 * - `none`: a route that reads no body (GET).
 */
export type BodyRule = 'none' | 'form' | 'upload' | 'small' | 'mcp';

/**
 * From where a state change may come:
 * - `ambient`: a change made with credentials the browser adds by itself (the session cookie, or the proxy's identity
 *   headers, which a proxy adds to cross-site requests too) must carry base_url's Origin (or, without one, Referer);
 *   a bearer token is exempt (a cross-site page cannot send one);
 * - `always`: base_url's origin whoever calls (POST /login, where no identity exists yet);
 * - `carried`: the request carries its own credentials (a client's, at the OAuth endpoints): no Origin rule;
 * - `mcp`: a present Origin must be base_url's or in allowed_origins (the MCP transport's DNS-rebinding rule; it takes
 *   JSON bodies only, which a cross-site form cannot send);
 * - `read`: a safe method that changes nothing.
 */
export type OriginRule = 'ambient' | 'always' | 'carried' | 'mcp' | 'read';

export interface RoutePolicy {
  readonly body: BodyRule;
  readonly origin: OriginRule;
}

/** A page or JSON read (GET). */
export const READ: RoutePolicy = { body: 'none', origin: 'read' };
/** A form post or JSON call by a signed-in caller: a page's form, the token and admin APIs. */
export const CHANGE: RoutePolicy = { body: 'form', origin: 'ambient' };
/** The admin page's document upload. */
export const UPLOAD: RoutePolicy = { body: 'upload', origin: 'ambient' };
/** The sign-in form. */
export const SIGN_IN: RoutePolicy = { body: 'form', origin: 'always' };
/** An OAuth endpoint a client calls with its own credentials. */
export const CLIENT: RoutePolicy = { body: 'form', origin: 'carried' };
/** Dynamic client registration: anyone may send one, so its body is small. */
export const REGISTRATION: RoutePolicy = { body: 'small', origin: 'carried' };
/** /mcp and /oauth/mcp. */
export const MCP: RoutePolicy = { body: 'mcp', origin: 'mcp' };

/** The policy a middleware enforces, for the test that walks every route. */
export const POLICY = Symbol('svc route policy');
export type PolicyMiddleware = MiddlewareHandler<Env> & { readonly [POLICY]: RoutePolicy };

function tooLarge(c: Ctx, maxSize: number): Response {
  // Connection: close, so the server does not go on reading a body it has already refused.
  return apiError(c, 'payload_too_large', `the request body is larger than ${maxSize / KiB} KiB`, { Connection: 'close' });
}

function limitFor(rule: BodyRule, contentType: string): number {
  if (rule === 'mcp') return LIMITS.mcp;
  if (rule === 'small' || rule === 'none') return LIMITS.form;
  if (rule === 'upload' && /^multipart\/form-data\b/i.test(contentType)) return LIMITS.upload;
  return /^application\/json\b/i.test(contentType) ? LIMITS.json : LIMITS.form;
}

const limiters = new Map<number, MiddlewareHandler<Env>>(
  Object.values(LIMITS).map((maxSize) => [maxSize, bodyLimit({ maxSize, onError: (c) => tooLarge(c as never, maxSize) })]),
);

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

export function crossSite(c: Ctx): Response {
  const message = 'cross-site request refused: this form must be sent from the svc site itself';
  return wantsHtml(c) ? c.text(message, 403) : apiError(c, 'forbidden', message);
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The Origin rule's refusal for this request, or null. */
function originRefusal(c: Ctx, rule: OriginRule, origins: { base: string; allowed: ReadonlySet<string> }): Response | null {
  if (rule === 'mcp') {
    const origin = c.req.header('origin');
    if (origin === undefined || origins.allowed.has(origin)) return null;
    return apiError(
      c,
      'forbidden',
      `requests from the origin ${JSON.stringify(origin.slice(0, 100))} are not allowed; add it to [server] allowed_origins`,
    );
  }
  if (SAFE_METHODS.has(c.req.method) || rule === 'carried' || rule === 'read') return null;
  if (rule === 'always') return sameOrigin(c.req.raw.headers, origins.base) ? null : crossSite(c);
  const principal = principalOf(c);
  if (principal === null || principal.via === 'token') return null;
  return sameOrigin(c.req.raw.headers, origins.base) ? null : crossSite(c);
}

/**
 * The middleware that enforces a route's policy: its Origin rule, then its body limit (a declared length is judged
 * from the header alone; a chunked body is counted as it is read). Given base_url and allowed_origins once.
 */
export function policies(baseUrl: string, allowedOrigins: readonly string[]): (p: RoutePolicy) => PolicyMiddleware {
  const origins = { base: baseUrl, allowed: new Set([baseUrl, ...allowedOrigins]) };
  return (p) => {
    const handler: MiddlewareHandler<Env> = async (c, next) => {
      const refused = originRefusal(c, p.origin, origins);
      if (refused) return refused;
      if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
      const maxSize = limitFor(p.body, c.req.header('content-type') ?? '');
      const declared = c.req.header('content-length');
      if (c.req.header('transfer-encoding') === undefined)
        return declared !== undefined && Number(declared) > maxSize ? tooLarge(c, maxSize) : next();
      return limiters.get(maxSize)!(c, next);
    };
    return Object.assign(handler, { [POLICY]: p });
  };
}

const factories = new WeakMap<Services, (p: RoutePolicy) => PolicyMiddleware>();

/** The policy middleware factory for this server's base_url and allowed_origins, made once. */
export function policyFor(services: Services): (p: RoutePolicy) => PolicyMiddleware {
  let factory = factories.get(services);
  if (!factory) {
    factory = policies(services.config.server.baseUrl, services.config.server.allowedOrigins);
    factories.set(services, factory);
  }
  return factory;
}
