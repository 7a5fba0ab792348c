// /oidc/login and /oidc/callback (CONTRACT §5). The flow's state, nonce and PKCE verifier sit in a database row
// that a signed, short-lived cookie binds to this browser; the callback takes the row out, so it works once.
import { Hono } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import type { Env, Services, Ctx } from '../context.ts';
import { nonceOf } from '../context.ts';
import { MessagePage } from '../pages/message.tsx';
import { safeNext, safeNextPath } from '../forms.ts';
import { setSessionCookie } from './session.tsx';
import { createSession } from '../../store/sessions.ts';
import { startFlow, takeFlow, FLOW_TTL_SECONDS } from '../../store/oidc-flows.ts';
import { recordAudit } from '../../store/audit.ts';
import { deriveKey, signSessionId, verifySessionCookie } from '../../domain/secrets.ts';
import { provision, type Arrival } from '../../auth/provisioning.ts';
import { OidcFailure, OidcUnavailable } from '../../auth/oidc-errors.ts';
import type { RelyingParty } from '../../auth/oidc.ts';

export function oidcRoutes(services: Services, rp: RelyingParty): Hono<Env> {
  const { database, config } = services;
  const session = config.auth.session!; // required whenever oidc is enabled (config validation)
  // Its own name and key: a flow cookie can never verify as a session, nor a session cookie as a flow.
  const flowCookie = session.flowCookieName;
  const flowKey = deriveKey(session.secret, 'oidc-flow-cookie');
  const app = new Hono<Env>();
  const page = (c: Ctx, status: 400 | 403 | 502 | 503, title: string, message: string) =>
    c.html(<MessagePage nonce={nonceOf(c)} title={title} message={message} link={{ href: '/login', text: 'Back to sign-in' }} />, status);

  app.get('/oidc/login', async (c) => {
    let begun;
    try {
      begun = await rp.begin(safeNextPath(c.req.query('next'), config.server.baseUrl));
    } catch (e) {
      if (e instanceof OidcUnavailable) return page(c, 503, 'Single sign-on unavailable', e.message);
      throw e;
    }
    const id = await database.write((tx) => startFlow(tx, begun.flow));
    setCookie(c, flowCookie, signSessionId(id, flowKey), {
      httpOnly: true,
      sameSite: 'Lax',
      path: '/oidc',
      secure: config.server.secure,
      maxAge: FLOW_TTL_SECONDS,
    });
    return c.redirect(begun.url.href, 302);
  });

  app.get('/oidc/callback', async (c) => {
    const cookie = getCookie(c, flowCookie);
    deleteCookie(c, flowCookie, { path: '/oidc', secure: config.server.secure });
    const id = cookie === undefined ? null : verifySessionCookie(cookie, flowKey);
    const flow = id === null ? null : await database.write((tx) => takeFlow(tx, id));
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
    const result = await provision(database, arrival, { jit: rp.config.jit, defaultAcl: rp.config.defaultAcl, groups: config.auth.groups });
    if (!result.ok) {
      const target = (arrival.uidClaim ?? arrival.subject).slice(0, 64);
      await database.write((tx) => recordAudit(tx, { actor: null, via: 'anonymous', action: 'login.failure', target, detail: { method: 'oidc', reason: result.reason }, peer: c.get('client') }));
      services.metrics.login('oidc', 'refused');
      return page(c, 403, 'Not set up in svc', result.message);
    }
    const sessionId = await database.write(async (tx) => {
      const id = await createSession(tx, result.user.id, session.ttlSeconds);
      await recordAudit(tx, {
        actor: result.user.uid, via: 'session', action: 'login.success', target: result.user.uid,
        detail: { method: 'oidc', ...(result.created ? { provisioned: true } : {}), ...(result.linked && !result.created ? { linked: true } : {}) },
        peer: c.get('client'),
      });
      return id;
    });
    setSessionCookie(c, services, session, sessionId);
    services.metrics.login('oidc', 'ok');
    return c.redirect(safeNext(flow.next, config.server.baseUrl), 303);
  });

  return app;
}
