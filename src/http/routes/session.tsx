// Password login and logout (CONTRACT §5). Unknown user, missing password and wrong password cost the same
// and read the same, and failures are throttled per account and per client address.
import { Hono } from 'hono';
import { setCookie, deleteCookie } from 'hono/cookie';
import type { Env, Services, Ctx } from '../context.ts';
import { principalOf, nonceOf } from '../context.ts';
import { LoginPage } from '../pages/login.tsx';
import { readBody, safeNext, safeNextPath } from '../forms.ts';
import { sameOrigin, crossSite } from '../middleware.ts';
import { passwordHashOf, rehashPassword } from '../../store/users.ts';
import { createSession, endSession } from '../../store/sessions.ts';
import { reserveAttempt, releaseAttempt, ACCOUNT_LIMIT, ADDRESS_LIMIT } from '../../store/throttle.ts';
import { verifyPassword, dummyHash, needsRehash, hashPassword, PASSWORD_MAX } from '../../auth/passwords.ts';
import { signSessionId } from '../../domain/secrets.ts';
import type { SessionConfig } from '../../config/load.ts';
import { recordAudit } from '../../store/audit.ts';
import { oauthReturnTarget } from '../../oauth/return-target.ts';

const GENERIC_FAILURE = 'Wrong username or password.';

/** Sets the cookie of a session created with createSession (in the transaction that records the sign-in). */
export function setSessionCookie(c: Ctx, services: Services, session: SessionConfig, id: string): void {
  setCookie(c, session.cookieName, signSessionId(id, session.secret), {
    httpOnly: true,
    sameSite: 'Lax',
    path: '/',
    secure: services.config.server.secure,
    maxAge: session.ttlSeconds,
  });
}

export function sessionRoutes(services: Services): Hono<Env> {
  const { config, database } = services;
  const db = database.db;
  const app = new Hono<Env>();
  const page = async (c: Ctx, status: 200 | 401 | 429 | 400, props: { next: string; error?: string; username?: string }) => {
    const returnTo = config.auth.oauth ? await oauthReturnTarget(db, props.next) : undefined;
    if (returnTo) c.set('formTarget', returnTo);
    return c.html(<LoginPage nonce={nonceOf(c)} local={config.auth.local} oidc={config.auth.oidc !== null} {...props} />, status);
  };

  app.get('/login', (c) => page(c, 200, { next: safeNextPath(c.req.query('next'), config.server.baseUrl) }));

  app.post('/login', async (c) => {
    if (!sameOrigin(c.req.raw.headers, config.server.baseUrl)) return crossSite(c);
    const session = config.auth.session;
    if (!config.auth.local || session === null) return c.text('password sign-in is disabled on this server', 404);
    const body = await readBody(c);
    const username = typeof body.username === 'string' ? body.username.trim() : '';
    const password = typeof body.password === 'string' ? body.password : '';
    const next = safeNextPath(body.next, config.server.baseUrl);
    if (username === '' || password === '') return page(c, 400, { next, username, error: 'Enter a username and a password.' });

    const accountKey = `account:${username.toLowerCase()}`;
    const addressKey = `address:${c.get('client')}`;
    // Counted before the password is checked, so parallel guesses cannot all be checked.
    const reserved = await database.write((tx) => reserveAttempt(tx, [[accountKey, ACCOUNT_LIMIT], [addressKey, ADDRESS_LIMIT]]));
    if (!reserved.ok) {
      services.metrics.login('password', 'throttled');
      c.header('Retry-After', String(reserved.retryAfter));
      return page(c, 429, { next, username, error: `Too many failed sign-ins. Try again in ${Math.ceil(reserved.retryAfter / 60)} minute(s).` });
    }

    const found = password.length <= PASSWORD_MAX ? await passwordHashOf(db, username) : null;
    const hash = found?.hash ?? null;
    // Without a stored hash, verify against a dummy so the answer takes as long as a wrong password.
    const ok = (await verifyPassword(hash ?? (await dummyHash()), password)) && hash !== null;
    if (!ok || !found) {
      // The reserved attempt stays: it is the failure.
      await database.write((tx) => recordAudit(tx, { actor: null, via: 'anonymous', action: 'login.failure', target: username.slice(0, 64), peer: c.get('client') }));
      services.log.warn('login_failed', { peer: c.get('client') });
      services.metrics.login('password', 'failed');
      return page(c, 401, { next, username, error: GENERIC_FAILURE });
    }
    const rehashed = needsRehash(hash!) ? await hashPassword(password) : null;
    const sessionId = await database.write(async (tx) => {
      await releaseAttempt(tx, reserved.ids, accountKey);
      if (rehashed) await rehashPassword(tx, found.user.id, rehashed);
      const id = await createSession(tx, found.user.id, session.ttlSeconds);
      await recordAudit(tx, { actor: found.user.uid, via: 'session', action: 'login.success', target: found.user.uid, detail: { method: 'password' }, peer: c.get('client') });
      return id;
    });
    setSessionCookie(c, services, session, sessionId);
    services.log.info('login', { uid: found.user.uid, via: 'local' });
    services.metrics.login('password', 'ok');
    return c.redirect(safeNext(next, config.server.baseUrl), 303);
  });

  app.post('/logout', async (c) => {
    const principal = principalOf(c);
    const sessionId = principal?.via === 'session' ? principal.sessionId : undefined;
    if (sessionId) await database.write((tx) => endSession(tx, sessionId));
    if (config.auth.session) deleteCookie(c, config.auth.session.cookieName, { path: '/', secure: config.server.secure });
    return c.redirect('/login', 303);
  });

  return app;
}
