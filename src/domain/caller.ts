// Who is calling /mcp, for one request: made once from the auth core's principal (auth/core.ts `callerOf`) and read by
// every handler of the request, svc's own tools and the upstreams' alike. It names the person and their credential,
// never the credential's secret.
import type { Access } from './visibility.ts';

export interface Caller {
  /** the user's row id */
  readonly userId: number;
  readonly uid: string;
  readonly email: string;
  readonly name: string;
  readonly admin: boolean;
  /** what the caller reads with: the user's labels, narrowed by a token's restriction inside every query */
  readonly access: Access;
  /** the labels that decide, as a list: the user's, narrowed by a token's restriction */
  readonly labels: readonly string[];
  /** a bearer token's scopes; null for a browser session or the proxy, which are not scoped */
  readonly scopes: readonly string[] | null;
  /** how the caller signed in: token, session or header */
  readonly via: 'token' | 'session' | 'header';
  /** the token's id, or null for a session or the proxy */
  readonly tokenId: string | null;
  /** the OAuth grant the token was issued under, if any */
  readonly grantId: string | null;
  /** the OAuth client the token was issued to, if any */
  readonly clientId: string | null;
  /** the credential, for limits counted per credential: `grant:…`, `token:…`, `session:…` or the channel */
  readonly credential: string;
  /** the client's address, for audit rows */
  readonly peer: string;
}
