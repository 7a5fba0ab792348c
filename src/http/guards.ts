// Route guards: turn the resolved caller into "go on" or the contract's answer for anonymous, rejected,
// non-admin and wrong-channel callers.
import type { MiddlewareHandler } from 'hono';
import type { Principal, Via } from '../auth/core.ts';
import { apiError, type Ctx, type Env } from './context.ts';
import type { Actor } from '../store/audit.ts';

export const WWW_AUTHENTICATE = 'Bearer realm="svc"';

/**
 * The answer for a caller who is not signed in or presented bad credentials; null when a principal exists.
 * `challenge` replaces the plain Bearer challenge (an OAuth-protected resource names its metadata there).
 */
export function refusal(c: Ctx, page: boolean, challengeBase = WWW_AUTHENTICATE): Response | null {
  const r = c.get('resolution');
  if (r.kind === 'principal') return null;
  if (r.kind === 'rejected') {
    const { rejection } = r;
    if (rejection.status === 403) return page ? c.text(rejection.message, 403) : apiError(c, 'forbidden', rejection.message);
    const challenge = rejection.code === 'invalid_token'
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

export function requireCaller(options: { page?: boolean; via?: readonly Via[]; challenge?: string } = {}): MiddlewareHandler<Env> {
  return async (c, next) => {
    const refused = refusal(c, options.page ?? false, options.challenge);
    if (refused) return refused;
    const principal = (c.get('resolution') as { principal: Principal }).principal;
    if (options.via && !options.via.includes(principal.via)) {
      return apiError(c, 'forbidden', `this needs a signed-in browser session${options.via.includes('header') ? ' or the proxy' : ''}, not a ${principal.via}`);
    }
    await next();
  };
}

export function requireAdmin(options: { page?: boolean } = {}): MiddlewareHandler<Env> {
  return async (c, next) => {
    const refused = refusal(c, options.page ?? false);
    if (refused) return refused;
    const principal = (c.get('resolution') as { principal: Principal }).principal;
    if (!principal.user.admin) {
      const message = 'administrators only';
      return options.page ? c.text(message, 403) : apiError(c, 'forbidden', message);
    }
    await next();
  };
}

/** The signed-in caller; only valid behind requireCaller or requireAdmin. */
export function caller(c: Ctx): Principal {
  const r = c.get('resolution');
  if (r.kind !== 'principal') throw new Error('caller() used on a route without a guard');
  return r.principal;
}

/** The caller as the audit trail records them; only valid behind requireCaller or requireAdmin. */
export function actorOf(c: Ctx): Actor {
  const principal = caller(c);
  return { uid: principal.user.uid, via: principal.via, peer: c.get('client') };
}
