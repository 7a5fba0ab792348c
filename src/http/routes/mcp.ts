// /mcp: svc's MCP server in both protocol eras, behind the auth core. Each request's body is read and parsed once,
// here; the era is the SDK's own classification of it (mcp/server.ts), and each era's rules follow from that.
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { oauthChallenge, resourceMetadataUrl } from '../../oauth/rules.ts';
import { requireCaller, type GuardOptions, type SignedCtx } from '../guards.ts';
import { MCP, policyFor } from '../policy.ts';
import { newSessionId, checkSessionId, declaredTraits, sessionIdKey, type SessionTraits } from '../../mcp/session-id.ts';
import { cursorKey } from '../../mcp/cursor.ts';
import { batchRefusal, opensSession } from '../../mcp/batch.ts';
import type { Call, McpEndpoint } from '../../mcp/server.ts';
import { callerOf, credentialOf, permits } from '../../auth/core.ts';
import { getCookie } from 'hono/cookie';
import type { Recheck } from '../../mcp/changes.ts';

/**
 * The MCP SDK (with zod and Ajv) is loaded on the first /mcp request: a server that has not served MCP yet keeps
 * ~10 MiB less resident, and starts sooner.
 */
const loadMcp = () => import('../../mcp/server.ts');

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

/** What an upstream may ask the person through a 2025 session's client, as it declared at initialize. */
function questionsOf(traits: SessionTraits) {
  return {
    form: traits.formElicitation === true,
    url: traits.urlElicitation,
    sampling: traits.sampling === true,
    roots: traits.roots === true,
  };
}

/** The MCP endpoint, made on first use with the cursor key (the SDK is loaded then), and the same ever after. */
function endpointLoader(services: Services): (cursor: Buffer) => Promise<McpEndpoint> {
  let endpoint: Promise<McpEndpoint> | null = null;
  return (cursor) =>
    (endpoint ??= loadMcp().then(({ mcpEndpoint }) =>
      mcpEndpoint({ db: services.database.db, cursorKey: cursor, log: services.log, gateway: services.gateway ?? null }, services.stopping),
    ));
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
  const endpointOf = endpointLoader(services);
  async function handle(c: SignedCtx): Promise<Response> {
    const principal = c.var.principal;
    // A server-initiated stream belongs to a session (the change notifications of mcp/changes.ts): without one, the
    // spec's answer to GET is 405.
    if (c.req.method === 'GET' && c.req.header('mcp-session-id') === undefined) return c.body(null, 405, { Allow: 'POST' });

    const sessionId = c.req.header('mcp-session-id');
    keys ??= sessionIdKey(services.config, services.database.db).then((session) => ({ session, cursor: cursorKey(session) }));
    const { session: key, cursor } = await keys;
    let traits: SessionTraits = { urlElicitation: false };
    if (sessionId !== undefined) {
      const session = checkSessionId(key, sessionId, principal.user.id);
      if (session.check !== 'ok')
        return session.check === 'malformed'
          ? rpcError(404, -32001, 'Session not found')
          : rpcError(403, -32000, 'this MCP session belongs to another user');
      traits = session.traits;
    }
    // A session id is signed, not stored: there is nothing to end, and the id would go on working. The specification's
    // answer for a server that does not let clients end sessions is 405.
    if (c.req.method === 'DELETE') return c.body(null, 405, { Allow: 'POST' });
    if (c.req.method === 'GET') {
      const caller = callerOf(principal, c.get('client'));
      const call = { caller, era: 'legacy' as const, urlElicitation: false, signal: () => c.req.raw.signal };
      return (await endpointOf(cursor)).stream(c.req.raw, call, sessionId!, recheckOf(services, c));
    }

    // The body is read and parsed here, once; the era, the batch rule and the session are decided from it.
    let parsedBody: unknown;
    const raw = await c.req.text();
    try {
      parsedBody = JSON.parse(raw);
    } catch {
      parsedBody = undefined;
    }
    if (parsedBody === undefined) return rpcError(400, -32700, 'Parse error: the body is not JSON');

    // Batches in neither era but 2025-03-26's, and small there.
    const batchRefused = batchRefusal(parsedBody, c.req.header('mcp-protocol-version'));
    if (batchRefused !== null) return rpcError(400, -32600, batchRefused);

    const mcp = await endpointOf(cursor);
    const era = await mcp.eraOf(c.req.raw, parsedBody);
    const call = callOf(c, era, traits, sessionId);
    const started = performance.now();
    const response =
      era === 'modern'
        ? await mcp.modern(c.req.raw, parsedBody, call, recheckOf(services, c))
        : await mcp.legacy(c.req.raw, parsedBody, call);
    countMessages(services, parsedBody, (performance.now() - started) / 1000);
    if (era === 'legacy' && response.ok && opensSession(parsedBody))
      response.headers.set('mcp-session-id', newSessionId(key, principal.user.id, declaredTraits(parsedBody)));
    return response;
  }
  return app;
}

/** The request's Call (mcp/methods.ts): who is calling in which era, and what their 2025 session declared. */
function callOf(c: SignedCtx, era: 'legacy' | 'modern', traits: SessionTraits, sessionId: string | undefined): Call {
  return {
    caller: callerOf(c.var.principal, c.get('client')),
    era,
    // Asked for as the 2025 era's URL elicitation error only: a 2026-07-28 client is asked through input_required,
    // which svc does not relay yet, so it gets the call's isError result naming the URL.
    urlElicitation: era === 'legacy' && traits.urlElicitation,
    // What an upstream may ask the person through this 2025 session's client, as it declared at initialize.
    questions: era === 'legacy' ? questionsOf(traits) : null,
    // Read only by a broad search: the request makes its AbortController only when asked.
    signal: () => c.req.raw.signal,
    // What its spans name (mcp/spans.ts): a 2025 request's revision and session.
    ...(era === 'legacy' ? { protocolVersion: c.req.header('mcp-protocol-version') ?? '2025-03-26' } : {}),
    ...(sessionId === undefined ? {} : { session: sessionId }),
  };
}

/**
 * The caller of this request as the auth core finds its credential now (a stream of change notifications asks on each
 * tick and before each resource update): null when it no longer holds (revoked, expired, signed out), is another
 * person's, or is no longer allowed `mcp`.
 */
function recheckOf(services: Services, c: SignedCtx): Recheck {
  const first = c.var.principal;
  const request = { method: c.req.method, headers: c.req.raw.headers, peer: c.get('peer'), cookie: (name: string) => getCookie(c, name) };
  return async () => {
    const now = await services.auth.resolve(request);
    if (now.kind !== 'principal') return null;
    const p = now.principal;
    if (p.user.id !== first.user.id || credentialOf(p) !== credentialOf(first) || !permits(p, 'mcp')) return null;
    return callerOf(p, c.get('client'));
  };
}
