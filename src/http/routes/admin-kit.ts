// What the administration pages' groups of routes share: the services, the route policies, and the guard that lets
// admins in.
import type { MiddlewareHandler } from 'hono';
import type { Services } from '../context.ts';
import { policyFor, type PolicyMiddleware, type RoutePolicy } from '../policy.ts';
import { requireAdmin, type Signed } from '../guards.ts';

export interface AdminKit {
  services: Services;
  policy: (p: RoutePolicy) => PolicyMiddleware;
  /** Admins signed in by session or through the proxy; a bearer token never opens a page. */
  adminPage: () => MiddlewareHandler<Signed>;
}

export function adminKit(services: Services): AdminKit {
  return {
    services,
    policy: policyFor(services),
    adminPage: () => requireAdmin({ page: true, via: ['session', 'header'] }),
  };
}
