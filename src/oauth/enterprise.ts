// Enterprise-managed authorization (CONTRACT §7.1): an MCP client holding a person's enterprise sign-in exchanges
// an Identity Assertion JWT Authorization Grant (ID-JAG) from the company's identity provider for an svc access
// token, with no browser and no consent page. The JWT is checked by jose against the provider's published keys;
// the person is found or provisioned by the same rules as single sign-on; the token carries the scope `mcp`.
import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import type { Database } from '../db/open.ts';
import type { EnterpriseConfig, GroupsConfig } from '../config/load.ts';
import type { Logger } from '../log.ts';
import { provisionIn, type Arrival } from '../auth/provisioning.ts';
import { claimAssertion, enterpriseGrant, issueAssertionToken } from '../store/oauth-enterprise.ts';
import { recordAudit } from '../store/audit.ts';
import { OauthProtocolError } from '../domain/errors.ts';

export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
export const ID_JAG_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag';
const ID_JAG_TYPE = 'oauth-id-jag+jwt';
/** Signatures by the provider's published keys only: never `none`, never a shared-secret (HMAC) algorithm. */
const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** An assertion lives at most this long (exp - iat), as the contract allows. */
const MAX_LIFETIME_S = 300;
/** How far ahead of svc's clock an assertion's iat may be (clocks differ a little). */
const CLOCK_SKEW_S = 60;
const FETCH_TIMEOUT_MS = 5000;
/** The provider's metadata is read again after this; its keys are refetched by jose on an unknown kid too. */
const DISCOVERY_MAX_AGE_MS = 3_600_000;
const KEYS_MAX_AGE_MS = 600_000;

/** What makes an assertion unusable: the token endpoint's `invalid_grant`, with a description for the client. */
const refused = (description: string) => new OauthProtocolError('invalid_grant', description);
/** The provider's keys cannot be had right now: the client may try again. */
const unavailable = (description: string) => new OauthProtocolError('temporarily_unavailable', description, 503, { 'Retry-After': '30' });

export interface VerifiedAssertion {
  readonly subject: string;
  readonly jti: string;
  readonly expiresAt: number;
  readonly claims: JWTPayload;
}

type KeySet = ReturnType<typeof createRemoteJWKSet>;

export class EnterpriseIssuer {
  private keys: { set: KeySet; at: number } | null = null;

  constructor(
    readonly config: EnterpriseConfig,
    private readonly log: Logger,
  ) {}

  /** The provider's JWKS, from its discovery document (OpenID Connect, else RFC 8414). */
  private async keySet(now: number): Promise<KeySet> {
    if (this.keys && now - this.keys.at < DISCOVERY_MAX_AGE_MS) return this.keys.set;
    const issuer = this.config.issuer.replace(/\/$/, '');
    let jwksUri: string | null = null;
    for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
      try {
        const res = await fetch(`${issuer}${path}`, {
          redirect: 'error',
          signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
          headers: { accept: 'application/json' },
        });
        if (!res.ok) continue;
        const meta = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
        if (meta.issuer !== this.config.issuer || typeof meta.jwks_uri !== 'string') continue;
        const uri = new URL(meta.jwks_uri);
        if (uri.protocol !== 'https:' && uri.origin !== new URL(issuer).origin) continue;
        jwksUri = uri.href;
        break;
      } catch (e) {
        this.log.warn('enterprise_discovery_failed', { issuer: this.config.issuer, path, error: (e as Error).message });
      }
    }
    if (jwksUri === null) {
      if (this.keys) return this.keys.set; // keep the keys we have while the provider's metadata is away
      throw unavailable('the enterprise identity provider cannot be reached; try again shortly');
    }
    const set = createRemoteJWKSet(new URL(jwksUri), {
      timeoutDuration: FETCH_TIMEOUT_MS,
      cooldownDuration: 30_000,
      cacheMaxAge: KEYS_MAX_AGE_MS,
    });
    this.keys = { set, at: now };
    return set;
  }

  /**
   * Every check of §7.1 but the replay, which needs the database: type, signature, issuer, audience, client,
   * resource, expiry and lifetime. Throws OauthProtocolError: invalid_grant, or temporarily_unavailable (503).
   */
  async verify(
    assertion: string,
    expected: { clientId: string; resources: readonly string[] },
    now = Date.now(),
  ): Promise<VerifiedAssertion> {
    const keys = await this.keySet(now);
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(assertion, keys, {
        issuer: this.config.issuer,
        audience: this.config.audience,
        typ: ID_JAG_TYPE,
        algorithms: ASYMMETRIC,
        requiredClaims: ['exp', 'iat', 'jti', 'client_id'],
        currentDate: new Date(now),
      }));
    } catch (e) {
      throw refusalOf(e);
    }
    const subject = claims[this.config.subjectClaim];
    if (typeof subject !== 'string' || subject === '') throw refused(`the assertion has no ${this.config.subjectClaim} claim`);
    if (claims.client_id !== expected.clientId) throw refused('the assertion was issued to another client');
    if (claims.resource !== undefined && !(typeof claims.resource === 'string' && expected.resources.includes(claims.resource))) {
      throw refused('the assertion is for another resource');
    }
    // One audience, svc: an assertion also meant for another service could be replayed there by svc's operator.
    if (typeof claims.aud !== 'string') throw refused('the assertion must name svc as its only audience');
    const { exp, iat, jti } = claims as { exp: number; iat: number; jti: unknown };
    if (exp <= iat) throw refused('the assertion expires before it was issued');
    if (exp - iat > MAX_LIFETIME_S) throw refused(`the assertion lives longer than ${MAX_LIFETIME_S} seconds`);
    if (iat > now / 1000 + CLOCK_SKEW_S) throw refused('the assertion was issued in the future');
    if (typeof jti !== 'string' || jti === '' || jti.length > 512) throw refused('the assertion has no usable jti');
    return { subject, jti, expiresAt: exp * 1000, claims };
  }
}

