// Which client is asking: a registered one, or one known by its metadata document (fetched when the copy is
// missing or stale, and served from the last good copy for a day when a fetch fails), and the client
// authentication of the token and revocation endpoints.
import { getClient, saveMetadataClient, type OauthClient } from '../store/oauth-clients.ts';
import { reserveAttempt } from '../store/throttle.ts';
import { secretEquals, storedHash } from '../domain/secrets.ts';
import { limitAddress } from '../domain/addresses.ts';
import { fetchClientMetadata, isMetadataUrl, MetadataRefused, MetadataUnreachable } from './client-metadata.ts';
import type { OauthServer } from './context.ts';

/** Metadata documents one client address may make svc fetch in the throttle window (15 minutes). */
const METADATA_FETCHES_PER_ADDRESS = 20;
/** How long past its expiry the last good copy of a metadata document stands in when a fetch fails. */
export const METADATA_STALE_MS = 86_400_000;

export type ClientLookup = { readonly ok: true; readonly client: OauthClient } | { readonly ok: false; readonly message: string };

const found = (client: OauthClient): ClientLookup => ({ ok: true, client });
const refused = (message: string): ClientLookup => ({ ok: false, message });

/** The client of an authorization request; `from` is the asking address, whose fetches are limited. */
export async function resolveClient(
  server: OauthServer,
  id: string | undefined,
  from: string,
  now = server.database.now(),
): Promise<ClientLookup> {
  const unknown = 'svc does not know this app (client_id). Register it first.';
  if (!id) return refused(unknown);
  const known = await getClient(server.database.db, id);
  if (known && known.kind !== 'metadata') return found(known);
  if (!isMetadataUrl(id)) return refused(unknown);
  if (!server.config.clientMetadataDocuments) return refused('svc does not accept client metadata documents; register the app instead.');
  if (known && (known.refreshAt ?? 0) > now) return found(known);
  const lastGood = known && (known.refreshAt ?? 0) + METADATA_STALE_MS > now ? known : null;
  const allowed = await server.database.write((tx) =>
    reserveAttempt(tx, [[`metadata-fetch:${limitAddress(from)}`, METADATA_FETCHES_PER_ADDRESS]], now),
  );
  if (!allowed.ok)
    return lastGood
      ? found(lastGood)
      : refused(`too many new apps from this address; try again in ${Math.ceil(allowed.retryAfter / 60)} minute(s).`);
  try {
    const meta = await fetchClientMetadata(id, { allowPrivate: server.config.clientMetadataAllowPrivate });
    return found(await server.database.write((tx) => saveMetadataClient(tx, id, meta, now)));
  } catch (e) {
    if (e instanceof MetadataUnreachable) {
      server.log.warn('oauth_client_metadata_unreachable', { client_id: id, reason: e.detail, served_last_copy: lastGood !== null });
      if (lastGood) return found(lastGood);
      return refused(
        `svc could not fetch the metadata document of this app from ${e.host}. Ask the administrator of svc to let it fetch ` +
          `https://${e.host}, or to set client_metadata_documents false under [auth] oauth so that the app registers itself instead.`,
      );
    }
    if (e instanceof MetadataRefused) {
      server.log.warn('oauth_client_metadata_refused', { client_id: id, reason: e.message });
      return refused(`svc cannot use this app's metadata document: ${e.message}.`);
    }
    throw e;
  }
}

/** Credentials a client sent: the Authorization header (client_secret_basic) and the body's fields. */
export interface ClientCredentials {
  readonly authorization: string | undefined;
  readonly body: Record<string, unknown>;
}

/** The client a token or revocation request comes from, with its secret checked; null when it is not one. */
export async function authenticateClient(server: OauthServer, credentials: ClientCredentials): Promise<OauthClient | null> {
  const { body } = credentials;
  let id = typeof body.client_id === 'string' ? body.client_id : undefined;
  let secret = typeof body.client_secret === 'string' ? body.client_secret : undefined;
  const basic = /^Basic ([A-Za-z0-9+/=]+)$/.exec(credentials.authorization ?? '');
  if (basic) {
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return null;
    try {
      id = decodeURIComponent(decoded.slice(0, colon));
      secret = decodeURIComponent(decoded.slice(colon + 1));
    } catch {
      return null;
    }
  }
  if (!id) return null;
  const client = await getClient(server.database.db, id);
  if (!client) return null;
  if (client.authMethod === 'none') return client;
  if (!secret || !client.secretHash) return null;
  return secretEquals(storedHash(secret), client.secretHash) ? client : null;
}
