// The OAuth endpoints that clients call directly: token, revocation and dynamic registration. They authenticate
// clients, not people, and are mounted ahead of the auth core (see app.ts). The protocol is in src/oauth/.
import { Hono } from 'hono';
import type { Env, Services, Ctx } from '../context.ts';
import { CLIENT, REGISTRATION, policyFor } from '../policy.ts';
import { readBody } from '../forms.ts';
import type { OauthConfig } from '../../config/load.ts';
import { authenticateClient } from '../../oauth/clients.ts';
import { tokenRequest, revokeRequest } from '../../oauth/token.ts';
import { register } from '../../oauth/registration.ts';
import type { OauthServer } from '../../oauth/context.ts';
import { OauthProtocolError } from '../../domain/errors.ts';
import { EnterpriseIssuer, type ExchangeContext } from '../../oauth/enterprise.ts';
import { resourceFor } from '../../oauth/rules.ts';

export function oauthServerOf(services: Services, oauth: OauthConfig): OauthServer {
  return { database: services.database, config: oauth, base: services.config.server.baseUrl, log: services.log };
}

export function oauthClientEndpoints(services: Services, oauth: OauthConfig): Hono<Env> {
  const server = oauthServerOf(services, oauth);
  const app = new Hono<Env>();
  /** The client a request authenticates as; an unknown one, or wrong credentials, is 401 invalid_client. */
  const clientOf = async (c: Ctx, body: Record<string, unknown>) => {
    const client = await authenticateClient(server, { authorization: c.req.header('authorization'), body });
    if (!client)
      throw new OauthProtocolError('invalid_client', 'unknown client, or its credentials are wrong', 401, {
        'WWW-Authenticate': 'Basic realm="svc"',
      });
    return client;
  };
  // One per process: it keeps the enterprise provider's keys between requests.
  const enterprise: ExchangeContext | null = oauth.enterprise && {
    database: services.database,
    issuer: new EnterpriseIssuer(oauth.enterprise, services.log),
    groups: services.config.auth.groups,
    accessSeconds: oauth.accessTtlSeconds,
    resources: [resourceFor(server.base), `${server.base}/mcp`],
  };

  const policy = policyFor(services);

  app.post('/oauth/token', policy(CLIENT), async (c) => {
    const body = await readBody(c);
    return c.json(await tokenRequest(server, await clientOf(c, body), body, c.get('client'), enterprise));
  });

  app.post('/oauth/revoke', policy(CLIENT), async (c) => {
    const body = await readBody(c);
    await revokeRequest(server, await clientOf(c, body), body, c.get('client'));
    return c.json({});
  });

  if (oauth.dynamicRegistration) {
    app.post('/oauth/register', policy(REGISTRATION), async (c) => {
      const body = await readBody(c).catch(() => null);
      return c.json(await register(server, body, c.get('client')), 201);
    });
  }
  return app;
}
