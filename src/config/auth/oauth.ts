// auth.oauth: the OAuth 2.1 authorization server for MCP clients (CONTRACT §7), and its enterprise block, the
// identity provider whose Identity Assertion JWT Authorization Grants svc accepts (CONTRACT §7.1).
import { block, type BlockSpec, type Section, type Spec } from './section.ts';
import { checkIssuer, isHttpUrl } from './urls.ts';
import type { EnterpriseConfig, OauthConfig } from '../types.ts';

export const OAUTH_KEYS: Spec = {
  enabled: 'bool',
  access_ttl: 'duration',
  refresh_ttl: 'duration',
  refresh_grace: 'duration',
  dynamic_registration: 'bool',
  client_metadata_documents: 'bool',
  advertise_on_mcp: 'bool',
  client_metadata_allow_private: 'bool',
  enterprise: 'block',
};
const ENTERPRISE_KEYS: BlockSpec = {
  issuer: 'text',
  audience: 'text',
  jit: 'bool',
  default_acl: 'labels',
  subject_claim: 'text',
  uid_claim: 'text',
};

export interface OauthContext {
  /** local, oidc or header is on */
  readonly canSignIn: boolean;
  readonly baseUrl: string;
  readonly problems: string[];
}

export function readOauth(section: Section, context: OauthContext): OauthConfig | null {
  const { problems } = context;
  const enterpriseSection = block(section, 'enterprise', ENTERPRISE_KEYS, problems);
  if (enterpriseSection && !section.bool('enabled')) {
    problems.push('auth.oauth.enterprise: takes effect only with oauth enabled; add "enabled true" under oauth, or remove the block');
  }
  if (!section.bool('enabled')) return null;
  // People grant access on a page after signing in, so one sign-in channel must be on.
  if (!context.canSignIn) problems.push('auth.oauth: needs a way for people to sign in and consent: enable local, oidc or header');
  return {
    accessTtlSeconds: section.duration('access_ttl', 3600),
    refreshTtlSeconds: section.duration('refresh_ttl', 30 * 86400),
    refreshGraceSeconds: section.duration('refresh_grace', 60),
    dynamicRegistration: section.bool('dynamic_registration', true),
    clientMetadataDocuments: section.bool('client_metadata_documents', true),
    advertiseOnMcp: section.bool('advertise_on_mcp'),
    clientMetadataAllowPrivate: section.bool('client_metadata_allow_private'),
    enterprise: enterpriseSection ? readEnterprise(enterpriseSection, context) : null,
  };
}

function readEnterprise(section: Section, { baseUrl, problems }: OauthContext): EnterpriseConfig {
  const issuer = section.required('issuer', 'oauth enterprise is configured');
  checkIssuer(section, issuer, problems);
  const audience = section.raw('audience');
  if (audience !== '' && !isHttpUrl(audience)) problems.push(`${section.path('audience')}: "${audience}" is not an http(s) URL`);
  return {
    issuer,
    audience: audience || baseUrl,
    jit: section.bool('jit'),
    defaultAcl: section.labels('default_acl'),
    subjectClaim: section.raw('subject_claim') || 'sub',
    // Only a claim named here vouches for a pre-provisioned user's uid: no default (a mutable preferred_username
    // would let an assertion link an admin), nor oidc's, which another operator chose for another way in.
    uidClaim: section.raw('uid_claim') || null,
  };
}
