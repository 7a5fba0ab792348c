// The OAuth endpoints that clients call directly: token, revocation and dynamic registration. They authenticate
// clients, not people, and are mounted ahead of the auth core (see app.ts). The protocol is in src/oauth/.
import { Hono } from 'hono';
import type { Env, Services, Ctx } from '../context.ts';
import { readBody } from '../forms.ts';
import type { OauthConfig } from '../../config/load.ts';
import { authenticateClient } from '../../oauth/clients.ts';
import { tokenRequest, revokeRequest } from '../../oauth/token.ts';
import { register } from '../../oauth/registration.ts';
import { isOauthError, oauthError, type OauthError, type OauthServer } from '../../oauth/context.ts';
import { EnterpriseIssuer, ProviderUnavailable, type ExchangeContext } from '../../oauth/enterprise.ts';
import { resourceFor } from '../../oauth/rules.ts';

export function oauthServerOf(services: Services, oauth: OauthConfig): OauthServer {
  return { database: services.database, config: oauth, base: services.config.server.baseUrl, log: services.log };
}

export function oauthClientEndpoints(services: Services, oauth: OauthConfig): Hono<Env> {
  const server = oauthServerOf(services, oauth);
  const app = new Hono<Env>();
  const error = (c: Ctx, e: OauthError, status: 400 | 401 = 400) =>
    c.json(e, status, status === 401 ? { 'WWW-Authenticate': 'Basic realm="svc"' } : {});
  const clientOf = async (c: Ctx, body: Record<string, unknown>) =>
    authenticateClient(server, { authorization: c.req.header('authorization'), body });
  const badClient = oauthError('invalid_client', 'unknown client, or its credentials are wrong');
  // One per process: it keeps the enterprise provider's keys between requests.
  const enterprise: ExchangeContext | null = oauth.enterprise && {
    database: services.database,
    issuer: new EnterpriseIssuer(oauth.enterprise, services.log),
    groups: services.config.auth.groups,
    accessSeconds: oauth.accessTtlSeconds,
    resources: [resourceFor(server.base), `${server.base}/mcp`],
  };

  app.post('/oauth/token', async (c) => {
    const body = await readBody(c);
    const client = await clientOf(c, body);
    if (!client) return error(c, badClient, 401);
    try {
      const answer = await tokenRequest(server, client, body, c.get('client'), enterprise);
      return isOauthError(answer) ? error(c, answer) : c.json(answer);
    } catch (e) {
      if (e instanceof ProviderUnavailable) return c.json(oauthError('temporarily_unavailable', e.message), 503, { 'Retry-After': '30' });
      throw e;
    }
  });

  app.post('/oauth/revoke', async (c) => {
    const body = await readBody(c);
    const client = await clientOf(c, body);
    if (!client) return error(c, badClient, 401);
    await revokeRequest(server, client, body, c.get('client'));
    return c.json({});
  });

  if (oauth.dynamicRegistration) {
    app.post('/oauth/register', async (c) => {
      const body = await readBody(c).catch(() => null);
      const answer = await register(server, body, c.get('client'));
      if (answer.status === 429) return c.json(answer.body, 429, { 'Retry-After': String(answer.retryAfter) });
      return c.json(answer.body, answer.status);
    });
  }
  return app;
}
