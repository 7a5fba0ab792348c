// The peers of an `auth = oauth` upstream (CONTRACT §6.2), on loopback: oidc-provider as the upstream's authorization
// server (dynamic registration, resource indicators issuing JWT access tokens for the upstream's URL, refresh
// tokens, revocation, and optionally a client registered by hand), and an SDK MCP server as the upstream that
// accepts only those tokens, verified with jose against the provider's JWKS, with one tool `whoami` that answers the
// token's subject, and the tools a test lists for that subject. The test can make either of them misbehave on purpose.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import Provider from 'oidc-provider';
import { Agent } from './oidc-provider.ts';
import { freePort } from './workspace.ts';

export interface OauthUpstream {
  readonly issuer: string;
  readonly upstreamUrl: string;
  /** every Authorization header the upstream received, in order */
  readonly seen: string[];
  /**
   * What the provider reports: token requests by grant type, `client:ID` per token request, `revoked` grants,
   * `registration`s, `revocation refused` (by the switch below), `refresh reused` (a rotated refresh token presented again) and `metadata document fetched`.
   */
  readonly counts: Map<string, number>;
  /** POST /reg requests that reached the provider */
  registrationRequests: number;
  /** the client secret of each registration the provider made, in order (none for a public client) */
  readonly issuedSecrets: string[];
  /** while true, each registration is held until a second one has arrived (or 5 s have passed), then both answered */
  registrationsTogether: boolean;
  /** while true, the token endpoint refuses every request with invalid_grant */
  refuseTokens: boolean;
  /** while true, the revocation endpoint answers 503, as a server that is down for a moment */
  refuseRevocations: boolean;
  /**
   * Holds revocation requests unanswered from now on, as a server that has become slow: `held` counts them;
   * `release()` answers those whose client still waits, and ends the hold.
   */
  holdRevocations(): { readonly held: number; release(): void };
  /** access tokens (by jti) the upstream refuses with 401 before their time, as after a revocation there */
  readonly refusedJti: Set<string>;
  /** when set, the upstream's metadata names this authorization server instead of the real one */
  namedIssuer: string | null;
  /** subjects to whom the upstream answers 503, as a server failing for some accounts only */
  readonly unavailableTo: Set<string>;
  /**
   * The tools the upstream lists to the token's subject besides `whoami` (default none), each answering
   * `NAME:SUBJECT`; with `whoami: false`, not `whoami` either.
   */
  toolsFor: (sub: string) => {
    readonly tools: readonly { readonly name: string; readonly description: string }[];
    readonly whoami?: boolean;
  };
  stop(): Promise<void>;
}

export interface OauthUpstreamOptions {
  /** ports to listen on (default: free ones), when svc's configuration must name them first */
  readonly ports?: { readonly as: number; readonly upstream: number };
  /** a client registered by hand, whose redirect URI is svc's callback for one upstream */
  readonly client?: { readonly id: string; readonly secret: string; readonly redirectUri: string };
  /** the access tokens' lifetime in seconds (default 3600); svc refreshes a token a minute before it expires */
  readonly accessTokenTtl?: number;
  /** each token request waits this long, as over a network, so calls that need a refresh at once overlap it */
  readonly tokenDelayMs?: number;
  /** hold each registration until a second one has arrived (or 5 s have passed), then answer both */
  readonly registrationsTogether?: boolean;
  /**
   * The provider registers every client with this token_endpoint_auth_method, whatever it asked for, and so issues
   * it a client secret (RFC 7591 §3.2.1 lets a server replace requested metadata).
   */
  readonly registersAs?: 'client_secret_post' | 'client_secret_basic';
  /**
   * The provider also takes client metadata documents (CIMD): a client id that is an https URL of svc's, fetched
   * from svc. svc's https `origin` is reached at `reach` on loopback, as a name would resolve to it.
   */
  readonly clientMetadataFrom?: { readonly origin: string; readonly reach: string };
}

