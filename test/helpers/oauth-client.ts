// An MCP client's side of OAuth for tests: the SDK's OAuthClientProvider kept in memory, with a person who signs
// in and answers the consent page in an HTTP user agent.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Browser } from './http.ts';

export const REDIRECT = 'http://127.0.0.1:33418/callback';

/** Signs in and answers the consent page like a person would; returns where the browser was sent back to. */
export async function consentAs(browser: Browser, authorizationUrl: URL, decision: 'approve' | 'deny' = 'approve'): Promise<URL> {
  const res = await browser.request(authorizationUrl.pathname + authorizationUrl.search, { headers: { accept: 'text/html' } });
  if (res.status === 302) return new URL(res.headers.get('location')!);
  const html = await res.text();
  assert.equal(res.status, 200, `authorize answered ${res.status}: ${html}`);
  const request = /name="request" value="([^"]+)"/.exec(html)?.[1];
  assert.ok(request, html);
  // What a browser submits: the form's preselected access choice and checked labels along with the answer.
  const fields = new URLSearchParams({ request, decision });
  const access = /<input type="radio" name="access" value="(\w+)" checked/.exec(html)?.[1];
  if (access) fields.set('access', access);
  for (const m of html.matchAll(/<input type="checkbox" name="labels" value="([^"]+)" checked/g)) fields.append('labels', m[1]!);
  const answer = await browser.request('/oauth/authorize', {
    method: 'POST',
    body: fields.toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
  });
  if (answer.status !== 302) assert.fail(`consent answered ${answer.status}: ${await answer.text()}`);
  return new URL(answer.headers.get('location')!);
}

/** An MCP client's OAuth state, in memory, with a person who consents in `browser`. */
export class Provider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  redirects: URL[] = [];
  lastCode: string | null = null;
  constructor(
    private readonly browser: Browser,
    /** a Client ID Metadata Document URL to use as client_id instead of registering */
    readonly clientMetadataUrl?: string,
  ) {}
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'SDK test client',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(t: OAuthTokens) {
    this.saved = t;
  }
  async redirectToAuthorization(url: URL) {
    this.redirects.push(url);
    const back = await consentAs(this.browser, url);
    assert.equal(back.searchParams.get('iss'), new URL(url).origin);
    this.lastCode = back.searchParams.get('code');
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

export async function connect(url: string, provider: Provider): Promise<Client> {
  const endpoint = new URL(`${url}/oauth/mcp`);
  const first = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
  const client = new Client({ name: 'oauth-test', version: '1' });
  try {
    await client.connect(first);
    return client;
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  assert.ok(provider.lastCode, 'the flow reached the redirect with a code');
  await first.finishAuth(provider.lastCode);
  const again = new Client({ name: 'oauth-test', version: '1' });
  await again.connect(new StreamableHTTPClientTransport(endpoint, { authProvider: provider }));
  return again;
}

/** GET /oauth/authorize as `browser` up to the consent page; returns the held request's secret, unanswered. */
export async function heldConsent(base: string, browser: Browser, clientId: string, challenge = pkce().challenge): Promise<string> {
  const url = new URL(`${base}/oauth/authorize`);
  url.search = new URLSearchParams({
    client_id: clientId,
    redirect_uri: REDIRECT,
    response_type: 'code',
    state: 'st',
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString();
  const res = await browser.request(url.pathname + url.search, { headers: { accept: 'text/html' } });
  const html = await res.text();
  assert.equal(res.status, 200, html);
  const secret = /name="request" value="([^"]+)"/.exec(html)?.[1];
  assert.ok(secret, html);
  return secret;
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}
