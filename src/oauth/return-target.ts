// Where an OAuth authorization request will send the browser back to, for a page whose form leads into it: after
// the password form, a known grant redirects straight to the app, and browsers hold that redirect to the sign-in
// page's form-action. Only a redirect URI the client registered counts.
import type { Db } from '../db/open.ts';
import { getClient } from '../store/oauth-clients.ts';
import { redirectMatches } from './rules.ts';

export async function oauthReturnTarget(db: Db, next: string): Promise<string | undefined> {
  const prefix = '/oauth/authorize?';
  if (!next.startsWith(prefix)) return undefined;
  const q = new URLSearchParams(next.slice(prefix.length));
  const clientId = q.get('client_id');
  const client = clientId ? await getClient(db, clientId) : null;
  if (!client) return undefined;
  const target = q.get('redirect_uri') ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  return target !== undefined && redirectMatches(client.redirectUris, target) ? target : undefined;
}
