// The OpenID Connect relying party, on openid-client (certified): discovery, the authorization code flow with
// PKCE S256, state and nonce, and ID token validation (signature, iss, aud, exp, nonce; the callback's iss where
// the provider sends it). svc never checks an ID token by hand.
import * as oidc from 'openid-client';
import type { OidcConfig, GroupsConfig } from '../config/load.ts';
import type { Logger } from '../log.ts';
import type { Flow } from '../store/oidc-flows.ts';
import type { Arrival } from './provisioning.ts';
import { OidcFailure, OidcUnavailable } from './oidc-errors.ts';

export { OidcFailure, OidcUnavailable };

const DISCOVERY_TIMEOUT_S = 10;
const RETRY_MAX_MS = 60_000;

export class RelyingParty {
  private configuration: oidc.Configuration | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** when discovery last failed (ms since the epoch), for the metrics; null until it has */
  lastErrorAt: number | null = null;

  constructor(
    readonly config: OidcConfig,
    private readonly groups: GroupsConfig | null,
    private readonly log: Logger,
  ) {}

  get provider(): string {
    return `oidc:${this.config.issuer}`;
  }

  /** One discovery attempt: the provider's metadata at <issuer>/.well-known/openid-configuration. */
  async discover(): Promise<oidc.Configuration> {
    const insecure = new URL(this.config.issuer).protocol === 'http:'; // allowed for loopback issuers only (config)
    return oidc.discovery(new URL(this.config.issuer), this.config.clientId, undefined, oidc.ClientSecretBasic(this.config.clientSecret), {
      timeout: DISCOVERY_TIMEOUT_S,
      ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
    });
  }

  /** Discovers in the background, retrying with backoff; other channels serve meanwhile. */
  start(): void {
    let delay = 1000;
    const attempt = async () => {
      try {
        this.configuration = await this.discover();
        this.log.info('oidc_ready', { issuer: this.config.issuer });
      } catch (e) {
        if (this.stopped) return;
        this.lastErrorAt = Date.now();
        this.log.warn('oidc_discovery_failed', { issuer: this.config.issuer, error: (e as Error).message, retry_in_s: delay / 1000 });
        this.timer = setTimeout(() => void attempt(), delay);
        this.timer.unref();
        delay = Math.min(delay * 2, RETRY_MAX_MS);
      }
    };
    void attempt();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** true once the provider's metadata is known */
  get ready(): boolean {
    return this.configuration !== null;
  }

  private configured(): oidc.Configuration {
    if (!this.configuration)
      throw new OidcUnavailable('single sign-on is not available right now: the identity provider has not answered yet');
    return this.configuration;
  }

  private scope(): string {
    return this.groups && this.groups.claim === 'groups' ? 'openid email profile groups' : 'openid email profile';
  }

  /** A fresh flow and the provider URL to send the browser to. */
  async begin(next: string): Promise<{ url: URL; flow: Flow }> {
    const configuration = this.configured();
    const verifier = oidc.randomPKCECodeVerifier();
    const flow: Flow = { state: oidc.randomState(), nonce: oidc.randomNonce(), verifier, next };
    const url = oidc.buildAuthorizationUrl(configuration, {
      redirect_uri: this.config.redirectUrl,
      scope: this.scope(),
      response_type: 'code',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: flow.state,
      nonce: flow.nonce,
    });
    return { url, flow };
  }

  /** Exchanges the code and validates the ID token; returns who arrived. */
  async finish(query: string, flow: Flow): Promise<Omit<Arrival, 'peer'>> {
    const configuration = this.configured();
    // The callback as the provider addressed it: redirect_url exactly as configured, with the query received.
    const current = new URL(this.config.redirectUrl);
    current.search = query;
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
    try {
      tokens = await oidc.authorizationCodeGrant(configuration, current, {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      });
    } catch (e) {
      throw failure(e);
    }
    const idClaims = tokens.claims();
    if (!idClaims) throw new OidcFailure(400, 'the identity provider sent no ID token');
    let info: Record<string, unknown> = {};
    if (tokens.access_token && configuration.serverMetadata().userinfo_endpoint) {
      try {
        info = await oidc.fetchUserInfo(configuration, tokens.access_token, idClaims.sub);
      } catch (e) {
        throw failure(e);
      }
    }
    // The ID token is authoritative; userinfo fills in profile claims it lacks.
    const claims: Record<string, unknown> = { ...info, ...idClaims };
    const subject = claims[this.config.subjectClaim];
    if (typeof subject !== 'string' || subject === '') {
      throw new OidcFailure(400, `the identity provider sent no "${this.config.subjectClaim}" claim to identify the account`);
    }
    const groupsClaim = this.groups ? claims[this.groups.claim] : undefined;
    const str = (v: unknown) => (typeof v === 'string' ? v : null);
    return {
      provider: this.provider,
      subject,
      email: str(claims.email),
      // Only an explicit true counts: a provider that says nothing has not vouched for the address.
      emailVerified: claims.email_verified === true,
      name: str(claims.name),
      uidClaim: str(claims[this.config.uidClaim]),
      groups: Array.isArray(groupsClaim)
        ? groupsClaim.filter((g): g is string => typeof g === 'string')
        : typeof groupsClaim === 'string'
          ? groupsClaim.split(',').map((g) => g.trim())
          : [],
    };
  }
}

function failure(e: unknown): OidcFailure {
  if (e instanceof oidc.AuthorizationResponseError) {
    return new OidcFailure(
      400,
      `the identity provider did not sign you in (${e.error}${e.error_description ? `: ${e.error_description}` : ''})`,
    );
  }
  if (e instanceof oidc.ResponseBodyError) return new OidcFailure(400, `the identity provider refused the sign-in (${e.error})`);
  // fetch() failing, or openid-client's timeout: the provider is unreachable, not wrong.
  const code = (e as { code?: unknown }).code;
  if (e instanceof TypeError || code === 'OAUTH_TIMEOUT' || code === 'OAUTH_ABORT') {
    return new OidcFailure(502, 'the identity provider could not be reached; try again later');
  }
  // Everything else is a response that failed validation (signature, iss, aud, exp, nonce, …).
  const cause = (e as { cause?: { message?: unknown } }).cause;
  const detail = typeof cause?.message === 'string' ? `: ${cause.message}` : '';
  return new OidcFailure(400, `the sign-in could not be verified (${(e as Error).message}${detail})`);
}
