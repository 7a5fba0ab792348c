// RFC 7591 dynamic registration. Anyone may register, so it is limited: a generous rate per address (claude.ai
// registers from its own servers, on every fresh connection, for every user), and a cap on clients that never
// completed a grant, kept in store/oauth-clients.ts.
import { registerClient, RegistrationsFull, type AuthMethod, type OauthClient } from '../store/oauth-clients.ts';
import type { Tx } from '../db/open.ts';
import { reserveAttempt } from '../store/throttle.ts';
import { recordAudit } from '../store/audit.ts';
import { mintClientSecret } from '../domain/secrets.ts';
import { limitAddress } from '../domain/addresses.ts';
import { redirectUriProblem } from './rules.ts';
import { clientNameProblem } from './names.ts';
import { JWT_BEARER_GRANT } from './enterprise.ts';
import { oauthError, type OauthError, type OauthServer } from './context.ts';

/** Registrations one client address may make in the throttle window (15 minutes). */
export const REGISTRATIONS_PER_ADDRESS = 300;
const AUTH_METHODS: readonly AuthMethod[] = ['none', 'client_secret_post', 'client_secret_basic'];

export type Registration =
  | { readonly status: 201; readonly body: Record<string, unknown> }
  | { readonly status: 400; readonly body: OauthError }
  | { readonly status: 429; readonly body: OauthError; readonly retryAfter: number };

interface CheckedRegistration {
  readonly name: string;
  readonly redirectUris: string[];
  readonly grantTypes: string[];
  readonly authMethod: AuthMethod;
  readonly applicationType: 'native' | 'web' | undefined;
}

export async function register(server: OauthServer, body: Record<string, unknown> | null, from: string): Promise<Registration> {
  const reserved = await server.database.write((tx) =>
    reserveAttempt(tx, [[`register:${limitAddress(from)}`, REGISTRATIONS_PER_ADDRESS]], server.database.now()),
  );
  if (!reserved.ok) {
    return {
      status: 429,
      body: oauthError('too_many_requests', 'too many registrations from this address; try again later'),
      retryAfter: reserved.retryAfter,
    };
  }
  if (body === null) return { status: 400, body: oauthError('invalid_client_metadata', 'send the client metadata as a JSON object') };
  const checked = checkRegistration(body, server.config.enterprise !== null);
  if ('error' in checked) return { status: 400, body: checked };
  const secret = checked.authMethod === 'none' ? null : mintClientSecret();
  let client: OauthClient;
  try {
    client = await server.database.write((tx) => registerAndAudit(tx, checked, secret, from, server.database.now()));
  } catch (e) {
    if (!(e instanceof RegistrationsFull)) throw e;
    return {
      status: 429,
      body: oauthError('too_many_requests', 'too many apps are registering right now; try again later'),
      retryAfter: e.retryAfter,
    };
  }
  return {
    status: 201,
    body: {
      client_id: client.id,
      client_id_issued_at: Math.floor(client.createdAt / 1000),
      ...(secret ? { client_secret: secret, client_secret_expires_at: 0 } : {}),
      client_name: client.name,
      redirect_uris: client.redirectUris,
      token_endpoint_auth_method: client.authMethod,
      grant_types: checked.grantTypes,
      response_types: ['code'],
      ...(checked.applicationType ? { application_type: checked.applicationType } : {}),
      scope: 'mcp',
    },
  };
}

async function registerAndAudit(
  tx: Tx,
  checked: CheckedRegistration,
  secret: string | null,
  from: string,
  now: number,
): Promise<OauthClient> {
  const made = await registerClient(
    tx,
    { kind: 'dynamic', name: checked.name, redirectUris: checked.redirectUris, authMethod: checked.authMethod, secret },
    now,
  );
  await recordAudit(tx, {
    actor: null,
    via: 'anonymous',
    action: 'oauth.client_register',
    target: made.id,
    detail: { name: made.name, redirect_uris: made.redirectUris },
    peer: from,
  });
  return made;
}

/**
 * RFC 7591 metadata, checked; anything svc would have to guess at is refused. With enterprise-managed authorization
 * (`enterprise`), a client may register for the jwt-bearer grant too, or only for it (then without redirect URIs).
 */
function checkRegistration(body: Record<string, unknown>, enterprise: boolean): CheckedRegistration | OauthError {
  const known = ['authorization_code', 'refresh_token', ...(enterprise ? [JWT_BEARER_GRANT] : [])];
  const grants = body.grant_types ?? ['authorization_code', 'refresh_token'];
  if (!Array.isArray(grants) || grants.length === 0 || grants.some((g) => !known.includes(g))) {
    return oauthError('invalid_client_metadata', `grant_types: ${known.join(', ')} only`);
  }
  const redirected = grants.includes('authorization_code');
  const uris = body.redirect_uris ?? (redirected ? undefined : []);
  if (!Array.isArray(uris) || (redirected && uris.length === 0) || uris.length > 10)
    return oauthError('invalid_redirect_uri', 'redirect_uris: one to ten redirect URIs');
  for (const uri of uris) {
    const problem = redirectUriProblem(uri);
    if (problem) return oauthError('invalid_redirect_uri', `redirect_uris: ${problem}`);
  }
  const method = body.token_endpoint_auth_method ?? 'none';
  if (!AUTH_METHODS.includes(method as AuthMethod))
    return oauthError('invalid_client_metadata', `token_endpoint_auth_method: one of ${AUTH_METHODS.join(', ')}`);
  const responses = body.response_types ?? ['code'];
  if (!Array.isArray(responses) || responses.some((r) => r !== 'code'))
    return oauthError('invalid_client_metadata', 'response_types: code only');
  // SEP-837: MCP clients say what they are; svc's redirect rules already cover both kinds.
  const applicationType = body.application_type;
  if (applicationType !== undefined && applicationType !== 'native' && applicationType !== 'web') {
    return oauthError('invalid_client_metadata', 'application_type: native or web');
  }
  const name = body.client_name ?? 'Unnamed app';
  const nameProblem = typeof name === 'string' ? clientNameProblem(name) : 'a string';
  if (nameProblem) return oauthError('invalid_client_metadata', `client_name: ${nameProblem}`);
  return {
    name: (name as string).trim(),
    redirectUris: uris as string[],
    grantTypes: [...new Set(grants as string[])],
    authMethod: method as AuthMethod,
    applicationType,
  };
}