/** The authorization server, answering POST /token, /token/revocation and /reg as the options and the test's switches say. */
function authorizationServer(provider: Provider, peers: OauthUpstream, options: OauthUpstreamOptions): HttpServer {
  const handle = provider.callback();
  const held: (() => void)[] = [];
  /** While revocations are held: holds one request, its client's `res` telling when that client gave up. */
  let hold: ((go: () => void, res: ServerResponse) => void) | null = null;
  peers.holdRevocations = () => {
    const waiting: { go: () => void; closed: boolean }[] = [];
    hold = (go, res) => {
      const w = { go, closed: false };
      // The client gave up on it (its own deadline), or the answer was sent.
      res.once('close', () => (w.closed = true));
      waiting.push(w);
    };
    return {
      get held() {
        return waiting.length;
      },
      release() {
        hold = null;
        for (const w of waiting.splice(0)) if (!w.closed) w.go();
      },
    };
  };
  return createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/token') {
      if (peers.refuseTokens) {
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: 'invalid_grant', error_description: 'refused' }));
        return;
      }
      setTimeout(() => handle(req, res), options.tokenDelayMs ?? 0);
      return;
    }
    if (req.method === 'POST' && req.url === '/token/revocation' && hold !== null) {
      hold(() => handle(req, res), res);
      return;
    }
    if (req.method === 'POST' && req.url === '/token/revocation' && peers.refuseRevocations) {
      peers.counts.set('revocation refused', (peers.counts.get('revocation refused') ?? 0) + 1);
      res.writeHead(503).end();
      return;
    }
    if (req.method !== 'POST' || req.url !== '/reg') return handle(req, res);
    peers.registrationRequests++;
    const method = options.registersAs;
    const register = method ? () => void registeringAs(req, method).then(() => handle(req, res)) : () => handle(req, res);
    if (!peers.registrationsTogether) return register();
    held.push(register);
    const release = () => {
      clearTimeout(timer);
      for (const go of held.splice(0)) go();
    };
    const timer = setTimeout(release, 5000);
    if (held.length >= 2) release();
  });
}

/**
 * Reads a registration request's JSON and leaves it, with `method` in place of the token_endpoint_auth_method asked
 * for, where the provider takes a body that was read already (`req.body`).
 */
async function registeringAs(req: IncomingMessage, method: string): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const asked = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  (req as IncomingMessage & { body?: unknown }).body = { ...asked, token_endpoint_auth_method: method };
}

