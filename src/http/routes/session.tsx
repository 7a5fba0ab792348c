// Password login and logout (CONTRACT §5). Unknown user, missing password and wrong password cost the same
// and read the same, and failures are throttled per account and per client address.
import { Hono } from 'hono';
import type { Env, Services, Ctx } from '../context.ts';
import { principalOf, nonceOf } from '../context.ts';
import { LoginPage, OnwardPage } from '../pages/login.tsx';
import { readBody, safeNext, safeNextPath } from '../forms.ts';
import { READ, SIGN_IN, CHANGE, policyFor } from '../policy.ts';
import { setSessionCookie, clearSessionCookie } from '../cookies.ts';
import { signInWithPassword, signOut } from '../../account/actions.ts';
import { oauthReturnTarget } from '../../oauth/return-target.ts';

const GENERIC_FAILURE = 'Wrong username or password.';
/**
 * Pages whose answer sends the browser on to another site: Connect for an `auth = oauth` upstream redirects to its
 * authorization server. Browsers hold the sign-in form's whole redirect chain to the sign-in page's form-action
 * ('self'), so a sign-in bound there lands on an svc page first (GET /login/onward), which goes on from there.
 */
const LEAVES_SVC = /^\/upstreams\/[^/?#]+\/connect$/;

export function sessionRoutes(services: Services): Hono<Env> {
  const { config, database } = services;
  const db = database.db;
  const app = new Hono<Env>();
  const page = async (c: Ctx, status: 200 | 401 | 429 | 400, props: { next: string; error?: string; username?: string }) => {
    const returnTo = config.auth.oauth ? await oauthReturnTarget(db, props.next) : undefined;
    if (returnTo) c.set('formTarget', returnTo);
    return c.html(<LoginPage nonce={nonceOf(c)} local={config.auth.local} oidc={config.auth.oidc !== null} {...props} />, status);
  };

  const policy = policyFor(services);

  app.get('/login', policy(READ), (c) => page(c, 200, { next: safeNextPath(c.req.query('next'), config.server.baseUrl) }));

  // Same-origin whoever posts it: no identity exists yet to judge it by.
  app.post('/login', policy(SIGN_IN), async (c) => {
    const session = config.auth.session;
    if (!config.auth.local || session === null) return c.text('password sign-in is disabled on this server', 404);
    const body = await readBody(c);
    const username = typeof body.username === 'string' ? body.username.trim() : '';
    const password = typeof body.password === 'string' ? body.password : '';
    const next = safeNextPath(body.next, config.server.baseUrl);
    if (username === '' || password === '') return page(c, 400, { next, username, error: 'Enter a username and a password.' });

    const result = await signInWithPassword(database, { username, password, peer: c.get('client'), sessionSeconds: session.ttlSeconds });
    if (result.outcome === 'throttled') {
      services.metrics.login('password', 'throttled');
      c.header('Retry-After', String(result.retryAfter));
      return page(c, 429, {
        next,
        username,
        error: `Too many failed sign-ins. Try again in ${Math.ceil(result.retryAfter / 60)} minute(s).`,
      });
    }
    if (result.outcome === 'failed') {
      services.log.warn('login_failed', { peer: c.get('client') });
      services.metrics.login('password', 'failed');
      return page(c, 401, { next, username, error: GENERIC_FAILURE });
    }
    setSessionCookie(c, config, session, result.sessionId);
    services.log.info('login', { uid: result.user.uid, via: 'local' });
    services.metrics.login('password', 'ok');
    if (LEAVES_SVC.test(next)) return c.redirect(`/login/onward?next=${encodeURIComponent(next)}`, 303);
    return c.redirect(safeNext(next, config.server.baseUrl), 303);
  });

  // A navigation of its own, no longer a form's: its redirects are not held to a form-action.
  app.get('/login/onward', policy(READ), (c) => {
    const next = safeNextPath(c.req.query('next'), config.server.baseUrl);
    c.header('Refresh', `0; url=${next}`);
    return c.html(<OnwardPage nonce={nonceOf(c)} next={next} />);
  });

  app.post('/logout', policy(CHANGE), async (c) => {
    const principal = principalOf(c);
    const sessionId = principal?.via === 'session' ? principal.sessionId : undefined;
    if (sessionId) await signOut(database, sessionId);
    clearSessionCookie(c, config);
    return c.redirect('/login', 303);
  });

  return app;
}
