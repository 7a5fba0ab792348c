// Route guards: turn the resolved caller into "go on" or the contract's answer for anonymous, rejected,
// non-admin and wrong-channel callers. A guard sets the typed `principal` (and the audit trail's `actor`) on the
// context, so a handler behind one reads them as values, and one without a guard cannot name them.
import type { Context, MiddlewareHandler } from 'hono';
import { permits, type Principal, type Via } from '../auth/core.ts';
import { SCOPE_MEANING, type Scope } from '../domain/scopes.ts';
import { apiError, type Ctx, type Env } from './context.ts';
import type { Actor } from '../store/audit.ts';

export const WWW_AUTHENTICATE = 'Bearer realm="svc"';

/**
 * The answer for a caller who is not signed in or presented bad credentials; null when a principal exists.
 * `challenge` replaces the plain Bearer challenge (an OAuth-protected resource names its metadata there).
 */
export function refusal(c: Context, page: boolean, challengeBase = WWW_AUTHENTICATE): Response | null {
  const r = c.get('resolution');
  if (r.kind === 'principal') return null;
  if (r.kind === 'rejected') {
    const { rejection } = r;
    if (rejection.status === 403) return page ? c.text(rejection.message, 403) : apiError(c, 'forbidden', rejection.message);
    const challenge =
      rejection.code === 'invalid_token'
        ? `${challengeBase}, error="invalid_token", error_description="${rejection.message}"`
        : challengeBase;
    return apiError(c, 'unauthorized', rejection.message, { 'WWW-Authenticate': challenge });
  }
  if (page) {
    const next = c.req.path + (new URL(c.req.url).search || '');
    return c.redirect(`/login?next=${encodeURIComponent(next)}`, 303);
  }
  return apiError(c, 'unauthorized', 'sign in, or send "Authorization: Bearer <token>"', { 'WWW-Authenticate': challengeBase });
}

export interface GuardOptions {
  /** a browser page: anonymous callers are sent to sign in, and a bearer token never reaches it */
  readonly page?: boolean;
  /** the channels allowed here (default: any) */
  readonly via?: readonly Via[];
  /** the 401 challenge, when it names OAuth metadata */
  readonly challenge?: string;
  /** what a bearer token must be allowed to do here */
  readonly scope?: Scope;
  /** the protected resource's metadata URL, named in an insufficient_scope challenge */
  readonly resourceMetadata?: string;
}

/**
 * 403 insufficient_scope with the challenge the MCP authorization spec asks of a protected resource (RFC 6750
 * §3.1): the token is good, but not for this.
 */
export function insufficientScope(c: Context, scope: Scope, resourceMetadata?: string): Response {
  const metadata = resourceMetadata ? `, resource_metadata="${resourceMetadata}"` : '';
  return c.json(
    { error: 'insufficient_scope', message: `this token lacks the scope "${scope}" (${SCOPE_MEANING[scope]}); create a token with it` },
    403,
    { 'WWW-Authenticate': `${WWW_AUTHENTICATE}, error="insufficient_scope", scope="${scope}"${metadata}` },
  );
}

const PAGE_NOT_FOR_TOKENS = 'this page is for a signed-in browser; an access token works on /mcp and the JSON API only';

/** The checks every guard shares after the caller is known: channel, page, scope. */
function refusedPrincipal(c: Context, principal: Principal, options: GuardOptions): Response | null {
  if (options.page && principal.via === 'token') return c.text(PAGE_NOT_FOR_TOKENS, 403);
  if (options.via && !options.via.includes(principal.via)) {
    return apiError(
      c,
      'forbidden',
      `this needs a signed-in browser session${options.via.includes('header') ? ' or the proxy' : ''}, not a ${principal.via}`,
    );
  }
  if (options.scope && !permits(principal, options.scope)) return insufficientScope(c, options.scope, options.resourceMetadata);
  return null;
}

/** What a guard adds to the context: the signed-in caller, and the same as the audit trail records them. */
export type Signed = Env & { Variables: { principal: Principal; actor: Actor } };
export type SignedCtx = Context<Signed>;

function admit(c: Ctx, principal: Principal): void {
  const signed = c as unknown as SignedCtx;
  signed.set('principal', principal);
  signed.set('actor', { uid: principal.user.uid, via: principal.via, peer: c.get('client') });
}

/** A guard: `check` answers a refusal, or null to let the request on with its principal set. */
function guard(check: (c: Ctx) => Response | null): MiddlewareHandler<Signed> {
  return async (signed, next) => {
    const c = signed as unknown as Ctx;
    const refused = check(c);
    if (refused) return refused;
    const r = c.get('resolution');
    if (r.kind !== 'principal') throw new Error('a guard let an anonymous request through');
    admit(c, r.principal);
    await next();
  };
}

export function requireCaller(options: GuardOptions = {}): MiddlewareHandler<Signed> {
  return guard((c) => {
    const r = c.get('resolution');
    return (
      refusal(c, options.page ?? false, options.challenge) ?? (r.kind === 'principal' ? refusedPrincipal(c, r.principal, options) : null)
    );
  });
}

/**
 * Admins only, on the channels `via` allows (default any). The admin flag is read afresh on every request, so losing
 * it ends a token's admin scope at once; a bearer token further needs the `admin` scope (and no label restriction),
 * and never opens an admin page.
 */
export function requireAdmin(options: { page?: boolean; via?: readonly Via[] } = {}): MiddlewareHandler<Signed> {
  return guard((c) => {
    const refused = refusal(c, options.page ?? false);
    const r = c.get('resolution');
    if (refused || r.kind !== 'principal') return refused;
    const principal = r.principal;
    if (options.page && principal.via === 'token') return c.text(PAGE_NOT_FOR_TOKENS, 403);
    if (!principal.user.admin) {
      const message = 'administrators only';
      return options.page ? c.text(message, 403) : apiError(c, 'forbidden', message);
    }
    if (!permits(principal, 'admin')) return insufficientScope(c, 'admin');
    return options.via ? refusedPrincipal(c, principal, { via: options.via }) : null;
  });
}
