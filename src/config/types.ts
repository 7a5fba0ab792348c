// The shape of svc's configuration as the rest of svc sees it: parsed, checked and frozen by loadConfig.
import type { LabelSet } from '../domain/labels.ts';
import type { NotifyConfig } from './notify.ts';
import type { UpstreamConfig } from './upstream.ts';

export type { UpstreamExpose, UpstreamProtocol } from './upstream.ts';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface SessionConfig {
  /** the session cookie's name as sent: `__Host-<cookie_name>` when base_url is https */
  readonly cookieName: string;
  /** the single sign-on flow cookie's name: `__Secure-<cookie_name>_oidc` when base_url is https */
  readonly flowCookieName: string;
  readonly ttlSeconds: number;
  readonly secret: Buffer;
}
export interface OidcConfig {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly redirectUrl: string;
  readonly jit: boolean;
  readonly defaultAcl: LabelSet;
  readonly uidClaim: string;
  readonly subjectClaim: string;
}
export interface HeaderConfig {
  readonly userHeader: string;
  readonly emailHeader: string;
  readonly nameHeader: string | null;
  readonly groupsHeader: string | null;
  readonly secretHeader: string;
  readonly sharedSecret: Buffer;
  readonly trustedProxies: readonly string[];
  readonly jit: boolean;
  readonly defaultAcl: LabelSet;
}
export interface OauthConfig {
  readonly accessTtlSeconds: number;
  readonly refreshTtlSeconds: number;
  readonly refreshGraceSeconds: number;
  readonly dynamicRegistration: boolean;
  readonly clientMetadataDocuments: boolean;
  readonly advertiseOnMcp: boolean;
  /** testing only: fetch client metadata documents from loopback and private addresses */
  readonly clientMetadataAllowPrivate: boolean;
  /** enterprise-managed authorization (ID-JAG, CONTRACT §7.1), or null when not configured */
  readonly enterprise: EnterpriseConfig | null;
}
/** The enterprise identity provider whose Identity Assertion JWT Authorization Grants svc accepts. */
export interface EnterpriseConfig {
  readonly issuer: string;
  /** the `aud` an assertion must carry: svc's issuer (base_url) unless configured */
  readonly audience: string;
  readonly jit: boolean;
  readonly defaultAcl: LabelSet;
  readonly subjectClaim: string;
  /** the claim that may vouch for a pre-provisioned uid and names new users, as oidc's uid_claim; null: none (only a
   * verified email links, and a new user's uid comes from the email) */
  readonly uidClaim: string | null;
}
export interface ConnectionsConfig {
  /** connections at once; past it a waiting connection is cut for a new one, else the new one is refused */
  readonly max: number;
  /** connections (or, behind a trusted proxy, requests in flight) one client address may hold */
  readonly perAddress: number;
  /** all of a request's headers must arrive within this */
  readonly headersTimeoutMs: number;
  /** a request body that brings no byte for this long is cut */
  readonly bodyIdleMs: number;
}
export interface GroupsConfig {
  readonly claim: string;
  readonly map: ReadonlyMap<string, LabelSet>;
}
export interface Config {
  readonly server: {
    readonly host: string;
    readonly port: number;
    readonly baseUrl: string; // origin only, no trailing slash
    readonly secure: boolean;
    readonly database: string;
    readonly databaseToken: string | null;
    /** addresses and networks of reverse proxies whose X-Forwarded-For names the client */
    readonly trustedProxies: readonly string[];
    /** browser origins besides base_url's that may call /mcp */
    readonly allowedOrigins: readonly string[];
    /** audit entries older than this are removed (seconds) */
    readonly auditRetentionSeconds: number;
    readonly logLevel: LogLevel;
    /** processes serving the socket; 0 = one per core */
    readonly workers: number;
    /** where GET /metrics is served, never the public listener; null = off */
    readonly metrics: { readonly host: string; readonly port: number } | null;
    /** what one process lets clients hold (CONTRACT §5 Connections) */
    readonly connections: ConnectionsConfig;
  };
  /** mail to users ([notify]); null when the section is absent */
  readonly notify: NotifyConfig | null;
  /** the MCP servers svc guards ([upstream NAME], CONTRACT §6.1), in the file's order */
  readonly upstreams: readonly UpstreamConfig[];
  readonly auth: {
    readonly session: SessionConfig | null;
    readonly local: boolean;
    readonly oidc: OidcConfig | null;
    readonly header: HeaderConfig | null;
    readonly token: boolean;
    readonly groups: GroupsConfig | null;
    /** OAuth 2.1 authorization server for MCP clients (CONTRACT §7), or null when off */
    readonly oauth: OauthConfig | null;
  };
}
export type ServerConfig = Config['server'];
export type AuthConfig = Config['auth'];

export interface LoadOptions {
  /**
   * 'serve' resolves every `_env` secret. 'data' (the user, item and token commands) checks the whole file but
   * reads only the database token, so an operator can manage data without holding the session or SSO secrets.
   */
  readonly mode: 'serve' | 'data';
  /** the folder of the configuration file: a relative `file:` database path is resolved against it (default: cwd) */
  readonly baseDir?: string;
}
