// The token endpoint's grants: an authorization code (with PKCE) for a new refresh family, a refresh token for the
// next one of its family, and (when configured) an enterprise identity assertion for an access token alone. Each use
// and what it issues commit in one write transaction.
import { issueTokens, revokeOauthToken, useCode, useRefresh, type CodeUse, type Issued, type RefreshUse } from '../store/oauth.ts';
import type { OauthClient } from '../store/oauth-clients.ts';
import { recordAudit } from '../store/audit.ts';
import { randomId } from '../domain/secrets.ts';
import { pkceMatches } from './rules.ts';
import { oauthError, type OauthError, type OauthServer } from './context.ts';
import { AssertionRefused, exchangeAssertion, JWT_BEARER_GRANT, type ExchangeContext } from './enterprise.ts';

export interface TokenResponse {
  readonly access_token: string;
  readonly token_type: 'Bearer';
  readonly expires_in: number;
  /** absent for an assertion grant: the client asks its identity provider for a new assertion instead */
  readonly refresh_token?: string;
  readonly scope: string;
}

const response = (issued: Issued): TokenResponse => ({
  access_token: issued.accessToken,
  token_type: 'Bearer',
  expires_in: issued.expiresIn,
  refresh_token: issued.refreshToken,
  scope: issued.scope,
});

const CODE_PROBLEMS: Record<Exclude<CodeUse, { ok: true }>['why'], OauthError> = {
  unknown: oauthError('invalid_grant', 'the code is unknown'),
  expired: oauthError('invalid_grant', 'the code is expired'),
  reused: oauthError('invalid_grant', 'the code is used already; what it issued is revoked'),
  other_client: oauthError('invalid_grant', "the code is not this client's"),
  revoked: oauthError('invalid_grant', 'the grant behind the code was revoked'),
  redirect_uri: oauthError('invalid_grant', 'redirect_uri differs from the authorization request'),
  verifier: oauthError('invalid_grant', 'code_verifier does not match the code_challenge'),
  resource: oauthError('invalid_target', 'resource differs from the authorization request'),
};

const REFRESH_PROBLEMS: Record<Exclude<RefreshUse, { ok: true }>['why'], OauthError> = {
  unknown: oauthError('invalid_grant', 'the refresh token is unknown'),
  revoked: oauthError('invalid_grant', 'the refresh token is revoked'),
  expired: oauthError('invalid_grant', 'the refresh token is expired'),
  reused: oauthError('invalid_grant', 'the refresh token was used already; its family is revoked'),
  other_client: oauthError('invalid_grant', "the refresh token is not this client's"),
  resource: oauthError('invalid_target', 'resource differs from the grant'),
};

type Params = Record<string, unknown>;
const str = (body: Params, k: string) => (typeof body[k] === 'string' ? (body[k] as string) : undefined);

/**
 * POST /oauth/token for an authenticated client. `enterprise` is set when ID-JAGs are accepted; a provider whose
 * keys cannot be fetched throws ProviderUnavailable (the route answers 503).
 */
export async function tokenRequest(
  server: OauthServer,
  client: OauthClient,
  body: Params,
  from: string,
  enterprise: ExchangeContext | null = null,
): Promise<TokenResponse | OauthError> {
  if (body.grant_type === 'authorization_code') return exchangeCode(server, client, body, from);
  if (body.grant_type === 'refresh_token') return refresh(server, client, body, from);
  if (body.grant_type === JWT_BEARER_GRANT && enterprise) return assertionGrant(enterprise, client, body, from);
  return oauthError(
    'unsupported_grant_type',
    `grant_type is authorization_code or refresh_token${enterprise ? ` or ${JWT_BEARER_GRANT}` : ''}`,
  );
}