/** The upstream MCP server: its protected-resource metadata, and `whoami` for a token it accepts; 401 otherwise. */
function upstreamServer(peers: OauthUpstream, upPort: number): HttpServer {
  const jwks = createRemoteJWKSet(new URL(`${peers.issuer}/jwks`));
  const metadata = `http://127.0.0.1:${upPort}/.well-known/oauth-protected-resource/mcp`;
  return createServer(async (req, res) => {
    if (req.url === '/.well-known/oauth-protected-resource/mcp') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ resource: peers.upstreamUrl, authorization_servers: [peers.namedIssuer ?? peers.issuer] }));
      return;
    }
    const authorization = req.headers.authorization ?? '';
    peers.seen.push(authorization);
    let sub: string;
    try {
      const token = authorization.replace(/^Bearer /, '');
      const { payload } = await jwtVerify(token, jwks, { issuer: peers.issuer, audience: peers.upstreamUrl });
      if (peers.refusedJti.has(String(payload.jti))) throw new Error('refused');
      sub = String(payload.sub);
    } catch {
      res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${metadata}"` }).end();
      return;
    }
    if (peers.unavailableTo.has(sub)) {
      res.writeHead(503).end();
      return;
    }
    const server = new McpServer({ name: 'code', version: '1' });
    const listed = peers.toolsFor(sub);
    if (listed.whoami !== false)
      server.registerTool('whoami', { description: 'Who the token is for.' }, async () => ({ content: [{ type: 'text', text: sub }] }));
    for (const t of listed.tools)
      server.registerTool(t.name, { description: t.description }, async () => ({ content: [{ type: 'text', text: `${t.name}:${sub}` }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
}

export async function startOauthUpstream(options: OauthUpstreamOptions = {}): Promise<OauthUpstream> {
  const [asPort, upPort] = options.ports ? [options.ports.as, options.ports.upstream] : [await freePort(), await freePort()];
  const issuer = `http://127.0.0.1:${asPort}`;
  const upstreamUrl = `http://127.0.0.1:${upPort}/mcp`;
  const counts = new Map<string, number>();
  const count = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1);
  const servers: HttpServer[] = [];
  const peers: OauthUpstream = {
    issuer,
    upstreamUrl,
    seen: [],
    counts,
    registrationRequests: 0,
    issuedSecrets: [],
    registrationsTogether: options.registrationsTogether ?? false,
    refuseTokens: false,
    refuseRevocations: false,
    holdRevocations: () => {
      throw new Error('the authorization server is not started yet');
    },
    refusedJti: new Set(),
    namedIssuer: null,
    unavailableTo: new Set(),
    toolsFor: () => ({ tools: [] }),
    async stop() {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((r) => {
              s.closeAllConnections();
              s.close(() => r());
            }),
        ),
      );
    },
  };
  const provider = new Provider(issuer, {
    findAccount: async (_ctx: unknown, id: string) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    clients: options.client
      ? [
          {
            client_id: options.client.id,
            client_secret: options.client.secret,
            redirect_uris: [options.client.redirectUri],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
          },
        ]
      : [],
    pkce: { required: () => true },
    ...(options.clientMetadataFrom
      ? {
          fetch: (url: URL | string, init: RequestInit & { dispatcher?: unknown }) => {
            const { origin, reach } = options.clientMetadataFrom!;
            const href = String(url);
            if (!href.startsWith(`${origin}/`)) throw new Error(`the test provider fetches only from svc, not ${href}`);
            count('metadata document fetched');
            // The provider's own guard refuses loopback addresses, where svc is in this test.
            const { dispatcher: _guard, ...rest } = init;
            return fetch(reach + href.slice(origin.length), rest);
          },
        }
      : {}),
    cookies: { keys: ['upstream-provider-test-key'] },
    scopes: ['openid', 'offline_access', 'tools'],
    issueRefreshToken: async () => true,
    features: {
      devInteractions: { enabled: true },
      clientIdMetadataDocument: { enabled: options.clientMetadataFrom !== undefined, ack: 'draft-02' },
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => upstreamUrl,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => {
          if (resource !== upstreamUrl) throw new Error('unknown resource');
          return { scope: 'tools', audience: upstreamUrl, accessTokenTTL: options.accessTokenTtl ?? 3600, accessTokenFormat: 'jwt' };
        },
      },
    },
  } as ConstructorParameters<typeof Provider>[1]);
  provider.on('grant.success', (ctx: { oidc: { params?: { grant_type?: string }; client?: { clientId: string } } }) => {
    count(ctx.oidc.params?.grant_type ?? 'grant');
    count(`client:${ctx.oidc.client?.clientId}`);
  });
  provider.on('grant.revoked', () => count('revoked'));
  // A rotated refresh token presented a second time: the provider revokes the whole grant (as it should).
  provider.on('grant.error', (_ctx: unknown, error: { error_description?: string }) => {
    if (error.error_description === 'refresh token already used') count('refresh reused');
  });
  provider.on('registration_create.success', (_ctx: unknown, client: { clientSecret?: string }) => {
    count('registration');
    if (client.clientSecret) peers.issuedSecrets.push(client.clientSecret);
  });
  const as = authorizationServer(provider, peers, options);
  await new Promise<void>((r) => as.listen(asPort, '127.0.0.1', r));
  servers.push(as);
  const up = upstreamServer(peers, upPort);
  await new Promise<void>((r) => up.listen(upPort, '127.0.0.1', r));
  servers.push(up);
  return peers;
}

/** Walks the provider's login and consent pages as `login`, from the authorization URL to svc's callback (not requested). */
export async function atProvider(authorizationUrl: string, login: string, svcUrl: string): Promise<URL> {
  const agent = new Agent();
  const isCallback = (u: URL) => u.href.startsWith(`${svcUrl}/upstreams/`);
  let at = await agent.follow(authorizationUrl, isCallback);
  for (let step = 0; step < 6 && !isCallback(new URL(at.url)); step++) {
    const html = await at.res.text();
    at = await agent.follow(
      html.includes('name="login"') ? await agent.submit(at.url, html, { login, password: 'any' }) : await agent.submit(at.url, html),
      isCallback,
    );
  }
  assert.ok(isCallback(new URL(at.url)), `the provider sent the browser back to svc: ${at.url}`);
  return new URL(at.url);
}
