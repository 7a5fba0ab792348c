// oidc-provider (a certified OpenID Provider from npm) on a loopback port, with accounts the test can change
// between logins, and a small user agent that walks its login and consent pages over HTTP.
import { createServer, request as httpRequest, type Server } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import Provider from 'oidc-provider';
import { enableIdJag, type IdJagIssuer, type IdJagOptions } from './id-jag.ts';

export interface Account {
  email?: string;
  /** true unless given: the provider vouches for the email */
  email_verified?: boolean;
  name?: string;
  preferred_username?: string;
  groups?: string[];
}

export interface TestProvider {
  readonly issuer: string;
  readonly accounts: Map<string, Account>;
  /** The next token response carries this ID token instead of the one the provider issued. */
  substituteNextIdToken(idToken: string): void;
  /** Runs a whole code flow for any registered client, outside svc, and returns the ID token it got. */
  obtainIdToken(o: { clientId: string; clientSecret: string; redirectUri: string; nonce: string; login: string }): Promise<string>;
  /** with `idJag`: the provider's own signing key and RFC 8693 token exchange issuing ID-JAGs */
  readonly idJag: IdJagIssuer | null;
  stop(): Promise<void>;
}

export const CLIENT_ID = 'svc';
export const CLIENT_SECRET = 'svc-client-secret-for-tests-0123456789';

/**
 * The provider listens on a private port behind a transparent proxy whose address is the issuer; the proxy can
 * swap the ID token of one token response, to test what svc does with tokens a provider should never send it.
 */
export async function startProvider(options: {
  port: number;
  redirectUris: string[];
  extraClients?: { client_id: string; client_secret: string; redirect_uris: string[] }[];
  /** play an enterprise identity provider that issues ID-JAGs to the extra clients */
  idJag?: IdJagOptions;
}): Promise<TestProvider> {
  const issuer = `http://127.0.0.1:${options.port}`;
  const accounts = new Map<string, Account>();
  const jag = options.idJag ? await enableIdJag(issuer, options.idJag) : null;
  const provider = new Provider(issuer, {
    // As an enterprise provider: its own key, and ID tokens that carry the profile claims an ID-JAG passes on.
    ...(jag ? { jwks: { keys: [jag.privateJwk] }, conformIdTokenClaims: false } : {}),
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        redirect_uris: options.redirectUris,
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
      ...(options.extraClients ?? []).map((c) => ({
        ...c,
        grant_types: ['authorization_code', ...(jag ? [jag.grantType] : [])],
        response_types: ['code'],
      })),
    ],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'preferred_username'], groups: ['groups'] },
    findAccount: async (_ctx: unknown, id: string) => ({
      accountId: id,
      async claims() {
        const a = accounts.get(id) ?? {};
        return { sub: id, ...(a.email ? { email: a.email, email_verified: true } : {}), ...a };
      },
    }),
    pkce: { required: () => true },
    cookies: { keys: ['oidc-provider-test-cookie-key'] },
    features: { devInteractions: { enabled: true } },
  } as ConstructorParameters<typeof Provider>[1]);
  jag?.register(provider);
  const inner: Server = createServer(provider.callback());
  // The provider's own listener: only the proxy in front calls it, so it takes whatever port the system gives.
  await new Promise<void>((resolve) => inner.listen(0, '127.0.0.1', resolve));
  const innerPort = (inner.address() as { port: number }).port;

  let substitute: string | null = null;
  const front: Server = createServer((req, res) => {
    const upstream = httpRequest({ host: '127.0.0.1', port: innerPort, path: req.url, method: req.method, headers: req.headers }, (up) => {
      if (!(req.method === 'POST' && req.url === '/token' && substitute !== null)) {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
        return;
      }
      let body = '';
      up.on('data', (d) => (body += d));
      up.on('end', () => {
        const json = JSON.parse(body) as Record<string, unknown>;
        if (typeof json.id_token === 'string') json.id_token = substitute;
        substitute = null;
        const out = JSON.stringify(json);
        res.writeHead(up.statusCode ?? 200, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(out),
          'cache-control': 'no-store',
        });
        res.end(out);
      });
    });
    // Connections cut at stop() end here quietly.
    upstream.on('error', () => res.destroy());
    req.on('error', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => front.listen(options.port, '127.0.0.1', resolve));

  const close = (server: Server) =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return {
    issuer,
    accounts,
    idJag: jag,
    substituteNextIdToken(idToken) {
      substitute = idToken;
    },
    async obtainIdToken(o) {
      const verifier = randomBytes(32).toString('base64url');
      const auth = new URL(`${issuer}/auth`);
      auth.search = new URLSearchParams({
        client_id: o.clientId,
        redirect_uri: o.redirectUri,
        response_type: 'code',
        scope: 'openid email profile',
        state: 'test-state',
        nonce: o.nonce,
        code_challenge: createHash('sha256').update(verifier).digest('base64url'),
        code_challenge_method: 'S256',
      }).toString();
      const agent = new Agent();
      const atRedirect = (u: URL) => u.href.startsWith(o.redirectUri);
      let at = await agent.follow(auth.href, atRedirect);
      for (let step = 0; step < 4 && !atRedirect(new URL(at.url)); step++) {
        const html = await at.res.text();
        at = await agent.follow(
          html.includes('name="login"')
            ? await agent.submit(at.url, html, { login: o.login, password: 'any' })
            : await agent.submit(at.url, html),
          atRedirect,
        );
      }
      const code = new URL(at.url).searchParams.get('code');
      if (!code) throw new Error(`no code in ${at.url}`);
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${o.clientId}:${o.clientSecret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: o.redirectUri,
          code_verifier: verifier,
        }).toString(),
      });
      const json = (await res.json()) as { id_token?: string };
      if (!json.id_token) throw new Error(`no id_token: ${JSON.stringify(json)}`);
      return json.id_token;
    },
    async stop() {
      await close(front);
      await close(inner);
    },
  };
}

