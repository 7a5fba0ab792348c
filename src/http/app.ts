// The HTTP application: the shared pipeline, then each group of routes. No route authenticates by itself.
import { Hono } from 'hono';
import type { Env, Services, Ctx } from './context.ts';
import { apiError, STATUS, wantsHtml } from './context.ts';
import { securityHeaders, bodyLimits, requestLog, resolveCaller, sameOriginForAmbient } from './middleware.ts';
import { sessionRoutes } from './routes/session.tsx';
import { tokenRoutes } from './routes/tokens.tsx';
import { mcpRoutes } from './routes/mcp.ts';
import { adminApiRoutes } from './routes/admin-api.ts';
import { adminPageRoutes } from './routes/admin-pages.tsx';
import { oidcRoutes } from './routes/oidc.tsx';
import { AppError } from '../domain/errors.ts';

export type PeerOf = (c: Ctx) => string;

export function createApp(services: Services, peerOf: PeerOf): Hono<Env> {
  const app = new Hono<Env>();
  app.use(securityHeaders());
  app.use(requestLog(services));
  app.use(bodyLimits());
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.use(resolveCaller(services, peerOf));
  app.use(sameOriginForAmbient(services));
  app.route('/', sessionRoutes(services));
  if (services.oidc) app.route('/', oidcRoutes(services, services.oidc));
  app.route('/', tokenRoutes(services));
  app.route('/', mcpRoutes(services));
  app.route('/', adminApiRoutes(services));
  app.route('/', adminPageRoutes(services));

  app.notFound((c) => apiError(c, 'not_found', `no such path: ${c.req.method} ${c.req.path}`));
  app.onError((err, c) => {
    if (err instanceof AppError) {
      return wantsHtml(c) ? c.text(err.message, STATUS[err.code]) : apiError(c, err.code, err.message);
    }
    services.log.error('unhandled', { path: c.req.path, error: err instanceof Error ? err.message : String(err) });
    return c.json({ error: 'internal_error', message: 'svc failed to answer this request; the server log has details' }, 500);
  });
  return app;
}
