// The token page (GET /) and the token API (CONTRACT §5 "Tokens"). The page's forms post to the same API
// routes; a browser form gets HTML back, any other client JSON.
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { wantsHtml, nonceOf } from '../context.ts';
import { CHANGE, READ, policyFor } from '../policy.ts';
import { createdTokenJson, tokenJson } from '../../wire/json.ts';
import { requireCaller, type SignedCtx } from '../guards.ts';
import { formPost, readBody, restrictionFromForm, scopesFromForm } from '../forms.ts';
import { nextPageHeader, pageHref, pageRequest } from '../paging.ts';
import { TokensPage, type ConnectedService, type TokensProps } from '../pages/tokens.tsx';
import { listAccounts } from '../../store/upstream-accounts.ts';
import { mayConnect } from '../../upstream/access.ts';
import { listTokens } from '../../store/tokens.ts';
import { restrictionRequest, tokenRequest } from '../../requests/tokens.ts';
import { listGrants } from '../../store/oauth.ts';
import { badRequest } from '../../domain/errors.ts';
import { createPersonalToken, restrictOwnToken, revokeOwnToken } from '../../account/actions.ts';

/** The person's connections to the `auth = oauth` upstreams they may connect to; null when there is none. */
async function connectedServices(services: Services, user: { id: number; labels: readonly string[] }): Promise<ConnectedService[] | null> {
  const accounts = services.gateway?.accounts;
  if (!accounts) return null;
  const mine = new Map((await listAccounts(services.database.db, { userId: user.id })).map((a) => [a.upstream, a]));
  return services.config.upstreams
    .filter((u) => u.oauth !== null && (mayConnect(u, { labels: user.labels, restriction: null }) || mine.has(u.name)))
    .map((u) => {
      const a = mine.get(u.name);
      const live = a !== undefined && a.server === u.server;
      return {
        upstream: u.name,
        state: live ? (a.state === 'connected' ? 'connected' : 'reconnect') : 'none',
        connectedAt: live ? a.connectedAt : null,
        lastUsedAt: live ? a.lastUsedAt : null,
        scope: live ? a.scope : '',
      };
    });
}

export function tokenRoutes(services: Services): Hono<Env> {
  const { database, config } = services;
  const db = database.db;
  const app = new Hono<Env>();
  const policy = policyFor(services);
  const browserOnly = () => requireCaller({ via: ['session', 'header'] });
  const ownApi = () => requireCaller({ scope: 'api' });

  const renderPage = async (
    c: SignedCtx,
    status: 200 | 201 | 400 | 409,
    extra: { created?: TokensProps['created']; error?: string } = {},
  ) => {
    const principal = c.var.principal;
    const tokensPage = pageRequest(c, 'tokens_page');
    const appsPage = pageRequest(c, 'apps_page');
    return c.html(
      <TokensPage
        nonce={nonceOf(c)}
        uid={principal.user.uid}
        admin={principal.user.admin}
        canLogout={principal.via === 'session'}
        baseUrl={config.server.baseUrl}
        tokens={{
          ...(await listTokens(db, principal.user.id, tokensPage, database.now())),
          page: tokensPage.page,
          link: (n) => pageHref(c, 'tokens_page', n),
        }}
        grants={
          config.auth.oauth
            ? { ...(await listGrants(db, principal.user.id, appsPage)), page: appsPage.page, link: (n) => pageHref(c, 'apps_page', n) }
            : null
        }
        labels={principal.user.labels}
        tokensOn={config.auth.token}
        services={await connectedServices(services, principal.user)}
        {...extra}
      />,
      status,
    );
  };

  app.get('/', policy(READ), requireCaller({ page: true, via: ['session', 'header'] }), (c) => renderPage(c, 200));

  app.post('/auth/tokens', policy(CHANGE), browserOnly(), async (c) => {
    const html = wantsHtml(c);
    const mint = async () => {
      const body = await readBody(c, { lists: ['labels', 'scopes'] });
      const request = tokenRequest({ name: body.name, ttl: body.ttl, labels: restrictionFromForm(body), scopes: scopesFromForm(body) });
      const created = await createPersonalToken(database, c.var.actor, c.var.principal.user.uid, request, config.auth.token);
      return html ? renderPage(c, 201, { created }) : c.json(createdTokenJson(created), 201);
    };
    return html ? formPost(mint, (status, error) => renderPage(c, status, { error })) : mint();
  });

  app.get('/auth/tokens', policy(READ), ownApi(), async (c) => {
    const request = pageRequest(c);
    const list = await listTokens(db, c.var.principal.user.id, request, database.now());
    return c.json(list.rows.map(tokenJson), 200, nextPageHeader(c, config.server.baseUrl, 'page', request.page, list.more));
  });

  // Only a signed-in browser (or the proxy) may change what a token can see: a token never widens itself.
  app.patch('/auth/tokens/:id', policy(CHANGE), browserOnly(), async (c) => {
    const body = await readBody(c);
    if (!('labels' in body))
      throw badRequest('labels: give an array or a label string to restrict the token, or null for your whole access', 'labels');
    const id = c.req.param('id');
    return c.json(tokenJson(await restrictOwnToken(database, c.var.actor, c.var.principal.user, id, restrictionRequest(body.labels))));
  });

  app.post('/auth/tokens/:id/revoke', policy(CHANGE), ownApi(), async (c) => {
    const id = c.req.param('id');
    await revokeOwnToken(database, c.var.actor, c.var.principal.user, id);
    if (wantsHtml(c)) return c.redirect('/', 303);
    return c.json({ id, state: 'revoked' });
  });

  return app;
}