function refusalOf(e: unknown): Error {
  if (e instanceof errors.JWKSTimeout) return unavailable("the enterprise identity provider's keys cannot be fetched; try again shortly");
  if (e instanceof errors.JWTExpired) return refused('the assertion has expired');
  if (e instanceof errors.JWTClaimValidationFailed) return refused(`the assertion's ${e.claim} is not what svc accepts`);
  if (e instanceof errors.JOSEAlgNotAllowed) return refused('the assertion must be signed with an asymmetric algorithm');
  if (e instanceof errors.JWKSNoMatchingKey) return refused('the assertion is signed with a key the identity provider does not publish');
  if (e instanceof errors.JWSSignatureVerificationFailed) return refused("the assertion's signature does not verify");
  if (e instanceof errors.JOSEError) return refused('the assertion is not a well-formed signed JWT');
  if (e instanceof Error && e.name === 'TypeError')
    return unavailable("the enterprise identity provider's keys cannot be fetched; try again shortly");
  return e instanceof Error ? e : new Error(String(e));
}

export interface ExchangeContext {
  readonly database: Database;
  readonly issuer: EnterpriseIssuer;
  readonly groups: GroupsConfig | null;
  readonly accessSeconds: number;
  /** the resources a token may be for (<base>/oauth/mcp and <base>/mcp) */
  readonly resources: readonly string[];
}

/**
 * The jwt-bearer grant: the assertion verified, then in one write: the jti recorded (a replay loses here, on any
 * instance), the person found or provisioned as single sign-on does, the grant (a revoked one refuses), the token.
 * A refusal at any step rolls all of it back: a refused assertion creates, links and updates no one.
 */
export async function exchangeAssertion(
  ctx: ExchangeContext,
  client: { id: string; name: string },
  assertion: string,
  peer: string,
): Promise<{ accessToken: string; expiresIn: number }> {
  const verified = await ctx.issuer.verify(assertion, { clientId: client.id, resources: ctx.resources }, ctx.database.now());
  const config = ctx.issuer.config;
  const arrival = arrivalOf(verified, config, ctx.groups, peer);
  return ctx.database.write(async (tx) => {
    // Judged again once the write has its turn: fetching the keys and the write queue may have taken it past exp.
    const now = ctx.database.now();
    if (verified.expiresAt <= now) throw refused('the assertion has expired');
    if (!(await claimAssertion(tx, config.issuer, verified.jti, verified.expiresAt, now))) throw refused('the assertion was used already');
    const found = await provisionIn(tx, arrival, { jit: config.jit, defaultAcl: config.defaultAcl, groups: ctx.groups });
    if (!found.ok) throw refused(found.message);
    const user = found.user;
    const grant = await enterpriseGrant(tx, user.id, client.id, now);
    if (!grant) throw refused("the person revoked this app's access in svc (Connected apps)");
    const issued = await issueAssertionToken(tx, grant, user.id, client, ctx.accessSeconds, await ctx.database.tokenEpoch(tx));
    await recordAudit(tx, {
      actor: user.uid,
      via: 'oauth',
      action: 'oauth.assertion',
      target: client.id,
      detail: { grant: grant.id, issuer: config.issuer },
      peer,
    });
    return issued;
  });
}

/** The person an assertion names, in the terms provisioning shares with single sign-on. */
function arrivalOf(verified: VerifiedAssertion, config: EnterpriseConfig, groups: GroupsConfig | null, peer: string): Arrival {
  const { claims } = verified;
  const text = (k: string) => (typeof claims[k] === 'string' ? (claims[k] as string) : null);
  const groupsClaim = groups ? claims[groups.claim] : undefined;
  return {
    provider: `oidc:${config.issuer}`,
    subject: verified.subject,
    email: text('email'),
    emailVerified: claims.email_verified === true,
    name: text('name'),
    uidClaim: config.uidClaim === null ? null : text(config.uidClaim),
    groups: Array.isArray(groupsClaim) ? groupsClaim.filter((g): g is string => typeof g === 'string') : [],
    peer,
  };
}
