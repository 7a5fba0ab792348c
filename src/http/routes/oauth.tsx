// svc as an OAuth 2.1 authorization server for MCP clients (CONTRACT §7): metadata, dynamic registration,
// the authorization endpoint with sign-in and consent, the token endpoint (codes with PKCE S256, refresh-token
// rotation), revocation, and the caller's grants. Protocol rules are in oauth/rules.ts, records in store/oauth.ts.
import { Hono } from 'hono';
import { timingSafeEqual } from 'node:crypto';
import type { Env, Services, Ctx } from '../context.ts';
import { principalOf, nonceOf } from '../context.ts';
import { requireCaller, caller, actorOf } from '../guards.ts';
import { readBody, restrictionFromForm } from '../forms.ts';
import { ConsentPage, OauthErrorPage } from '../pages/consent.tsx';
import type { OauthConfig } from '../../config/load.ts';
import {
  authorizationServerMetadata, grantedScope, pkceMatches, protectedResourceMetadata, redirectMatches, redirectUriProblem,
  resourceAllowed, resourceFor,
} from '../../oauth/rules.ts';
import {
  activeGrant, consent, getClient, holdRequest, issueCode, issueTokens, listGrants, registerClient, revokeGrant, revokeOauthToken,
  takeRequest, useCode, useRefresh, saveMetadataClient, type AuthMethod, type OauthClient, type PendingRequest,
} from '../../store/oauth.ts';
import { fetchClientMetadata, isMetadataUrl, MetadataRefused } from '../../oauth/client-metadata.ts';
import { AssertionRefused, EnterpriseIssuer, exchangeAssertion, JWT_BEARER_GRANT, ProviderUnavailable, type ExchangeContext } from '../../oauth/enterprise.ts';
import { reserveAttempt } from '../../store/throttle.ts';
import { recordAudit, recordActorAudit } from '../../store/audit.ts';
import { randomId, storedHash } from '../../domain/secrets.ts';
import { iso } from '../../domain/json.ts';
import { AppError } from '../../domain/errors.ts';
import type { LabelSet } from '../../domain/labels.ts';
import { checkTokenLabels } from '../../store/tokens.ts';

/** Dynamic registrations one client address may make in the throttle window (15 minutes). */
const REGISTRATIONS_PER_ADDRESS = 20;
const AUTH_METHODS: readonly AuthMethod[] = ['none', 'client_secret_post', 'client_secret_basic'];
const CONTROL = /[\x00-\x1f\x7f]/;

type OauthError = { error: string; error_description: string };
const oauthError = (error: string, description: string): OauthError => ({ error, error_description: description });

