// /mcp: the SDK's web-standard Streamable HTTP transport in stateless JSON mode, behind the auth core.
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { oauthChallenge, resourceMetadataUrl } from '../../oauth/rules.ts';
import { requireCaller, type GuardOptions, type SignedCtx } from '../guards.ts';
import { MCP, policyFor } from '../policy.ts';
import { newSessionId, checkSessionId, declaresUrlElicitation, sessionIdKey } from '../../mcp/session-id.ts';
import { cursorKey } from '../../mcp/cursor.ts';
import { batchRefusal } from '../../mcp/batch.ts';

/**
 * The MCP SDK (with zod and Ajv) is loaded on the first /mcp request: a server that has not served MCP yet keeps
 * ~10 MiB less resident, and starts sooner.
 */
let mcpModules: Promise<{
  Transport: typeof import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js').WebStandardStreamableHTTPServerTransport;
  buildMcpServer: typeof import('../../mcp/server.ts').buildMcpServer;
}> | null = null;
const loadMcp = () =>
  (mcpModules ??= Promise.all([
    import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
    import('../../mcp/server.ts'),
  ]).then(([transport, server]) => ({
    Transport: transport.WebStandardStreamableHTTPServerTransport,
    buildMcpServer: server.buildMcpServer,
  })));

function rpcError(status: number, code: number, message: string): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), {
    status,
    headers: { 'content-type': 'application/json' },
  });
}

/** Each JSON-RPC message of the body, by method and (for tools/call) tool; a batch shares its time. */
function countMessages(services: Services, body: unknown, seconds: number): void {
  for (const m of Array.isArray(body) ? body : [body]) {
    if (m === null || typeof m !== 'object') continue;
    const { method, params } = m as { method?: unknown; params?: { name?: unknown } };
    if (typeof method !== 'string') continue;
    const tool = method === 'tools/call' && typeof params?.name === 'string' ? params.name : '';
    services.metrics.mcp(method, tool, seconds);
  }
}

function isInitialize(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((m) => m !== null && typeof m === 'object' && (m as { method?: unknown }).method === 'initialize');
}

/**
 * /mcp, and with OAuth on, /oauth/mcp: the same endpoint, whose 401 names the OAuth metadata. /mcp announces OAuth
 * only with advertise_on_mcp (some static-header clients stop sending their header once a server does).
 */
export function mcpRoutes(services: Services): Hono<Env> {
  const app = new Hono<Env>();
  // The session-id key, and the resources/list cursor key derived from it: read once, on the first request.
  let keys: Promise<{ session: Buffer; cursor: Buffer }> | null = null;
  const { oauth, baseUrl } = { oauth: services.config.auth.oauth, baseUrl: services.config.server.baseUrl };
  // Each endpoint with the guard options that say how it answers: a token needs the `mcp` scope on both.
  const oauthGuard = (path: string) => ({ challenge: oauthChallenge(baseUrl, path), resourceMetadata: resourceMetadataUrl(baseUrl, path) });
  const endpoints: [string, GuardOptions][] = [['/mcp', oauth?.advertiseOnMcp ? oauthGuard('/mcp') : {}]];
  if (oauth) endpoints.push(['/oauth/mcp', oauthGuard('/oauth/mcp')]);
  const policy = policyFor(services);
  for (const [path, options] of endpoints)
    app.on(['GET', 'POST', 'DELETE'], path, policy(MCP), requireCaller({ ...options, scope: 'mcp' }), handle);
  async function handle(c: SignedCtx): Promise<Response> {
    const principal = c.var.principal;
    // No server-initiated stream in stateless mode: the spec's answer to GET is 405.
    if (c.req.method === 'GET') return c.body(null, 405, { Allow: 'POST, DELETE' });

    const sessionId = c.req.header('mcp-session-id');
    keys ??= sessionIdKey(services.config, services.database.db).then((session) => ({ session, cursor: cursorKey(session) }));
    const { session: key, cursor } = await keys;
    let urlElicitation = false;
    if (sessionId !== undefined) {
      const session = checkSessionId(key, sessionId, principal.user.id);
      if (session.check !== 'ok')
        return session.check === 'malformed'
          ? rpcError(404, -32001, 'Session not found')
          : rpcError(403, -32000, 'this MCP session belongs to another user');
      urlElicitation = session.traits.urlElicitation;
    }
    if (c.req.method === 'DELETE') return c.body(null, 200);

    // Read the body here once: to see whether it opens a session, and to hand it on parsed.
    let parsedBody: unknown;
    const raw = await c.req.text();
    try {
      parsedBody = JSON.parse(raw);
    } catch {
      parsedBody = undefined;
    }
    if (parsedBody === undefined) return rpcError(400, -32700, 'Parse error: the body is not JSON');
    const batchRefused = batchRefusal(parsedBody, c.req.header('mcp-protocol-version'));
    if (batchRefused !== null) return rpcError(400, -32600, batchRefused);

    const { Transport, buildMcpServer } = await loadMcp();
    const server = buildMcpServer(services.database.db, principal, {
      cursorKey: cursor,
      log: services.log,
      upstreams: services.upstreams ?? null,
      peer: c.get('client'),
      urlElicitation,
      // Read only by a broad search: the request makes its AbortSignal when first asked.
      signal: () => c.req.raw.signal,
    });
    const transport = new Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    // Stateless JSON: once the response is built, nothing is pending, and nothing but this request holds the server
    // and transport. Closing them would only build abort signals and errors that nobody reads; they are left to GC.
    const started = performance.now();
    const response = await transport.handleRequest(c.req.raw, { parsedBody });
    countMessages(services, parsedBody, (performance.now() - started) / 1000);
    if (response.ok && isInitialize(parsedBody))
      response.headers.set('mcp-session-id', newSessionId(key, principal.user.id, { urlElicitation: declaresUrlElicitation(parsedBody) }));
    return response;
  }
  return app;
}
