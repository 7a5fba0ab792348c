// /oidc/login and /oidc/callback (CONTRACT §5). The flow's state, nonce and PKCE verifier sit in a database row
// that a signed, short-lived cookie binds to this browser; the callback takes the row out, so it works once.
import { Hono } from 'hono';
import type { Env, Services, Ctx } from '../context.ts';
import { READ, policyFor } from '../policy.ts';
import { nonceOf } from '../context.ts';
import { MessagePage } from '../pages/message.tsx';
import { safeNext, safeNextPath } from '../forms.ts';
import { setFlowCookie, setSessionCookie, takeFlowCookie } from '../cookies.ts';
import { beginSignInFlow, signInWithProvider, takeSignInFlow } from '../../account/actions.ts';
import type { Arrival } from '../../auth/provisioning.ts';
import { OidcFailure, OidcUnavailable } from '../../auth/oidc-errors.ts';
import type { RelyingParty } from '../../auth/oidc.ts';

export function oidcRoutes(services: Services, rp: RelyingParty): Hono<Env> {
  const { database, config } = services;
  const session = config.auth.session!; // required whenever oidc is enabled (config validation)
  const app = new Hono<Env>();
  const page = (c: Ctx, status: 400 | 403 | 502 | 503, title: string, message: string) =>
    c.html(<MessagePage nonce={nonceOf(c)} title={title} message={message} link={{ href: '/login', text: 'Back to sign-in' }} />, status);

  const policy = policyFor(services);

  app.get('/oidc/login', policy(READ), async (c) => {
    let begun: Awaited<ReturnType<RelyingParty['begin']>>;
    try {
      begun = await rp.begin(safeNextPath(c.req.query('next'), config.server.baseUrl));
    } catch (e) {
      if (e instanceof OidcUnavailable) return page(c, 503, 'Single sign-on unavailable', e.message);
      throw e;
    }
    setFlowCookie(c, config, session, await beginSignInFlow(database, begun.flow));
    return c.redirect(begun.url.href, 302);
  });

  app.get('/oidc/callback', policy(READ), async (c) => {
    const id = takeFlowCookie(c, config, session);
    const flow = id === null ? null : await takeSignInFlow(database, id);
    const restart = 'This sign-in has expired, was used already, or was started in another browser. Please start again.';
    if (!flow) return page(c, 400, 'Sign-in expired', restart);
    if (c.req.query('error') === undefined && c.req.query('state') !== flow.state) return page(c, 400, 'Sign-in expired', restart);

    let arrival: Arrival;
    try {
      arrival = { ...(await rp.finish(new URL(c.req.url).search, flow)), peer: c.get('client') };
    } catch (e) {
      if (e instanceof OidcFailure) {
        services.log.warn('oidc_failed', { reason: e.message });
        services.metrics.login('oidc', 'failed');
        return page(c, e.status, 'Sign-in failed', e.message);
      }
      if (e instanceof OidcUnavailable) return page(c, 503, 'Single sign-on unavailable', e.message);
      throw e;
    }
    const result = await signInWithProvider(
      database,
      arrival,
      { jit: rp.config.jit, defaultAcl: rp.config.defaultAcl, groups: config.auth.groups },
      session.ttlSeconds,
    );
    if (result.outcome === 'refused') {
      services.metrics.login('oidc', 'refused');
      return page(c, 403, 'Not set up in svc', result.message);
    }
    setSessionCookie(c, config, session, result.sessionId);
    services.metrics.login('oidc', 'ok');
    return c.redirect(safeNext(flow.next, config.server.baseUrl), 303);
  });

  return app;
}
