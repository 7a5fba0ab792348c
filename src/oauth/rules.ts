// The rules of svc's OAuth 2.1 authorization server (CONTRACT §7) that need no database: redirect URIs, scopes,
// resources, PKCE, and the metadata documents (RFC 8414, RFC 9728). Every URL is built from base_url, never from
// a request's Host header.
import { createHash } from 'node:crypto';
import type { OauthConfig } from '../config/load.ts';
import { ID_JAG_PROFILE, JWT_BEARER_GRANT } from './enterprise.ts';
import { isLoopbackRedirectHost } from '../domain/addresses.ts';

/** The scopes svc's OAuth server grants (a token's own scopes are domain/scopes.ts; an OAuth token has only `mcp`). */
export const OAUTH_SCOPES = ['mcp'] as const;

export const resourceFor = (baseUrl: string) => `${baseUrl}/oauth/mcp`;

/** The resources a token may be issued for: the OAuth endpoint, and /mcp itself (same service, same tokens). */
export function resourceAllowed(baseUrl: string, resource: string): boolean {
  return resource === resourceFor(baseUrl) || resource === `${baseUrl}/mcp`;
}

/** Known scopes of a request, space-separated; unknown ones are dropped, and none asked means `mcp`. */
export function grantedScope(requested: string | undefined): string {
  const known = (requested ?? '').split(' ').filter((s) => (OAUTH_SCOPES as readonly string[]).includes(s));
  return known.length === 0 ? 'mcp' : [...new Set(known)].sort().join(' ');
}

/**
 * Private-use schemes of MCP clients that predate RFC 8252's reverse-domain rule. Any other app scheme must be a
 * reverse domain name (com.example.app), which no browser or operating-system handler uses.
 */
const KNOWN_APP_SCHEMES = new Set(['cursor:', 'vscode:', 'vscode-insiders:', 'windsurf:']);
/** Reverse-domain schemes that are in fact system handler families (vnd.ms-excel:, ms-word.…:). */
const HANDLER_FAMILIES = /^(vnd|ms-[a-z0-9-]*|x-[a-z0-9-]*|web\+[a-z]*)\./;

/** A private-use scheme: a reverse domain name of at least two labels, or one of the known app schemes. */
export function isPrivateUseScheme(protocol: string): boolean {
  if (KNOWN_APP_SCHEMES.has(protocol)) return true;
  const scheme = protocol.slice(0, -1);
  return /^[a-z][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$/.test(scheme) && !HANDLER_FAMILIES.test(scheme);
}

export function isLoopbackRedirect(uri: string): boolean {
  try {
    const u = new URL(uri);
    return u.protocol === 'http:' && isLoopbackRedirectHost(u.hostname);
  } catch {
    return false;
  }
}

/**
 * User information, even an empty one (`http://@127.0.0.1/`, which URL drops), in any spelling the URL parser
 * reads as an authority (`http:evil@…`, `http:/evil@…`, `http:\\evil@…`); or a character the parser would strip
 * or rewrite (spaces, controls, backslashes), so that what is checked is never other than what the browser follows.
 */
function hasUserInfo(uri: string): boolean {
  if (/[\x00-\x20\x7f\\]/.test(uri)) return true;
  return /^[a-z][a-z0-9+.-]*:\/*[^/?#]*@/i.test(uri);
}

/**
 * Why a redirect URI cannot be registered, or null. An allow-list: https, http on loopback, and private-use
 * schemes (RFC 8252 §7.1); schemes that start browser or system handlers (mailto:, ms-…:, jar:, …) never pass.
 */
export function redirectUriProblem(uri: unknown): string | null {
  if (typeof uri !== 'string' || uri.length > 2000) return 'a redirect URI is a string of at most 2000 characters';
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return `"${uri.slice(0, 100)}" is not an absolute URI`;
  }
  if (hasUserInfo(uri)) return 'a redirect URI may not carry user information, spaces, control characters or backslashes';
  if (uri.includes('#')) return 'a redirect URI may not have a fragment';
  if (u.protocol === 'https:') return u.hostname === '' ? 'an https redirect URI needs a host' : null;
  if (u.protocol === 'http:')
    return isLoopbackRedirectHost(u.hostname)
      ? null
      : 'plain http is allowed only for loopback redirect URIs (127.0.0.1, [::1], localhost)';
  if (isPrivateUseScheme(u.protocol)) return null;
  return `${u.protocol} redirect URIs are refused: use https, http on a loopback address, or an app scheme named after a domain you own (com.example.app:/callback)`;
}

/**
 * A registered redirect URI matches exactly, except that a loopback one matches on any port (RFC 8252 §7.3): only the
 * port. A given URI with user information or a fragment (even an empty `#`) never matches, whatever was registered.
 */
export function redirectMatches(registered: readonly string[], given: string): boolean {
  let g: URL;
  try {
    g = new URL(given);
  } catch {
    return false;
  }
  if (hasUserInfo(given) || given.includes('#')) return false;
  if (registered.includes(given)) return true;
  if (g.protocol !== 'http:' || !isLoopbackRedirectHost(g.hostname)) return false;
  return registered.some((r) => {
    try {
      const u = new URL(r);
      return u.protocol === 'http:' && u.hostname === g.hostname && u.pathname === g.pathname && u.search === g.search;
    } catch {
      return false;
    }
  });
}

/** PKCE S256: BASE64URL(SHA-256(verifier)) equals the challenge; the verifier is 43 to 128 unreserved characters. */
export function pkceMatches(verifier: string, challenge: string): boolean {
  if (!/^[A-Za-z0-9\-._~]{43,128}$/.test(verifier)) return false;
  return createHash('sha256').update(verifier).digest('base64url') === challenge;
}

export function protectedResourceMetadata(baseUrl: string, resource: string) {
  return {
    resource,
    authorization_servers: [baseUrl],
    scopes_supported: [...OAUTH_SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'svc',
  };
}

export function authorizationServerMetadata(baseUrl: string, config: OauthConfig) {
  return {
    issuer: baseUrl,
    authorization_endpoint: `${baseUrl}/oauth/authorize`,
    token_endpoint: `${baseUrl}/oauth/token`,
    revocation_endpoint: `${baseUrl}/oauth/revoke`,
    ...(config.dynamicRegistration ? { registration_endpoint: `${baseUrl}/oauth/register` } : {}),
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token', ...(config.enterprise ? [JWT_BEARER_GRANT] : [])],
    ...(config.enterprise ? { authorization_grant_profiles_supported: [ID_JAG_PROFILE] } : {}),
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
    revocation_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
    scopes_supported: [...OAUTH_SCOPES],
    client_id_metadata_document_supported: config.clientMetadataDocuments,
    authorization_response_iss_parameter_supported: true,
  };
}

export const resourceMetadataUrl = (baseUrl: string, resourcePath: string) =>
  `${baseUrl}/.well-known/oauth-protected-resource${resourcePath}`;

/** The WWW-Authenticate challenge of a protected resource that announces OAuth. */
export function oauthChallenge(baseUrl: string, resourcePath: string): string {
  return `Bearer realm="svc", resource_metadata="${resourceMetadataUrl(baseUrl, resourcePath)}", scope="${OAUTH_SCOPES.join(' ')}"`;
}