export function oauthRoutes(services: Services, oauth: OauthConfig): Hono<Env> {
  const { database, config } = services;
  const db = database.db;
  const base = config.server.baseUrl;
  const ttl = { accessSeconds: oauth.accessTtlSeconds, refreshSeconds: oauth.refreshTtlSeconds };
  const enterprise: ExchangeContext | null = oauth.enterprise && {
    database, issuer: new EnterpriseIssuer(oauth.enterprise, services.log), groups: config.auth.groups, accessSeconds: oauth.accessTtlSeconds,
    resources: [resourceFor(base), `${base}/mcp`],
  };
  const app = new Hono<Env>();

  // ---- metadata (RFC 8414, RFC 9728)
  app.get('/.well-known/oauth-authorization-server', (c) => c.json(authorizationServerMetadata(base, oauth)));
  app.get('/.well-known/oauth-protected-resource/oauth/mcp', (c) => c.json(protectedResourceMetadata(base, resourceFor(base))));
  if (oauth.advertiseOnMcp) {
    const mcp = () => protectedResourceMetadata(base, `${base}/mcp`);
    app.get('/.well-known/oauth-protected-resource/mcp', (c) => c.json(mcp()));
    app.get('/.well-known/oauth-protected-resource', (c) => c.json(mcp()));
  }

  // ---- dynamic client registration (RFC 7591)
  if (oauth.dynamicRegistration) {
    app.post('/oauth/register', async (c) => {
      const reserved = await database.write((tx) => reserveAttempt(tx, [[`register:${c.get('client')}`, REGISTRATIONS_PER_ADDRESS]]));
      if (!reserved.ok) return c.json(oauthError('too_many_requests', 'too many registrations from this address; try again later'), 429, { 'Retry-After': String(reserved.retryAfter) });
      let body: Record<string, unknown>;
      try {
        body = await readBody(c);
      } catch {
        return c.json(oauthError('invalid_client_metadata', 'send the client metadata as a JSON object'), 400);
      }
      const checked = checkRegistration(body);
      if ('error' in checked) return c.json(checked, 400);
      const secret = checked.authMethod === 'none' ? null : `svcs_${randomId(30)}`;
      const client = await database.write(async (tx) => {
        const made = await registerClient(tx, { kind: 'dynamic', name: checked.name, redirectUris: checked.redirectUris, authMethod: checked.authMethod, secret });
        await recordAudit(tx, { actor: null, via: 'anonymous', action: 'oauth.client_register', target: made.id, detail: { name: made.name, redirect_uris: made.redirectUris }, peer: c.get('client') });
        return made;
      });
      return c.json(
        {
          client_id: client.id,
          client_id_issued_at: Math.floor(client.createdAt / 1000),
          ...(secret ? { client_secret: secret, client_secret_expires_at: 0 } : {}),
          client_name: client.name,
          redirect_uris: client.redirectUris,
          token_endpoint_auth_method: client.authMethod,
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          scope: 'mcp',
        },
        201,
      );
    });
  }

  // ---- the authorization endpoint
  const errorPage = (c: Ctx, message: string) => c.html(<OauthErrorPage nonce={nonceOf(c)} message={message} />, 400);
  const back = (c: Ctx, redirectUri: string, params: Record<string, string | null | undefined>) => {
    const to = new URL(redirectUri);
    for (const [k, v] of Object.entries({ ...params, iss: base })) if (v !== null && v !== undefined) to.searchParams.set(k, v);
    return c.redirect(to.href, 302);
  };
  const consentPage = (c: Ctx, client: OauthClient, request: PendingRequest, secret: string) => {
    const principal = caller(c);
    const target = new URL(request.redirectUri);
    // The answer redirects there, and browsers hold a form's redirects to the page's form-action.
    c.set('formTarget', request.redirectUri);
    return c.html(
      <ConsentPage
        nonce={nonceOf(c)}
        uid={principal.user.uid}
        canLogout={principal.via === 'session'}
        clientName={client.name}
        unverified={client.kind === 'dynamic'}
        clientHost={client.kind === 'metadata' ? new URL(client.id).host : null}
        redirect={target.protocol === 'http:' || target.protocol === 'https:' ? target.host : `${target.protocol}//${target.host}`}
        scope={request.scope}
        request={secret}
        labels={principal.user.labels}
      />,
    );
  };

  /**
   * The client for an authorization request, fetching a metadata document when its copy is missing or stale. Anyone
   * can ask, so the fetches one client address may cause are limited like registrations.
   */
  const resolveClient = async (id: string | undefined, from: string): Promise<OauthClient | string> => {
    const unknown = 'svc does not know this app (client_id). Register it first.';
    if (!id) return unknown;
    const known = await getClient(db, id);
    if (known && known.kind !== 'metadata') return known;
    if (!isMetadataUrl(id)) return unknown;
    if (!oauth.clientMetadataDocuments) return 'svc does not accept client metadata documents; register the app instead.';
    if (known && (known.refreshAt ?? 0) > Date.now()) return known;
    const allowed = await database.write((tx) => reserveAttempt(tx, [[`metadata-fetch:${from}`, REGISTRATIONS_PER_ADDRESS]]));
    if (!allowed.ok) return `too many new apps from this address; try again in ${Math.ceil(allowed.retryAfter / 60)} minute(s).`;
    try {
      const meta = await fetchClientMetadata(id, { allowPrivate: oauth.clientMetadataAllowPrivate });
      return await database.write((tx) => saveMetadataClient(tx, id, meta));
    } catch (e) {
      if (e instanceof MetadataRefused) return `svc cannot use this app's metadata document: ${e.message}.`;
      throw e;
    }
  };

  app.get('/oauth/authorize', async (c) => {
    const q = c.req.query();
    // Client and redirect URI first: until both are trusted, nothing is sent anywhere.
    const client = await resolveClient(q.client_id, c.get('client'));
    if (typeof client === 'string') return errorPage(c, client);
    const redirectUri = q.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
    if (!redirectUri || !redirectMatches(client.redirectUris, redirectUri)) return errorPage(c, 'The address this app asked svc to send you back to is not one it registered.');
    const state = q.state ?? null;
    if (q.response_type !== 'code') return back(c, redirectUri, { error: 'unsupported_response_type', state });
    if (q.code_challenge_method !== 'S256' || !/^[A-Za-z0-9_-]{43}$/.test(q.code_challenge ?? '')) {
      return back(c, redirectUri, { error: 'invalid_request', error_description: 'PKCE is required, with code_challenge_method S256', state });
    }
    const resource = q.resource ?? resourceFor(base);
    if (!resourceAllowed(base, resource)) return back(c, redirectUri, { error: 'invalid_target', error_description: `svc issues tokens for ${resourceFor(base)}`, state });

    const principal = principalOf(c);
    if (!principal || principal.via === 'token') {
      return c.redirect(`/login?next=${encodeURIComponent(c.req.path + new URL(c.req.url).search)}`, 303);
    }
    const request: PendingRequest = { clientId: client.id, redirectUri, scope: grantedScope(q.scope), state, codeChallenge: q.code_challenge!, resource };
    const grant = await activeGrant(db, principal.user.id, client.id);
    const known = grant !== null && redirectMatches(grant.redirectUris, redirectUri) && request.scope.split(' ').every((s) => grant.scope.split(' ').includes(s));
    if (known) {
      const code = await database.write((tx) => issueCode(tx, grant, request));
      return back(c, redirectUri, { code, state });
    }
    const secret = await database.write((tx) => holdRequest(tx, principal.user.id, request));
    return consentPage(c, client, request, secret);
  });

  app.post('/oauth/authorize', requireCaller({ page: true, via: ['session', 'header'] }), async (c) => {
    const body = await readBody(c, { lists: ['labels'] });
    const principal = caller(c);
    // Checked before the request is used up, so a mistake on the page can be corrected with the back button.
    let labels: LabelSet | null = null;
    if (body.decision === 'approve') {
      try {
        labels = checkTokenLabels(restrictionFromForm(body));
      } catch (e) {
        if (e instanceof AppError) return errorPage(c, e.message);
        throw e;
      }
    }
    const request = typeof body.request === 'string' ? await database.write((tx) => takeRequest(tx, body.request as string, principal.user.id)) : null;
    if (!request) return errorPage(c, 'This request has expired or was answered already. Start again from the app.');
    if (body.decision !== 'approve') {
      await database.write((tx) => recordActorAudit(tx, actorOf(c), 'oauth.deny', request.clientId));
      return back(c, request.redirectUri, { error: 'access_denied', state: request.state });
    }
    const code = await database.write(async (tx) => {
      const grant = await consent(tx, principal.user.id, request.clientId, request.scope, request.redirectUri, labels);
      await recordActorAudit(tx, actorOf(c), 'oauth.grant', request.clientId, { grant: grant.id, scope: grant.scope, redirect_uri: request.redirectUri, labels: grant.labels });
      return issueCode(tx, grant, request);
    });
    return back(c, request.redirectUri, { code, state: request.state });
  });

  // ---- client authentication at the token and revocation endpoints
  const authenticateClient = async (c: Ctx, body: Record<string, unknown>): Promise<OauthClient | null> => {
    let id = typeof body.client_id === 'string' ? body.client_id : undefined;
    let secret = typeof body.client_secret === 'string' ? body.client_secret : undefined;
    const basic = /^Basic ([A-Za-z0-9+/=]+)$/.exec(c.req.header('authorization') ?? '');
    if (basic) {
      const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) return null;
      try {
        id = decodeURIComponent(decoded.slice(0, colon));
        secret = decodeURIComponent(decoded.slice(colon + 1));
      } catch {
        return null;
      }
    }
    if (!id) return null;
    const client = await getClient(db, id);
    if (!client) return null;
    if (client.authMethod === 'none') return client;
    if (!secret || !client.secretHash) return null;
    return timingSafeEqual(Buffer.from(storedHash(secret)), Buffer.from(client.secretHash)) ? client : null;
  };
  const tokenError = (c: Ctx, e: OauthError, status: 400 | 401 = 400) =>
    c.json(e, status, status === 401 ? { 'WWW-Authenticate': 'Basic realm="svc"' } : {});

  app.post('/oauth/token', async (c) => {
    const body = await readBody(c);
    const client = await authenticateClient(c, body);
    if (!client) return tokenError(c, oauthError('invalid_client', 'unknown client, or its credentials are wrong'), 401);
    const str = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : undefined);
    const family = (id: string, resource: string, scope: string) => ({ id, clientId: client.id, clientName: client.name, resource, scope });

    if (body.grant_type === 'authorization_code') {
      const code = str('code');
      if (!code) return tokenError(c, oauthError('invalid_request', 'code is required'));
      const familyId = `fam_${randomId(12)}`;
      const result = await database.write(async (tx): Promise<OauthError | Awaited<ReturnType<typeof issueTokens>>> => {
        const use = await useCode(tx, code, client.id, familyId);
        if (!use.ok) return oauthError('invalid_grant', `the code is ${use.why === 'reused' ? 'used already; what it issued is revoked' : use.why === 'other_client' ? 'not this client\'s' : use.why}`);
        if (str('redirect_uri') !== use.redirectUri) return oauthError('invalid_grant', 'redirect_uri differs from the authorization request');
        if (!pkceMatches(str('code_verifier') ?? '', use.codeChallenge)) return oauthError('invalid_grant', 'code_verifier does not match the code_challenge');
        const resource = str('resource');
        if (resource !== undefined && resource !== use.resource) return oauthError('invalid_target', 'resource differs from the authorization request');
        const issued = await issueTokens(tx, use.grantId, family(familyId, use.resource, use.scope), ttl);
        await recordAudit(tx, { actor: null, via: 'oauth', action: 'oauth.token', target: client.id, detail: { grant: use.grantId, family: familyId }, peer: c.get('client') });
        return issued;
      });
      return 'error' in result ? tokenError(c, result) : c.json(tokenResponse(result));
    }

    if (body.grant_type === 'refresh_token') {
      const token = str('refresh_token');
      if (!token) return tokenError(c, oauthError('invalid_request', 'refresh_token is required'));
      const result = await database.write(async (tx): Promise<OauthError | Awaited<ReturnType<typeof issueTokens>>> => {
        const use = await useRefresh(tx, token, client.id, oauth.refreshGraceSeconds);
        if (!use.ok) {
          if (use.why === 'reused') await recordAudit(tx, { actor: null, via: 'oauth', action: 'oauth.family_revoked', target: client.id, detail: { reason: 'refresh token reused' }, peer: c.get('client') });
          return oauthError('invalid_grant', use.why === 'reused' ? 'the refresh token was used already; its family is revoked' : `the refresh token is ${use.why}`);
        }
        const resource = str('resource');
        if (resource !== undefined && resource !== use.resource) return oauthError('invalid_target', 'resource differs from the grant');
        const issued = await issueTokens(tx, use.grantId, family(use.familyId, use.resource, use.scope), ttl);
        await recordAudit(tx, { actor: null, via: 'oauth', action: 'oauth.refresh', target: client.id, detail: { grant: use.grantId, family: use.familyId }, peer: c.get('client') });
        return issued;
      });
      return 'error' in result ? tokenError(c, result) : c.json(tokenResponse(result));
    }
    if (body.grant_type === JWT_BEARER_GRANT && enterprise) {
      const assertion = str('assertion');
      if (!assertion) return tokenError(c, oauthError('invalid_request', 'assertion is required'));
      try {
        const issued = await exchangeAssertion(enterprise, client, assertion, c.get('client'));
        return c.json({ access_token: issued.accessToken, token_type: 'Bearer', expires_in: issued.expiresIn, scope: 'mcp' });
      } catch (e) {
        if (e instanceof AssertionRefused) return tokenError(c, oauthError('invalid_grant', e.message));
        if (e instanceof ProviderUnavailable) return c.json(oauthError('temporarily_unavailable', e.message), 503, { 'Retry-After': '30' });
        throw e;
      }
    }
    return tokenError(c, oauthError('unsupported_grant_type', `grant_type is authorization_code or refresh_token${enterprise ? ` or ${JWT_BEARER_GRANT}` : ''}`));
  });

  app.post('/oauth/revoke', async (c) => {
    const body = await readBody(c);
    const client = await authenticateClient(c, body);
    if (!client) return tokenError(c, oauthError('invalid_client', 'unknown client, or its credentials are wrong'), 401);
    if (typeof body.token === 'string') await database.write((tx) => revokeOauthToken(tx, body.token as string, client.id));
    return c.json({});
  });

  // ---- the caller's grants ("Connected apps")
  app.get('/auth/grants', requireCaller({ scope: 'api' }), async (c) =>
    c.json((await listGrants(db, caller(c).user.id)).map((g) => ({
      id: g.id, client_id: g.clientId, client_name: g.clientName, scope: g.scope, created_at: iso(g.createdAt), last_used_at: iso(g.lastUsedAt),
    }))),
  );
  app.post('/auth/grants/:id/revoke', requireCaller({ scope: 'api' }), async (c) => {
    const id = c.req.param('id');
    const done = await database.write(async (tx) => {
      if (!(await revokeGrant(tx, caller(c).user.id, id))) return false;
      await recordActorAudit(tx, actorOf(c), 'oauth.grant_revoke', id);
      return true;
    });
    if (!done) return c.json({ error: 'not_found', message: 'no such grant' }, 404);
    return /text\/html/.test(c.req.header('accept') ?? '') ? c.redirect('/', 303) : c.json({ id, state: 'revoked' });
  });

  return app;
}

