// oidc-provider as an enterprise identity provider for tests: RFC 8693 token exchange, registered with its
// registerGrantType, that turns an ID token it issued into an Identity Assertion JWT Authorization Grant (ID-JAG)
// for another service, signed by the provider's own key (the one it publishes at its jwks_uri). The test can also
// sign assertions with that key directly, to try every claim svc must refuse.
import { randomUUID } from 'node:crypto';
import { createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT, type JWK, type JWTPayload } from 'jose';
import type Provider from 'oidc-provider';
import { errors } from 'oidc-provider';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ID_JAG_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id-jag';
export const ID_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id_token';

export interface IdJagOptions {
  /** the client id that each of the provider's clients has at the service the ID-JAG is for */
  readonly clientIds: Readonly<Record<string, string>>;
  readonly lifetimeSeconds?: number;
}

export interface IdJagIssuer {
  readonly grantType: string;
  readonly privateJwk: JWK;
  register(provider: Provider): void;
  /** An ID-JAG signed with the provider's key; `header` overrides the protected header (alg, typ, kid). */
  sign(claims: JWTPayload, header?: Record<string, unknown>): Promise<string>;
}

const KID = 'enterprise-idp-1';

export async function enableIdJag(issuer: string, options: IdJagOptions): Promise<IdJagIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const privateJwk: JWK = { ...(await exportJWK(privateKey)), kid: KID, alg: 'RS256', use: 'sig' };
  const ownKeys = createLocalJWKSet({ keys: [{ ...(await exportJWK(publicKey)), kid: KID, alg: 'RS256', use: 'sig' }] });
  const lifetime = options.lifetimeSeconds ?? 300;
  const sign = (claims: JWTPayload, header: Record<string, unknown> = {}) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: KID, typ: 'oauth-id-jag+jwt', ...header }).sign(privateKey);

  return {
    grantType: TOKEN_EXCHANGE,
    privateJwk,
    sign,
    register(provider) {
      provider.registerGrantType(
        TOKEN_EXCHANGE,
        async (ctx) => {
          const p = ctx.oidc.params as Record<string, unknown>;
          if (p.requested_token_type !== ID_JAG_TOKEN_TYPE)
            throw new errors.InvalidRequest(`requested_token_type must be ${ID_JAG_TOKEN_TYPE}`);
          if (p.subject_token_type !== ID_TOKEN_TYPE || typeof p.subject_token !== 'string')
            throw new errors.InvalidRequest('subject_token must be an ID token');
          if (typeof p.audience !== 'string') throw new errors.InvalidRequest('audience is required');
          const clientId = ctx.oidc.client!.clientId;
          let idToken: JWTPayload;
          try {
            ({ payload: idToken } = await jwtVerify(p.subject_token, ownKeys, { issuer, audience: clientId }));
          } catch {
            throw new errors.InvalidGrant('subject_token is not an ID token this provider issued to this client');
          }
          const atService = options.clientIds[clientId];
          if (!atService) throw new errors.InvalidGrant('this app may not reach that service');
          const now = Math.floor(Date.now() / 1000);
          const carried = Object.fromEntries(
            ['email', 'email_verified', 'name', 'preferred_username', 'groups'].filter((k) => k in idToken).map((k) => [k, idToken[k]]),
          );
          const jag = await sign({
            iss: issuer,
            sub: idToken.sub!,
            aud: p.audience,
            client_id: atService,
            jti: randomUUID(),
            iat: now,
            exp: now + lifetime,
            ...(typeof p.resource === 'string' ? { resource: p.resource } : {}),
            ...(typeof p.scope === 'string' ? { scope: p.scope } : {}),
            ...carried,
          });
          ctx.body = { access_token: jag, issued_token_type: ID_JAG_TOKEN_TYPE, token_type: 'N_A', expires_in: lifetime };
        },
        ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope'],
      );
    },
  };
}
