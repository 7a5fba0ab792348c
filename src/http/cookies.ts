// The two cookies that carry a signed id to the browser: the session, and the single sign-on flow that ties a
// callback to the browser that started it. Their names, keys and attributes are decided here only. The flow
// cookie has its own name, path and key: a flow cookie never verifies as a session, nor a session as a flow.
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import type { Context } from 'hono';
import type { Config, SessionConfig } from '../config/load.ts';
import { deriveKey, signId, verifySignedId } from '../domain/secrets.ts';
import { FLOW_TTL_SECONDS } from '../store/oidc-flows.ts';

const FLOW_PATH = '/oidc';
const flowKey = (session: SessionConfig) => deriveKey(session.secret, 'oidc-flow-cookie');

/** Sets the cookie of a session made by a sign-in action. */
export function setSessionCookie(c: Context, config: Config, session: SessionConfig, id: string): void {
  setCookie(c, session.cookieName, signId(id, session.secret), {
    httpOnly: true,
    sameSite: 'Lax',
    path: '/',
    secure: config.server.secure,
    maxAge: session.ttlSeconds,
  });
}

export function clearSessionCookie(c: Context, config: Config): void {
  if (config.auth.session) deleteCookie(c, config.auth.session.cookieName, { path: '/', secure: config.server.secure });
}

export function setFlowCookie(c: Context, config: Config, session: SessionConfig, id: string): void {
  setCookie(c, session.flowCookieName, signId(id, flowKey(session)), {
    httpOnly: true,
    sameSite: 'Lax',
    path: FLOW_PATH,
    secure: config.server.secure,
    maxAge: FLOW_TTL_SECONDS,
  });
}

/** The flow id this browser carries, if its signature checks out; the cookie is removed either way (one use). */
export function takeFlowCookie(c: Context, config: Config, session: SessionConfig): string | null {
  const value = getCookie(c, session.flowCookieName);
  deleteCookie(c, session.flowCookieName, { path: FLOW_PATH, secure: config.server.secure });
  return value === undefined ? null : verifySignedId(value, flowKey(session));
}
