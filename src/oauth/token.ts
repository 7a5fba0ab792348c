// The token endpoint's grants: an authorization code (with PKCE) for a new refresh family, a refresh token for the
// next one of its family, and (when configured) an enterprise identity assertion for an access token alone. Each use
// and what it issues commit in one write transaction.
import { issueTokens, revokeOauthToken, useCode, useRefresh, type CodeUse, type Issued, type RefreshUse } from '../store/oauth.ts';
import type { OauthClient } from '../store/oauth-clients.ts';
import { recordAudit } from '../store/audit.ts';
import { randomId } from '../domain/secrets.ts';
import { pkceMatches } from './rules.ts';
import type { OauthServer } from './context.ts';
import { exchangeAssertion, JWT_BEARER_GRANT, type ExchangeContext } from './enterprise.ts';
import { OauthProtocolError } from '../domain/errors.ts';

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

type Refusal = readonly [error: string, description: string];

const CODE_PROBLEMS: Record<Exclude<CodeUse, { ok: true }>['why'], Refusal> = {
  unknown: ['invalid_grant', 'the code is unknown'],
  expired: ['invalid_grant', 'the code is expired'],
  reused: ['invalid_grant', 'the code is used already; what it issued is revoked'],
  other_client: ['invalid_grant', "the code is not this client's"],
  revoked: ['invalid_grant', 'the grant behind the code was revoked'],
  redirect_uri: ['invalid_grant', 'redirect_uri differs from the authorization request'],
  verifier: ['invalid_grant', 'code_verifier does not match the code_challenge'],
  resource: ['invalid_target', 'resource differs from the authorization request'],
};

const REFRESH_PROBLEMS: Record<Exclude<RefreshUse, { ok: true }>['why'], Refusal> = {
  unknown: ['invalid_grant', 'the refresh token is unknown'],
  revoked: ['invalid_grant', 'the refresh token is revoked'],
  expired: ['invalid_grant', 'the refresh token is expired'],
  reused: ['invalid_grant', 'the refresh token was used already; its family is revoked'],
  other_client: ['invalid_grant', "the refresh token is not this client's"],
  resource: ['invalid_target', 'resource differs from the grant'],
};

const refused = ([error, description]: Refusal) => new OauthProtocolError(error, description);

/**
 * The result of a grant's write: tokens, or a refusal that must be committed before it is answered (a reused code
 * or refresh token revoked what it issued; the refusal is thrown once that is saved). Any other refusal is thrown
 * inside the write, which then changes nothing.
 */
type Committed = { readonly issued: TokenResponse } | { readonly refusal: Refusal };

function answer(result: Committed): TokenResponse {
  if ('refusal' in result) throw refused(result.refusal);
  return result.issued;
}

type Params = Record<string, unknown>;
const str = (body: Params, k: string) => (typeof body[k] === 'string' ? (body[k] as string) : undefined);

/**
 * POST /oauth/token for an authenticated client. `enterprise` is set when ID-JAGs are accepted. Refusals are thrown
 * as OauthProtocolError (a provider whose keys cannot be fetched: 503 temporarily_unavailable).
 */
export async function tokenRequest(
  server: OauthServer,
  client: OauthClient,
  body: Params,
  from: string,
  enterprise: ExchangeContext | null = null,
): Promise<TokenResponse> {
  if (body.grant_type === 'authorization_code') return exchangeCode(server, client, body, from);
  if (body.grant_type === 'refresh_token') return refresh(server, client, body, from);
  if (body.grant_type === JWT_BEARER_GRANT && enterprise) return assertionGrant(enterprise, client, body, from);
  throw new OauthProtocolError(
    'unsupported_grant_type',
    `grant_type is authorization_code or refresh_token${enterprise ? ` or ${JWT_BEARER_GRANT}` : ''}`,
  );
}

async function assertionGrant(enterprise: ExchangeContext, client: OauthClient, body: Params, from: string): Promise<TokenResponse> {
  const assertion = str(body, 'assertion');
  if (!assertion) throw new OauthProtocolError('invalid_request', 'assertion is required');
  const issued = await exchangeAssertion(enterprise, client, assertion, from);
  return { access_token: issued.accessToken, token_type: 'Bearer', expires_in: issued.expiresIn, scope: 'mcp' };
}

const ttlOf = (server: OauthServer) => ({ accessSeconds: server.config.accessTtlSeconds, refreshSeconds: server.config.refreshTtlSeconds });

async function exchangeCode(server: OauthServer, client: OauthClient, body: Params, from: string): Promise<TokenResponse> {
  const code = str(body, 'code');
  if (!code) throw new OauthProtocolError('invalid_request', 'code is required');
  const familyId = `fam_${randomId(12)}`;
  const verifier = str(body, 'code_verifier') ?? '';
  const result = await server.database.write(async (tx): Promise<Committed> => {
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
    if (!use.ok) {
      // A reused code has just revoked what it issued: that must commit, so this refusal is returned, not thrown.
      if (use.why === 'reused') return { refusal: CODE_PROBLEMS.reused };
      throw refused(CODE_PROBLEMS[use.why]);
    }
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
    return { issued: response(issued) };
  });
  return answer(result);
}

async function refresh(server: OauthServer, client: OauthClient, body: Params, from: string): Promise<TokenResponse> {
  const token = str(body, 'refresh_token');
  if (!token) throw new OauthProtocolError('invalid_request', 'refresh_token is required');
  const result = await server.database.write(async (tx): Promise<Committed> => {
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
      if (use.why !== 'reused') throw refused(REFRESH_PROBLEMS[use.why]);
      // A reused refresh token has just revoked its family: that and its audit record must commit, so this refusal
      // is returned, not thrown.
      await recordAudit(tx, {
        actor: null,
        via: 'oauth',
        action: 'oauth.family_revoked',
        target: client.id,
        detail: { reason: 'refresh token reused' },
        peer: from,
      });
      return { refusal: REFRESH_PROBLEMS.reused };
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
    return { issued: response(issued) };
  });
  return answer(result);
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
