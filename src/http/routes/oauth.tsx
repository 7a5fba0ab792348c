// svc as an OAuth 2.1 authorization server for MCP clients (CONTRACT §7), the parts a person's browser meets:
// metadata, the authorization endpoint with sign-in and consent, and the caller's grants. The protocol is in
// src/oauth/; this file only translates HTTP. Token, revocation and registration: oauth-endpoints.ts.
import { Hono, type Context } from 'hono';
import type { Env, Services } from '../context.ts';
import { CHANGE, READ, policyFor } from '../policy.ts';
import type { Principal } from '../../auth/core.ts';
import { principalOf, nonceOf } from '../context.ts';
import { requireCaller } from '../guards.ts';
import { formPost, readBody, restrictionFromForm } from '../forms.ts';
import { ConsentPage, OauthErrorPage } from '../pages/consent.tsx';
import type { OauthConfig } from '../../config/load.ts';
import { authorizationServerMetadata, protectedResourceMetadata, resourceFor } from '../../oauth/rules.ts';
import { authorize, answerConsent, type AuthorizeAnswer } from '../../oauth/authorize.ts';
import { listGrants } from '../../store/oauth.ts';
import { revokeOwnGrant } from '../../account/actions.ts';
import { grantJson } from '../../wire/json.ts';
import { restrictionRequest } from '../../requests/tokens.ts';
import { oauthServerOf } from './oauth-endpoints.ts';
import { nextPageHeader, pageRequest } from '../paging.ts';

type OauthServer = ReturnType<typeof oauthServerOf>;
type Policy = ReturnType<typeof policyFor>;

// ---- metadata (RFC 8414, RFC 9728)
function metadataRoutes(app: Hono<Env>, policy: Policy, base: string, oauth: OauthConfig): void {
  app.get('/.well-known/oauth-authorization-server', policy(READ), (c) => c.json(authorizationServerMetadata(base, oauth)));
  app.get('/.well-known/oauth-protected-resource/oauth/mcp', policy(READ), (c) =>
    c.json(protectedResourceMetadata(base, resourceFor(base))),
  );
  if (oauth.advertiseOnMcp) {
    const mcp = () => protectedResourceMetadata(base, `${base}/mcp`);
    app.get('/.well-known/oauth-protected-resource/mcp', policy(READ), (c) => c.json(mcp()));
    app.get('/.well-known/oauth-protected-resource', policy(READ), (c) => c.json(mcp()));
  }
}

// ---- the authorization endpoint
const errorPage = (c: Context, message: string) => c.html(<OauthErrorPage nonce={nonceOf(c)} message={message} />, 400);

/** The consent page for the signed-in `person`. */
function consentPage(c: Context, a: Extract<AuthorizeAnswer, { kind: 'consent' }>, person: Principal) {
  const target = new URL(a.request.redirectUri);
  // The answer redirects there, and browsers hold a form's redirects to the page's form-action.
  c.set('formTarget', a.request.redirectUri);
  return c.html(
    <ConsentPage
      nonce={nonceOf(c)}
      uid={person.user.uid}
      canLogout={person.via === 'session'}
      clientName={a.client.name}
      unverified={a.client.kind === 'dynamic'}
      clientHost={a.client.kind === 'metadata' ? new URL(a.client.id).host : null}
      redirect={target.protocol === 'http:' || target.protocol === 'https:' ? target.host : `${target.protocol}//${target.host}`}
      scope={a.request.scope}
      request={a.secret}
      labels={person.user.labels}
      restriction={a.restriction}
      known={a.known}
    />,
  );
}

/** The answer as a page or redirect; `principal` is the signed-in person, present whenever consent is asked. */
function answer(c: Context, a: AuthorizeAnswer, principal: Principal | null) {
  switch (a.kind) {
    case 'error_page':
      return errorPage(c, a.message);
    case 'redirect':
      return c.redirect(a.to, 302);
    case 'sign_in':
      return c.redirect(`/login?next=${encodeURIComponent(c.req.path + new URL(c.req.url).search)}`, 303);
    case 'consent':
      return consentPage(c, a, principal!);
  }
}

function authorizeRoutes(app: Hono<Env>, policy: Policy, server: OauthServer): void {
  app.get('/oauth/authorize', policy(READ), async (c) => {
    const found = principalOf(c);
    // A bearer token never signs a person in here: the page asks them to sign in instead.
    const principal = found && found.via !== 'token' ? found : null;
    return answer(c, await authorize(server, c.req.query(), principal?.user ?? null, c.get('client')), principal);
  });

  app.post('/oauth/authorize', policy(CHANGE), requireCaller({ page: true, via: ['session', 'header'] }), async (c) => {
    const body = await readBody(c, { lists: ['labels'] });
    const approve = body.decision === 'approve';
    const request = typeof body.request === 'string' ? body.request : undefined;
    // A restriction the person cannot have is a page saying why; the request stays, for the back button.
    return formPost(
      async () => {
        const restriction = approve ? restrictionRequest(restrictionFromForm(body)) : null;
        const consent = await answerConsent(server, c.var.principal.user, c.var.actor, { request, approve, restriction });
        return answer(c, consent, c.var.principal);
      },
      (_status, error) => errorPage(c, error),
      ['bad_request'],
    );
  });
}

// ---- the caller's grants ("Connected apps")
function grantRoutes(app: Hono<Env>, policy: Policy, services: Services, base: string): void {
  app.get('/auth/grants', policy(READ), requireCaller({ scope: 'api' }), async (c) => {
    const request = pageRequest(c);
    const grants = await listGrants(services.database.db, c.var.principal.user.id, request);
    return c.json(grants.rows.map(grantJson), 200, nextPageHeader(c, base, 'page', request.page, grants.more));
  });
  app.post('/auth/grants/:id/revoke', policy(CHANGE), requireCaller({ scope: 'api' }), async (c) => {
    const id = c.req.param('id');
    const done = await revokeOwnGrant(services.database, c.var.actor, c.var.principal.user, id);
    if (!done) return c.json({ error: 'not_found', message: 'no such grant' }, 404);
    return /text\/html/.test(c.req.header('accept') ?? '') ? c.redirect('/', 303) : c.json({ id, state: 'revoked' });
  });
}

export function oauthRoutes(services: Services, oauth: OauthConfig): Hono<Env> {
  const server = oauthServerOf(services, oauth);
  const app = new Hono<Env>();
  const policy = policyFor(services);
  metadataRoutes(app, policy, server.base, oauth);
  authorizeRoutes(app, policy, server);
  grantRoutes(app, policy, services, server.base);
  return app;
}
