// auth.session: the cookie that keeps people signed in after local or single sign-on login.
import { secretFrom, type AuthContext, type Section, type Spec } from './section.ts';
import type { SessionConfig } from '../types.ts';

export const SESSION_KEYS: Spec = { cookie_name: 'text', ttl: 'duration', secret_env: 'env' };

const MIN_SECRET_BYTES = 32;

/**
 * Checked in full whenever a channel that logs people in by cookie is on (`neededBy` names it); otherwise only a
 * ttl that is given is checked, and there is no session.
 */
export function readSession(section: Section, neededBy: string | null, secure: boolean, context: AuthContext): SessionConfig | null {
  const { problems } = context;
  if (neededBy === null) {
    section.duration('ttl', null);
    return null;
  }
  const cookieName = section.required('cookie_name', neededBy);
  if (cookieName !== '' && !/^[A-Za-z0-9_-]{1,64}$/.test(cookieName)) {
    problems.push(`${section.path('cookie_name')}: "${cookieName}" is not a cookie name (letters, digits, _ and -)`);
  }
  const ttlSeconds = section.required('ttl', neededBy) === '' ? null : section.duration('ttl', null);
  const secret = secretFrom(section, 'secret_env', neededBy, context);
  if (secret !== null && context.mode === 'serve' && Buffer.byteLength(secret) < MIN_SECRET_BYTES) {
    problems.push(
      `${section.path('secret_env')}: the secret in ${section.raw('secret_env')} is ${Buffer.byteLength(secret)} bytes; it must be at least ${MIN_SECRET_BYTES} (try: openssl rand -base64 48)`,
    );
  }
  // Over https the prefixes make browsers refuse a cookie set by a subdomain or over plain http.
  return {
    cookieName: secure ? `__Host-${cookieName}` : cookieName,
    flowCookieName: secure ? `__Secure-${cookieName}_oidc` : `${cookieName}_oidc`,
    ttlSeconds: ttlSeconds ?? 0,
    secret: Buffer.from(secret ?? ''),
  };
}
