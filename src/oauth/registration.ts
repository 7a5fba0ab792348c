// RFC 7591 dynamic registration. Anyone may register, so it is limited: a generous rate per address (claude.ai
// registers from its own servers, on every fresh connection, for every user), and a cap on clients that never
// completed a grant, kept in store/oauth-clients.ts.
import { registerClient, type AuthMethod, type OauthClient } from '../store/oauth-clients.ts';
import type { Tx } from '../db/open.ts';
import { reserveAttempt } from '../store/throttle.ts';
import { recordAudit } from '../store/audit.ts';
import { mintClientSecret } from '../domain/secrets.ts';
import { limitAddress } from '../domain/addresses.ts';
import { redirectUriProblem } from './rules.ts';
import { clientNameProblem } from './names.ts';
import { JWT_BEARER_GRANT } from './enterprise.ts';
import type { OauthServer } from './context.ts';
import { AppError, OauthProtocolError } from '../domain/errors.ts';

/** Registrations one client address may make in the throttle window (15 minutes). */
export const REGISTRATIONS_PER_ADDRESS = 300;
const AUTH_METHODS: readonly AuthMethod[] = ['none', 'client_secret_post', 'client_secret_basic'];

interface CheckedRegistration {
  readonly name: string;
  readonly redirectUris: string[];
  readonly grantTypes: string[];
  readonly authMethod: AuthMethod;
  readonly applicationType: 'native' | 'web' | undefined;
}

const tooMany = (description: string, retryAfter: number) =>
  new OauthProtocolError('too_many_requests', description, 429, { 'Retry-After': String(retryAfter) });

/** POST /oauth/register: the registered client's metadata (201); refusals are thrown as OauthProtocolError. */
export async function register(server: OauthServer, body: Record<string, unknown> | null, from: string): Promise<Record<string, unknown>> {
  const reserved = await server.database.write((tx) =>
    reserveAttempt(tx, [[`register:${limitAddress(from)}`, REGISTRATIONS_PER_ADDRESS]], server.database.now()),
  );
  if (!reserved.ok) throw tooMany('too many registrations from this address; try again later', reserved.retryAfter);
  if (body === null) throw new OauthProtocolError('invalid_client_metadata', 'send the client metadata as a JSON object');
  const checked = checkRegistration(body, server.config.enterprise !== null);
  const secret = checked.authMethod === 'none' ? null : mintClientSecret();
  let client: OauthClient;
  try {
    client = await server.database.write((tx) => registerAndAudit(tx, checked, secret, from, server.database.now()));
  } catch (e) {
    // The store's refusal in the protocol's words (RFC 7591 answers {error, error_description}).
    if (e instanceof AppError && e.code === 'too_many_requests') throw tooMany(e.message, e.retryAfter ?? 60);
    throw e;
  }
  return {
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
function checkRegistration(body: Record<string, unknown>, enterprise: boolean): CheckedRegistration {
  const known = ['authorization_code', 'refresh_token', ...(enterprise ? [JWT_BEARER_GRANT] : [])];
  const grants = body.grant_types ?? ['authorization_code', 'refresh_token'];
  if (!Array.isArray(grants) || grants.length === 0 || grants.some((g) => !known.includes(g))) {
    throw new OauthProtocolError('invalid_client_metadata', `grant_types: ${known.join(', ')} only`);
  }
  const redirected = grants.includes('authorization_code');
  const uris = body.redirect_uris ?? (redirected ? undefined : []);
  if (!Array.isArray(uris) || (redirected && uris.length === 0) || uris.length > 10)
    throw new OauthProtocolError('invalid_redirect_uri', 'redirect_uris: one to ten redirect URIs');
  for (const uri of uris) {
    const problem = redirectUriProblem(uri);
    if (problem) throw new OauthProtocolError('invalid_redirect_uri', `redirect_uris: ${problem}`);
  }
  const method = body.token_endpoint_auth_method ?? 'none';
  if (!AUTH_METHODS.includes(method as AuthMethod))
    throw new OauthProtocolError('invalid_client_metadata', `token_endpoint_auth_method: one of ${AUTH_METHODS.join(', ')}`);
  const responses = body.response_types ?? ['code'];
  if (!Array.isArray(responses) || responses.some((r) => r !== 'code'))
    throw new OauthProtocolError('invalid_client_metadata', 'response_types: code only');
  // SEP-837: MCP clients say what they are; svc's redirect rules already cover both kinds.
  const applicationType = body.application_type;
  if (applicationType !== undefined && applicationType !== 'native' && applicationType !== 'web') {
    throw new OauthProtocolError('invalid_client_metadata', 'application_type: native or web');
  }
  const name = body.client_name ?? 'Unnamed app';
  const nameProblem = typeof name === 'string' ? clientNameProblem(name) : 'a string';
  if (nameProblem) throw new OauthProtocolError('invalid_client_metadata', `client_name: ${nameProblem}`);
  return {
    name: (name as string).trim(),
    redirectUris: uris as string[],
    grantTypes: [...new Set(grants as string[])],
    authMethod: method as AuthMethod,
    applicationType,
  };
}
