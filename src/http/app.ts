// The HTTP application: the shared pipeline, then each group of routes. No route authenticates by itself.
import { Hono } from 'hono';
import type { Env, Services, Ctx } from './context.ts';
import { apiError, STATUS, wantsHtml } from './context.ts';
import { securityHeaders, requestLog, peerAddresses, requestSpan, resolveCaller } from './middleware.ts';
import { READ, policyFor } from './policy.ts';
import { sessionRoutes } from './routes/session.tsx';
import { tokenRoutes } from './routes/tokens.tsx';
import { mcpRoutes } from './routes/mcp.ts';
import { adminApiRoutes } from './routes/admin-api.ts';
import { adminPageRoutes } from './routes/admin-pages.tsx';
import { adminItemRoutes } from './routes/admin-items.tsx';
import { adminToolApiRoutes } from './routes/admin-tools-api.ts';
import { adminToolRoutes } from './routes/admin-tools.tsx';
import { upstreamAccountRoutes } from './routes/upstream-accounts.tsx';
import { oidcRoutes } from './routes/oidc.tsx';
import { oauthRoutes } from './routes/oauth.tsx';
import { oauthClientEndpoints } from './routes/oauth-endpoints.ts';
import { jwksRoutes } from './routes/jwks.ts';
import { AppError, OauthProtocolError } from '../domain/errors.ts';
import { asUnavailable, DatabaseBusy, safeDatabaseMessage } from '../db/errors.ts';
import { problemKind } from '../db/open.ts';

/** How long /readyz waits for the write lock before it reports the database as locked. */
const READY_WAIT_MS = 1000;

export type PeerOf = (c: Ctx) => string;

export function createApp(services: Services, peerOf: PeerOf): Hono<Env> {
  const app = new Hono<Env>();
  app.use(requestSpan());
  app.use(securityHeaders());
  app.use(requestLog(services));
  const policy = policyFor(services);
  app.get('/healthz', policy(READ), (c) => c.json({ status: 'ok' }));
  app.get('/readyz', policy(READ), async (c) => {
    const problems = await services.database.problems({ waitMs: READY_WAIT_MS });
    // Single sign-on is reported, not required: the other channels serve while the provider is away.
    const oidc = services.oidc ? { oidc: services.oidc.ready ? 'ready' : 'unavailable' } : {};
    if (problems.length > 0) {
      // Anyone may ask: the answer names the kind of problem; paths and lock details go to the log, `svc check`
      // and /readyz on metrics_listen.
      services.log.warn('not_ready', { problems: problems.join('; ') });
      return c.json({ status: 'unavailable', problems: [...new Set(problems.map(problemKind))], ...oidc }, 503);
    }
    return c.json({ status: 'ready', ...oidc });
  });
  app.use(peerAddresses(services, peerOf));
  app.route('/', jwksRoutes(services));
  // The token, revocation and registration endpoints authenticate clients, not people: mounted ahead of the auth
  // core, so a client's Basic credentials are never read (or logged, or counted) as a malformed bearer token.
  const oauth = services.config.auth.oauth;
  if (oauth) app.route('/', oauthClientEndpoints(services, oauth));
  app.use(resolveCaller(services));
  app.route('/', sessionRoutes(services));
  if (services.oidc) app.route('/', oidcRoutes(services, services.oidc));
  if (oauth) app.route('/', oauthRoutes(services, oauth));
  app.route('/', tokenRoutes(services));
  app.route('/', mcpRoutes(services));
  app.route('/', adminApiRoutes(services));
  app.route('/', adminPageRoutes(services));
  app.route('/', adminItemRoutes(services));
  app.route('/', adminToolApiRoutes(services));
  app.route('/', adminToolRoutes(services));
  if (services.gateway?.accounts) app.route('/', upstreamAccountRoutes(services, services.gateway.accounts));

  app.notFound((c) => apiError(c, 'not_found', `no such path: ${c.req.method} ${c.req.path}`));
  // The one answer to every refusal thrown below: a page's text or the API's JSON, or the OAuth protocol's JSON.
  app.onError((err, c) => {
    if (err instanceof AppError) {
      const headers: Record<string, string> = err.retryAfter === undefined ? {} : { 'Retry-After': String(err.retryAfter) };
      return wantsHtml(c) ? c.text(err.message, STATUS[err.code], headers) : apiError(c, err.code, err.message, headers);
    }
    if (err instanceof OauthProtocolError) return c.json({ error: err.error, error_description: err.message }, err.status, err.headers);
    // The client went away (or shutdown cut the connection) before svc answered: nobody is there to read an error.
    if (c.req.raw.signal.aborted) {
      services.log.info('request_aborted', { path: c.req.path });
      return c.body(null, 499 as never);
    }
    // A busy lock, or a database server that is down or too slow (a read fails here as it was thrown): 503.
    const unavailable = asUnavailable(err, services.database.location);
    if (unavailable) {
      services.log.warn(unavailable instanceof DatabaseBusy ? 'database_busy' : 'database_unreachable', {
        path: c.req.path,
        error: unavailable.message,
      });
      const headers = { 'Retry-After': String(unavailable.retryAfter) };
      // The log names the database and the cause; the caller is told only what to do.
      return wantsHtml(c)
        ? c.text(unavailable.publicMessage, 503, headers)
        : apiError(c, 'unavailable', unavailable.publicMessage, headers);
    }
    services.log.error('unhandled', { path: c.req.path, error: safeDatabaseMessage(err) });
    return c.json({ error: 'internal_error', message: 'svc failed to answer this request; the server log has details' }, 500);
  });
  return app;
}
