// svc as an OAuth 2.1 client of an `auth = oauth` upstream's authorization server (CONTRACT §6.2), all through
// oauth4webapi: the server found as an MCP client finds it (RFC 9728 protected-resource metadata, then RFC 8414 or
// OpenID discovery), the configured client or svc's own registration (its client metadata document where the server
// takes one, else dynamic registration, kept in the database), authorization code with PKCE S256 and `resource`,
// refresh and revocation (RFC 7009). A registration whose client secret was sealed under another session secret is
// made again, never used as a public client.
import { isIP } from 'node:net';
import * as oauth from 'oauth4webapi';
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import { addressScope, isLoopbackIssuerHost, type AddressScope } from '../domain/addresses.ts';
import { seal, unseal } from '../domain/sealed.ts';
import { deriveKey } from '../domain/secrets.ts';
import type { Logger } from '../log.ts';
import { findClient, putClient, type UpstreamClientRow } from '../store/upstream-accounts.ts';
import { clientMetadata, clientMetadataUrl } from './client-document.ts';
import { AddressRefused, guardedFetch, type AddressRule, type OauthFetch } from './oauth-fetch.ts';

/** How long the server's metadata is kept before it is read again. */
const METADATA_MS = 60 * 60_000;
const CLIENT_PURPOSE = 'upstream-oauth-client-secret';

/**
 * Whether `secret` opens the client secret of svc's registration a row keeps; true when it keeps none (a public
 * client, a client metadata document, a configured client). False when it was sealed under another session secret
 * (upstream/secret-change.ts): svc registers again.
 */
export function clientSecretOpensUnder(secret: Buffer): (row: Pick<UpstreamClientRow, 'upstream' | 'clientSecretSealed'>) => boolean {
  const key = deriveKey(secret, CLIENT_PURPOSE);
  return (row) => row.clientSecretSealed === null || unseal(key, row.clientSecretSealed, row.upstream) !== null;
}

/** The upstream's authorization server and svc's client there, ready for requests. */
export interface OauthParty {
  readonly as: oauth.AuthorizationServer;
  readonly client: oauth.Client;
  readonly auth: oauth.ClientAuth;
  /** options for a request to the server (each with its own deadline), connecting only where addressRule allows */
  options(): RequestOptions;
}

/** Something about the upstream's authorization server that stops svc from connecting anyone; said to the person. */
export class OauthSetupError extends Error {}

const resourceOf = (upstream: UpstreamConfig) => (upstream.transport.kind === 'http' ? upstream.transport.url : '');

type RequestOptions = { [oauth.allowInsecureRequests]?: boolean; [oauth.customFetch]: OauthFetch; signal?: AbortSignal };

/** The upstream itself is on this machine: its url's host is a loopback address or localhost. */
const onLoopback = (upstream: UpstreamConfig) => isLoopbackIssuerHost(new URL(resourceOf(upstream)).hostname);

/**
 * Options for a request to the upstream itself (its protected-resource metadata): anywhere its `url` leads, over
 * plain http where the configuration took an http `url` (on loopback, or with insecure_http).
 */
function upstreamOptions(upstream: UpstreamConfig): RequestOptions {
  return {
    [oauth.allowInsecureRequests]: new URL(resourceOf(upstream)).protocol === 'http:',
    [oauth.customFetch]: guardedFetch(() => null),
    signal: AbortSignal.timeout(upstream.timeoutMs),
  };
}

/**
 * Options for a request to the upstream's authorization server, which the upstream's metadata names (the upstream
 * chooses where svc sends its requests, registrations, client secret and people's tokens): each request connects
 * only where addressRule allows. Plain http only to this machine, for an upstream on this machine: a person's tokens
 * and svc's client secret never cross a network in clear.
 */
function serverOptions(upstream: UpstreamConfig): RequestOptions {
  return {
    [oauth.allowInsecureRequests]: onLoopback(upstream),
    [oauth.customFetch]: guardedFetch((url) => addressRule(upstream, url)),
    signal: AbortSignal.timeout(upstream.timeoutMs),
  };
}

/**
 * Where a request to the authorization server's `url` may connect; null: anywhere. Plain http: a loopback address
 * only. For an upstream that is not on this machine, without oauth_private_network: a public address only, so an
 * upstream cannot turn svc against this machine, its network or a cloud metadata service.
 */
function addressRule(upstream: UpstreamConfig, url: URL): AddressRule | null {
  if (url.protocol === 'http:')
    return (address) =>
      onLoopback(upstream) && addressScope(address) === 'loopback'
        ? null
        : `the authorization server's ${url.origin} is plain http to ${address}, not on this machine; svc sends nothing there`;
  if (onLoopback(upstream) || upstream.oauth!.privateNetwork) return null;
  return (address) => {
    const scope = addressScope(address);
    if (scope === 'public') return null;
    return (
      `the authorization server's ${url.origin} is at ${address}, ${SCOPE_WORDS[scope]}, and svc sends nothing there for an ` +
      `upstream that is not on this machine; if that server is yours, set oauth_private_network = true in [upstream ${upstream.name}]`
    );
  };
}

