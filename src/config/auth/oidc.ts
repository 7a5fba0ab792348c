// auth.oidc: single sign-on through an OpenID Connect provider.
import { secretFrom, type AuthContext, type Section, type Spec } from './section.ts';
import { checkIssuer, isHttpUrl } from './urls.ts';
import type { OidcConfig } from '../types.ts';

export const OIDC_KEYS: Spec = {
  enabled: 'bool',
  issuer: 'text',
  client_id: 'text',
  client_secret_env: 'env',
  redirect_url: 'text',
  jit: 'bool',
  default_acl: 'labels',
  uid_claim: 'text',
  subject_claim: 'text',
};

/** Called only when oidc is enabled. */
export function readOidc(section: Section, context: AuthContext): OidcConfig {
  const { problems } = context;
  const why = 'oidc is enabled';
  const issuer = section.required('issuer', why);
  checkIssuer(section, issuer, problems);
  const clientId = section.required('client_id', why);
  const clientSecret = secretFrom(section, 'client_secret_env', why, context) ?? '';
  const redirectUrl = section.required('redirect_url', why);
  if (redirectUrl !== '') {
    if (!isHttpUrl(redirectUrl) || new URL(redirectUrl).pathname !== '/oidc/callback') {
      problems.push(`${section.path('redirect_url')}: "${redirectUrl}" must be an http(s) URL whose path is /oidc/callback`);
    }
  }
  return {
    issuer,
    clientId,
    clientSecret,
    redirectUrl,
    jit: section.bool('jit'),
    defaultAcl: section.labels('default_acl'),
    uidClaim: section.raw('uid_claim') || 'preferred_username',
    subjectClaim: section.raw('subject_claim') || 'sub',
  };
}