function tokenResponse(issued: { accessToken: string; refreshToken: string; expiresIn: number; scope: string }) {
  return { access_token: issued.accessToken, token_type: 'Bearer', expires_in: issued.expiresIn, refresh_token: issued.refreshToken, scope: issued.scope };
}

/** RFC 7591 metadata, checked; anything svc would have to guess at is refused. */
function checkRegistration(body: Record<string, unknown>): { name: string; redirectUris: string[]; authMethod: AuthMethod } | OauthError {
  const uris = body.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > 10) return oauthError('invalid_redirect_uri', 'redirect_uris: one to ten redirect URIs');
  for (const uri of uris) {
    const problem = redirectUriProblem(uri);
    if (problem) return oauthError('invalid_redirect_uri', `redirect_uris: ${problem}`);
  }
  const method = body.token_endpoint_auth_method ?? 'none';
  if (!AUTH_METHODS.includes(method as AuthMethod)) return oauthError('invalid_client_metadata', `token_endpoint_auth_method: one of ${AUTH_METHODS.join(', ')}`);
  const grants = body.grant_types ?? ['authorization_code', 'refresh_token'];
  if (!Array.isArray(grants) || grants.some((g) => g !== 'authorization_code' && g !== 'refresh_token')) {
    return oauthError('invalid_client_metadata', 'grant_types: authorization_code and refresh_token only');
  }
  const responses = body.response_types ?? ['code'];
  if (!Array.isArray(responses) || responses.some((r) => r !== 'code')) return oauthError('invalid_client_metadata', 'response_types: code only');
  const name = body.client_name ?? 'Unnamed app';
  if (typeof name !== 'string' || name.trim() === '' || name.length > 100 || CONTROL.test(name)) {
    return oauthError('invalid_client_metadata', 'client_name: 1 to 100 characters, no control characters');
  }
  return { name: name.trim(), redirectUris: uris as string[], authMethod: method as AuthMethod };
}