const SCOPE_WORDS: Record<Exclude<AddressScope, 'public'>, string> = {
  loopback: 'an address of this machine',
  private: 'a private network address',
  'link-local': 'a link-local address',
  unspecified: 'an unspecified address',
  reserved: 'not an internet address',
};

/**
 * A URL of the authorization server, before anything is sent there: https, or http to a loopback host for an
 * upstream on this machine; an address in it must be one addressRule allows (a name is judged as it is connected to).
 */
function checkServerUrl(upstream: UpstreamConfig, text: string, what: string, sends = true): URL {
  const u = new URL(text);
  const http = u.protocol === 'http:' && onLoopback(upstream) && isLoopbackIssuerHost(u.hostname);
  if (u.protocol !== 'https:' && !http)
    throw new OauthSetupError(`${what} ${u.origin} is not https (plain http only on this machine, for an upstream on this machine)`);
  const literal = u.hostname.replace(/^\[(.*)\]$/, '$1');
  const why = sends && isIP(literal) !== 0 ? addressRule(upstream, u)?.(literal) : null;
  if (why) throw new OauthSetupError(why);
  return u;
}

/** Every endpoint the browser or svc will be sent to passes checkServerUrl (svc never connects to the authorization endpoint). */
function checkEndpoints(upstream: UpstreamConfig, as: oauth.AuthorizationServer): void {
  if (as.authorization_endpoint !== undefined)
    checkServerUrl(upstream, as.authorization_endpoint, "the authorization server's endpoint", false);
  for (const endpoint of [as.token_endpoint, as.revocation_endpoint, as.registration_endpoint])
    if (endpoint !== undefined) checkServerUrl(upstream, endpoint, "the authorization server's endpoint");
}

async function protectedResource(upstream: UpstreamConfig): Promise<oauth.ResourceServer> {
  const resource = new URL(resourceOf(upstream));
  const response = await oauth.resourceDiscoveryRequest(resource, upstreamOptions(upstream));
  return oauth.processResourceDiscoveryResponse(resource, response);
}

async function authorizationServer(upstream: UpstreamConfig): Promise<oauth.AuthorizationServer> {
  let metadata: oauth.ResourceServer;
  try {
    metadata = await protectedResource(upstream);
  } catch (e) {
    throw new OauthSetupError(`the upstream does not describe its authorization server (RFC 9728): ${message(e)}`);
  }
  const issuer = metadata.authorization_servers?.[0];
  if (typeof issuer !== 'string') throw new OauthSetupError('the upstream names no authorization server');
  const url = checkServerUrl(upstream, issuer, 'the authorization server');
  for (const algorithm of ['oauth2', 'oidc'] as const) {
    try {
      const response = await oauth.discoveryRequest(url, { algorithm, ...serverOptions(upstream) });
      return await oauth.processDiscoveryResponse(url, response);
    } catch (e) {
      if (e instanceof AddressRefused) throw new OauthSetupError(e.message);
      // the other discovery next
    }
  }
  throw new OauthSetupError(`the authorization server ${url.origin} publishes no metadata (RFC 8414 or OpenID discovery)`);
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e)).slice(0, 200);

/** The authorization servers and clients of this process's `auth = oauth` upstreams. */
export class OauthClients {
  private readonly parties = new Map<string, { party: Promise<OauthParty>; at: number }>();

  constructor(
    private readonly config: Config,
    private readonly database: Database,
    private readonly log: Logger,
  ) {}

  /** The upstream's server and svc's client there: discovered, and registered if need be, once an hour at most. */
  party(upstream: UpstreamConfig): Promise<OauthParty> {
    const kept = this.parties.get(upstream.name);
    if (kept && Date.now() - kept.at < METADATA_MS) return kept.party;
    const party = this.discover(upstream);
    this.parties.set(upstream.name, { party, at: Date.now() });
    // A failure is not kept: the next person tries again.
    party.catch(() => this.parties.delete(upstream.name));
    return party;
  }

  private async discover(upstream: UpstreamConfig): Promise<OauthParty> {
    const as = await authorizationServer(upstream);
    checkEndpoints(upstream, as);
    await this.pin(upstream, as);
    const options = () => serverOptions(upstream);
    const configured = upstream.oauth!;
    if (configured.clientId !== null) {
      const client: oauth.Client = { client_id: configured.clientId };
      const auth =
        configured.clientSecret === null
          ? oauth.None()
          : as.token_endpoint_auth_methods_supported?.includes('client_secret_basic') === false &&
              as.token_endpoint_auth_methods_supported.includes('client_secret_post')
            ? oauth.ClientSecretPost(configured.clientSecret)
            : oauth.ClientSecretBasic(configured.clientSecret);
      return { as, client, auth, options };
    }
    return { as, ...(await this.registration(upstream, as, options)), options };
  }