async function assertionGrant(
  enterprise: ExchangeContext,
  client: OauthClient,
  body: Params,
  from: string,
): Promise<TokenResponse | OauthError> {
  const assertion = str(body, 'assertion');
  if (!assertion) return oauthError('invalid_request', 'assertion is required');
  try {
    const issued = await exchangeAssertion(enterprise, client, assertion, from);
    return { access_token: issued.accessToken, token_type: 'Bearer', expires_in: issued.expiresIn, scope: 'mcp' };
  } catch (e) {
    if (e instanceof AssertionRefused) return oauthError('invalid_grant', e.message);
    throw e;
  }
}

const ttlOf = (server: OauthServer) => ({ accessSeconds: server.config.accessTtlSeconds, refreshSeconds: server.config.refreshTtlSeconds });

async function exchangeCode(server: OauthServer, client: OauthClient, body: Params, from: string): Promise<TokenResponse | OauthError> {
  const code = str(body, 'code');
  if (!code) return oauthError('invalid_request', 'code is required');
  const familyId = `fam_${randomId(12)}`;
  const verifier = str(body, 'code_verifier') ?? '';
  return server.database.write(async (tx) => {
    const now = server.database.now();
    const use = await useCode(
      tx,
      code,
      {
        clientId: client.id,
        redirectUri: str(body, 'redirect_uri'),
        verifierMatches: (challenge) => pkceMatches(verifier, challenge),
        resource: str(body, 'resource'),
        familyId,
      },
      now,
    );
    if (!use.ok) return CODE_PROBLEMS[use.why];
    const issued = await issueTokens(
      tx,
      use.grantId,
      { id: familyId, clientId: client.id, clientName: client.name, resource: use.resource, scope: use.scope },
      ttlOf(server),
      await server.database.tokenEpoch(tx),
    );
    await recordAudit(tx, {
      actor: null,
      via: 'oauth',
      action: 'oauth.token',
      target: client.id,
      detail: { grant: use.grantId, family: familyId },
      peer: from,
    });
    return response(issued);
  });
}

async function refresh(server: OauthServer, client: OauthClient, body: Params, from: string): Promise<TokenResponse | OauthError> {
  const token = str(body, 'refresh_token');
  if (!token) return oauthError('invalid_request', 'refresh_token is required');
  return server.database.write(async (tx) => {
    const now = server.database.now();
    const use = await useRefresh(
      tx,
      token,
      {
        clientId: client.id,
        resource: str(body, 'resource'),
        graceSeconds: server.config.refreshGraceSeconds,
      },
      now,
    );
    if (!use.ok) {
      if (use.why === 'reused')
        await recordAudit(tx, {
          actor: null,
          via: 'oauth',
          action: 'oauth.family_revoked',
          target: client.id,
          detail: { reason: 'refresh token reused' },
          peer: from,
        });
      return REFRESH_PROBLEMS[use.why];
    }
    const family = {
      id: use.familyId,
      parentId: use.tokenId,
      clientId: client.id,
      clientName: client.name,
      resource: use.resource,
      scope: use.scope,
    };
    const issued = await issueTokens(tx, use.grantId, family, ttlOf(server), await server.database.tokenEpoch(tx));
    await recordAudit(tx, {
      actor: null,
      via: 'oauth',
      action: 'oauth.refresh',
      target: client.id,
      detail: { grant: use.grantId, family: use.familyId },
      peer: from,
    });
    return response(issued);
  });
}

/** POST /oauth/revoke (RFC 7009): unknown tokens are no error. A grant the app's sign-out ended is audited. */
export async function revokeRequest(server: OauthServer, client: OauthClient, body: Params, from: string): Promise<void> {
  const token = str(body, 'token');
  if (token === undefined) return;
  await server.database.write(async (tx) => {
    const ended = await revokeOauthToken(tx, token, client.id, server.database.now());
    if (!ended) return;
    await recordAudit(tx, {
      actor: ended.uid,
      via: 'oauth',
      action: 'oauth.grant_end',
      target: client.id,
      detail: { grant: ended.grantId, reason: 'the app revoked its last refresh token' },
      peer: from,
    });
  });
}
