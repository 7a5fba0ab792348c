// svc's client metadata document for an `auth = oauth` upstream's authorization server, and the addresses in it.
// Plain values, so the route that publishes it loads no OAuth client library.
import type { Config, UpstreamConfig } from '../config/load.ts';
import { VERSION } from '../version.ts';

export const callbackUrl = (config: Config, upstream: UpstreamConfig) => `${config.server.baseUrl}/upstreams/${upstream.name}/callback`;
export const clientMetadataUrl = (config: Config, upstream: UpstreamConfig) =>
  `${config.server.baseUrl}/upstreams/${upstream.name}/client.json`;

/** svc's client metadata document for one upstream (published at clientMetadataUrl). */
export function clientMetadata(config: Config, upstream: UpstreamConfig): Record<string, unknown> {
  return {
    client_id: clientMetadataUrl(config, upstream),
    client_name: `svc at ${new URL(config.server.baseUrl).host}`,
    client_uri: config.server.baseUrl,
    redirect_uris: [callbackUrl(config, upstream)],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    software_id: 'svc',
    software_version: VERSION,
  };
}