/** A discovery document that claims to be `issuer` but sends everything to a real provider (an issuer mix-up). */
export async function startLyingDiscovery(port: number, realIssuer: string): Promise<{ issuer: string; stop(): Promise<void> }> {
  const issuer = `http://127.0.0.1:${port}`;
  const real = (await (await fetch(`${realIssuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
  const server = createServer((req, res) => {
    if (req.url !== '/.well-known/openid-configuration') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...real, issuer }));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { issuer, stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** A user agent: a cookie jar per host (cookies ignore ports, as in browsers) and manual redirects. */
export class Agent {
  readonly jar = new Map<string, Map<string, string>>();

  async get(url: string): Promise<Response> {
    return this.send(url, { method: 'GET' });
  }

  async send(url: string, init: RequestInit): Promise<Response> {
    const u = new URL(url);
    const cookies = this.jar.get(u.hostname) ?? new Map<string, string>();
    const headers = new Headers(init.headers);
    if (cookies.size) headers.set('cookie', [...cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = value === '' || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a) || /^\s*expires=Thu, 01 Jan 1970/i.test(a));
      if (expired) cookies.delete(name);
      else cookies.set(name, value);
    }
    this.jar.set(u.hostname, cookies);
    return res;
  }

  /** Follows redirects from `url` until a response is not a redirect or lands on `stopAt` (then an empty 204 stands for it). */
  async follow(url: string, stopAt?: (u: URL) => boolean): Promise<{ res: Response; url: string }> {
    let current = url;
    for (let i = 0; i < 20; i++) {
      if (stopAt?.(new URL(current))) return { res: new Response(null, { status: 204 }), url: current };
      const res = await this.get(current);
      const location = res.headers.get('location');
      if (res.status < 300 || res.status >= 400 || !location) return { res, url: current };
      current = new URL(location, current).href;
    }
    throw new Error('too many redirects');
  }

  /** Submits the first form of an HTML page with the given fields (plus its hidden inputs). */
  async submit(pageUrl: string, html: string, fields: Record<string, string> = {}): Promise<string> {
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    if (!action) throw new Error(`no form on ${pageUrl}: ${html.slice(0, 300)}`);
    const body = new URLSearchParams();
    for (const m of html.matchAll(/<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) body.set(m[1]!, m[2]!);
    for (const [k, v] of Object.entries(fields)) body.set(k, v);
    const target = new URL(action.replace(/&amp;/g, '&'), pageUrl).href;
    const res = await this.send(target, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: body.toString(),
    });
    const location = res.headers.get('location');
    if (!location) throw new Error(`form post to ${target} answered ${res.status}`);
    return new URL(location, target).href;
  }

  /**
   * Signs in at svc through the provider: /oidc/login, the provider's login and consent pages, and back. Returns
   * svc's answer to the callback (not followed) and the callback URL, for replay tests.
   */
  async signIn(
    svcUrl: string,
    login: string,
    options: { next?: string; beforeProvider?: (authorizationUrl: URL) => Promise<void> } = {},
  ): Promise<{ res: Response; callbackUrl: string }> {
    const start = await this.get(`${svcUrl}/oidc/login${options.next ? `?next=${encodeURIComponent(options.next)}` : ''}`);
    if (start.status !== 302) return { res: start, callbackUrl: '' };
    await options.beforeProvider?.(new URL(start.headers.get('location')!));
    const isCallback = (u: URL) => u.origin === svcUrl && u.pathname === '/oidc/callback';
    let at = await this.follow(new URL(start.headers.get('location')!).href, isCallback);
    for (let step = 0; step < 4 && !isCallback(new URL(at.url)); step++) {
      const html = await at.res.text();
      const next = html.includes('name="login"')
        ? await this.submit(at.url, html, { login, password: 'any' })
        : await this.submit(at.url, html);
      at = await this.follow(next, isCallback);
    }
    if (!isCallback(new URL(at.url))) throw new Error(`did not come back to svc: ${at.url}`);
    return { res: await this.get(at.url), callbackUrl: at.url };
  }

  cookie(host: string, name: string): string | undefined {
    return this.jar.get(host)?.get(name);
  }
}
