// The authorization endpoint (CONTRACT §7): which client asks, where its answer may go, whether the person must
// be asked, and what their answer issues. Until the client and redirect URI are trusted, and for a client that
// registered itself until the person has answered, an error is a page: svc never redirects a browser to an
// address only a stranger vouched for.
import { activeGrant, consent, holdRequest, issueCode, takeRequest, type Grant, type PendingRequest } from '../store/oauth.ts';
import type { OauthClient } from '../store/oauth-clients.ts';
import { recordActorAudit, type Actor } from '../store/audit.ts';
import { checkHeldByOwner, restrictionDigest } from '../domain/restriction.ts';
import type { LabelSet } from '../domain/labels.ts';
import { grantedScope, isLoopbackRedirect, isPrivateUseScheme, redirectMatches, resourceAllowed, resourceFor } from './rules.ts';
import { resolveClient } from './clients.ts';
import type { OauthServer } from './context.ts';

export type AuthorizeAnswer =
  | { readonly kind: 'error_page'; readonly message: string }
  | { readonly kind: 'redirect'; readonly to: string }
  | { readonly kind: 'sign_in' }
  | {
      readonly kind: 'consent';
      readonly client: OauthClient;
      readonly request: PendingRequest;
      /** the secret the consent form carries */
      readonly secret: string;
      /** the standing grant's label restriction, kept unless the person changes it; null: none */
      readonly restriction: LabelSet | null;
      /** whether the person allowed this app before */
      readonly known: boolean;
    };

const page = (message: string): AuthorizeAnswer => ({ kind: 'error_page', message });

/** The redirect URI with the answer's parameters, and `iss` (RFC 9207). */
export function redirectBack(base: string, redirectUri: string, params: Record<string, string | null | undefined>): string {
  const to = new URL(redirectUri);
  for (const [k, v] of Object.entries({ ...params, iss: base })) if (v !== null && v !== undefined) to.searchParams.set(k, v);
  return to.href;
}

/**
 * RFC 8252 §8.6: anyone can send a public client's id with their own PKCE challenge and a loopback port or app
 * scheme they listen on, so such a request is asked every time. Confidential clients and https redirects are not.
 */
function mustAskEveryTime(client: OauthClient, redirectUri: string): boolean {
  if (client.authMethod !== 'none') return false;
  return isLoopbackRedirect(redirectUri) || isPrivateUseScheme(new URL(redirectUri).protocol);
}

function grantCovers(grant: Grant, redirectUri: string, scope: string): boolean {
  return redirectMatches(grant.redirectUris, redirectUri) && scope.split(' ').every((s) => grant.scope.split(' ').includes(s));
}

/** GET /oauth/authorize: `user` is the signed-in person (null: nobody, or a bearer token). */
export async function authorize(
  server: OauthServer,
  q: Record<string, string | undefined>,
  user: { id: number } | null,
  from: string,
): Promise<AuthorizeAnswer> {
  // Client and redirect URI first: until both are trusted, nothing is sent anywhere.
  const lookup = await resolveClient(server, q.client_id, from);
  if (!lookup.ok) return page(lookup.message);
  const client = lookup.client;
  const redirectUri = q.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  if (!redirectUri || !redirectMatches(client.redirectUris, redirectUri))
    return page('The address this app asked svc to send you back to is not one it registered.');
  const state = q.state ?? null;
  // Only an administrator vouched for a static client's redirect URIs; anyone else's get a page.
  const refuse = (error: string, description: string): AuthorizeAnswer =>
    client.kind === 'static'
      ? { kind: 'redirect', to: redirectBack(server.base, redirectUri, { error, error_description: description, state }) }
      : page(`This app sent a request svc cannot answer: ${description}.`);
  if (q.response_type !== 'code') return refuse('unsupported_response_type', 'svc answers response_type code only');
  if (q.code_challenge_method !== 'S256' || !/^[A-Za-z0-9_-]{43}$/.test(q.code_challenge ?? ''))
    return refuse('invalid_request', 'PKCE is required, with code_challenge_method S256');
  const resource = q.resource ?? resourceFor(server.base);
  if (!resourceAllowed(server.base, resource)) return refuse('invalid_target', `svc issues tokens for ${resourceFor(server.base)}`);

  if (!user) return { kind: 'sign_in' };
  const request: PendingRequest = {
    clientId: client.id,
    redirectUri,
    scope: grantedScope(q.scope),
    state,
    codeChallenge: q.code_challenge!,
    resource,
  };
  const grant = await activeGrant(server.database.db, user.id, client.id);
  if (grant && grantCovers(grant, redirectUri, request.scope) && !mustAskEveryTime(client, redirectUri)) {
    const code = await server.database.write((tx) => issueCode(tx, grant, request, server.database.now()));
    return { kind: 'redirect', to: redirectBack(server.base, redirectUri, { code, state }) };
  }
  const secret = await server.database.write((tx) => holdRequest(tx, user.id, request, server.database.now()));
  return { kind: 'consent', client, request, secret, restriction: grant?.restriction ?? null, known: grant !== null };
}

export interface ConsentAnswer {
  /** the secret the consent form carried */
  readonly request: string | undefined;
  readonly approve: boolean;
  /** the label restriction the form asks for (requests/tokens.ts restrictionRequest), read only when approving */
  readonly restriction: LabelSet | null;
}

/**
 * POST /oauth/authorize: the person's answer. A restriction naming labels they lack is thrown (bad_request) before the
 * request is used up, so they can correct it; from here on, errors go back to the app.
 */
export async function answerConsent(
  server: OauthServer,
  user: { id: number; labels: LabelSet },
  actor: Actor,
  answer: ConsentAnswer,
): Promise<AuthorizeAnswer> {
  // Checked before the request is used up, so a mistake on the page can be corrected with the back button.
  const labels = answer.approve ? answer.restriction : null;
  if (labels !== null) checkHeldByOwner(labels, user.labels);
  const secret = answer.request;
  const request =
    secret === undefined ? null : await server.database.write((tx) => takeRequest(tx, secret, user.id, server.database.now()));
  if (!request) return page('This request has expired or was answered already. Start again from the app.');
  if (!answer.approve) {
    await server.database.write((tx) => recordActorAudit(tx, actor, 'oauth.deny', request.clientId));
    return { kind: 'redirect', to: redirectBack(server.base, request.redirectUri, { error: 'access_denied', state: request.state }) };
  }
  const code = await server.database.write(async (tx) => {
    const grant = await consent(tx, user.id, request.clientId, request.scope, request.redirectUri, labels, server.database.now());
    await recordActorAudit(tx, actor, 'oauth.grant', request.clientId, {
      grant: grant.id,
      scope: grant.scope,
      redirect_uri: request.redirectUri,
      restriction: restrictionDigest(grant.restriction),
    });
    return issueCode(tx, grant, request, server.database.now());
  });
  return { kind: 'redirect', to: redirectBack(server.base, request.redirectUri, { code, state: request.state }) };
}