  /**
   * The first authorization server svc used for this upstream's server is the one it keeps using: an upstream that
   * names another one later is refused, so no person's token and no client secret is ever sent there. (A new `url`
   * is another server, and starts over.)
   */
  private async pin(upstream: UpstreamConfig, as: oauth.AuthorizationServer): Promise<void> {
    const kept = await findClient(this.database.db, upstream.name);
    if (kept && kept.server === upstream.server) {
      if (kept.issuer === as.issuer) return;
      throw new OauthSetupError(
        `the upstream now names the authorization server ${new URL(as.issuer).origin}, not ${new URL(kept.issuer).origin} that svc has used for it; svc sends nothing there`,
      );
    }
    const configured = upstream.oauth!.clientId;
    if (configured === null) return; // registration() pins it with the registration
    const pinned = await this.database.write((tx) =>
      putClient(tx, {
        upstream: upstream.name,
        server: upstream.server,
        issuer: as.issuer,
        clientId: configured,
        clientSecretSealed: null,
        kind: 'configured',
        registeredAt: this.database.now(),
      }),
    );
    // Another instance pinned another server at the same moment: the first stands.
    if (pinned.issuer !== as.issuer) throw new OauthSetupError('another instance uses another authorization server for this upstream');
  }

  /**
   * svc's own client at the server: the one kept in the database for this server, or a new registration. A kept one
   * whose client secret this session secret cannot open is registered again (as a public client the server would
   * refuse it), and the new one replaces it for every instance: the first stored stands, and only its instance says so.
   */
  private async registration(
    upstream: UpstreamConfig,
    as: oauth.AuthorizationServer,
    options: () => RequestOptions,
  ): Promise<{ client: oauth.Client; auth: oauth.ClientAuth }> {
    const key = deriveKey(this.config.auth.session!.secret, CLIENT_PURPOSE);
    const kept = await findClient(this.database.db, upstream.name);
    const ours = kept && kept.server === upstream.server && kept.issuer === as.issuer && kept.kind !== 'configured' ? kept : null;
    const usable = ours && this.keptClient(upstream, as, ours);
    if (usable) return usable;
    // Past here, a kept registration of ours is one whose secret was sealed under another session secret.
    const stale = ours;
    const store = async (row: UpstreamClientRow) => {
      const stored = await this.database.write((tx) => putClient(tx, row, stale ?? undefined));
      if (stale !== null && stored.clientId === row.clientId)
        this.log.warn('upstream_client_registered_again', {
          upstream: upstream.name,
          client_id: stored.clientId,
          replaced: stale.clientId,
          reason: 'its client secret was sealed under another session secret',
        });
      // Another instance stored first: its client is everyone's.
      const client = this.keptClient(upstream, as, stored);
      if (client === null)
        throw new OauthSetupError("svc's registration at the authorization server was made under another session secret");
      return client;
    };
    const now = this.database.now();
    const row = { upstream: upstream.name, server: upstream.server, issuer: as.issuer, registeredAt: now };
    // A metadata document's URL is a client id only over https: on an http base_url svc registers instead.
    const takesDocuments = (as as { client_id_metadata_document_supported?: boolean }).client_id_metadata_document_supported === true;
    if (takesDocuments && this.config.server.secure) {
      const clientId = clientMetadataUrl(this.config, upstream);
      return store({ ...row, clientId, clientSecretSealed: null, kind: 'cimd' });
    }
    if (as.registration_endpoint === undefined)
      throw new OauthSetupError(
        `the authorization server ${new URL(as.issuer).origin} takes neither client metadata documents nor registration; set oauth_client_id`,
      );
    const { client_id: _id, ...metadata } = clientMetadata(this.config, upstream);
    const response = await oauth
      .dynamicClientRegistrationRequest(as, metadata as Partial<oauth.Client>, options())
      .catch((e: unknown) => Promise.reject(e instanceof AddressRefused ? new OauthSetupError(e.message) : e));
    const registered = await oauth.processDynamicClientRegistrationResponse(response);
    const secret = typeof registered.client_secret === 'string' ? registered.client_secret : null;
    return store({
      ...row,
      clientId: registered.client_id,
      clientSecretSealed: secret === null ? null : seal(key, secret, upstream.name),
      kind: 'dcr',
    });
  }

  /**
   * The client a kept row names, for use with `as`; refused when the row is for another authorization server. Null
   * when it keeps a client secret this session secret cannot open: never used as a public client instead.
   */
  private keptClient(
    upstream: UpstreamConfig,
    as: oauth.AuthorizationServer,
    kept: UpstreamClientRow,
  ): { client: oauth.Client; auth: oauth.ClientAuth } | null {
    if (kept.issuer !== as.issuer || kept.kind === 'configured')
      throw new OauthSetupError('another instance uses another authorization server or client for this upstream');
    if (kept.clientSecretSealed === null) return { client: { client_id: kept.clientId }, auth: oauth.None() };
    const secret = unseal(deriveKey(this.config.auth.session!.secret, CLIENT_PURPOSE), kept.clientSecretSealed, upstream.name);
    return secret === null ? null : { client: { client_id: kept.clientId }, auth: oauth.ClientSecretPost(secret) };
  }
}

export { oauth };
