// A server for the /mcp throughput benchmark, run as its own process.
//   tsx scripts/bench/server.ts auth   DB_URL PORT  -> the shipped app (createApp): auth core on every request
//   tsx scripts/bench/server.ts metrics DB_URL PORT -> the shipped app with metrics on (what metrics_listen turns on)
//   tsx scripts/bench/server.ts nolog  DB_URL PORT  -> the shipped app with log_level = warn: no line per request
//   tsx scripts/bench/server.ts direct DB_URL PORT  -> the same app, with an authenticator that returns the bench user
//                                                     without looking at the request (the unauthenticated baseline)
//   tsx scripts/bench/server.ts bare   -      PORT  -> a bare MCP SDK server: Hono, the web-standard transport,
//                                                     stateless JSON, one `echo` tool, a shared Ajv validator, no auth
//                                                     (the MCP SDK's legacy line, @modelcontextprotocol/sdk 1.x; 2025 requests)
//   tsx scripts/bench/server.ts bare   -      PORT offers -> the same, with a prompt `greet` ({ text } -> one user
//                                                     message of it) and a resource `bench://note` (the text "hi") beside
//                                                     `echo`, answered by the server's fallback handler (part 7's upstream)
//   tsx scripts/bench/server.ts bare2  -      PORT  -> a bare server on the SDK's stable line (@modelcontextprotocol/server
//                                                     2.x): its createMcpHandler, strict 2026-07-28 (legacy: 'reject'),
//                                                     JSON answers, one `echo` tool, a shared Ajv validator, no auth and
//                                                     no router (node-server hands each request to the handler)
// The baselines exist only here: the shipped server has no switch that skips authentication.
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { loadConfig } from '../../src/config/load.ts';
import { openDatabase } from '../../src/db/open.ts';
import { createAuthenticator, type Authenticator } from '../../src/auth/core.ts';
import { channelsFor } from '../../src/auth/channels.ts';
import { createApp } from '../../src/http/app.ts';
import type { Services } from '../../src/http/context.ts';
import { getUser } from '../../src/store/users.ts';
import { createLogger } from '../../src/log.ts';
import { noMetrics } from '../../src/metrics/events.ts';
import { population } from '../../src/store/population.ts';

const [mode, dbUrl, port, extra] = process.argv.slice(2) as [string, string, string, string | undefined];
if (mode === 'bare') {
  const { Hono } = await import('hono');
  const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
  const { WebStandardStreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js');
  const { AjvJsonSchemaValidator } = await import('@modelcontextprotocol/sdk/validation/ajv');
  const { z } = await import('zod');
  const { ErrorCode, McpError } = await import('@modelcontextprotocol/sdk/types.js');
  const validator = new AjvJsonSchemaValidator();
  // With offers, the server declares prompts and resources and answers them from its fallback handler (what it calls
  // for a method no handler of its own takes): nothing is registered per request for them and the transport reads the
  // body as before, so a tools/call costs this upstream what it did without offers (but the capabilities' merge, a
  // few µs of a ~300 µs echo) and part 7's tool figures measure the same thing. Registering a prompt and a resource
  // on each request's McpServer costs ~15-20 µs here; reading the body with Hono to choose skips the SDK's read
  // through a web stream, which made a straight echo ~25% faster in one run: either would move part 7's figures.
  const offers = extra === 'offers';
  const GREET = { name: 'greet', description: 'greet', arguments: [{ name: 'text', required: true }] };
  const OFFERED = { prompts: {}, resources: {} };
  const NOTE = { uri: 'bench://note', name: 'note', description: 'a note', mimeType: 'text/plain' };
  const offered = async (request: { method: string; params?: Record<string, unknown> }) => {
    const params = request.params ?? {};
    switch (request.method) {
      case 'prompts/list':
        return { prompts: [GREET] };
      case 'prompts/get': {
        const text = (params.arguments as Record<string, unknown> | undefined)?.text;
        if (params.name !== 'greet' || typeof text !== 'string')
          throw new McpError(ErrorCode.InvalidParams, 'greet takes { text: string }');
        return { description: 'greet', messages: [{ role: 'user', content: { type: 'text', text } }] };
      }
      case 'resources/list':
        return { resources: [NOTE] };
      case 'resources/templates/list':
        return { resourceTemplates: [] };
      case 'resources/read':
        if (params.uri !== NOTE.uri) throw new McpError(-32002, `Resource not found: ${String(params.uri)}`);
        return { contents: [{ uri: NOTE.uri, mimeType: 'text/plain', text: 'hi' }] };
      default:
        throw new McpError(ErrorCode.MethodNotFound, 'Method not found');
    }
  };
  const bare = new Hono();
  bare.post('/mcp', async (c) => {
    const server = new McpServer({ name: 'bare', version: '1' }, { jsonSchemaValidator: validator });
    server.registerTool('echo', { description: 'echo', inputSchema: { text: z.string() } }, async ({ text }) => ({
      content: [{ type: 'text', text }],
    }));
    if (offers) {
      // On the low-level server: declared to McpServer, prompts and resources would get its own handlers.
      server.server.registerCapabilities(OFFERED);
      server.server.fallbackRequestHandler = offered;
    }
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      return await transport.handleRequest(c.req.raw);
    } finally {
      void server.close();
    }
  });
  serve({ fetch: bare.fetch, hostname: '127.0.0.1', port: Number(port) }, () => process.stdout.write('ready\n'));
  process.once('SIGINT', () => process.exit(0));
} else if (mode === 'bare2') {
  const { createMcpHandler, Server } = await import('@modelcontextprotocol/server');
  const { AjvJsonSchemaValidator } = await import('@modelcontextprotocol/server/validators/ajv');
  const validator = new AjvJsonSchemaValidator();
  const echo = {
    name: 'echo',
    description: 'echo',
    inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } }, required: ['text'] },
  };
  // The stable line's own way to serve 2026-07-28: a fresh server from the factory for each request. The low-level
  // Server with the tool's handlers written out, and JSON answers: in alternating rounds against McpServer with a zod
  // schema (1,961–2,147 req/s, `auto` and `json` answers) it answered 2,572 (docs/performance.md).
  const handler = createMcpHandler(
    () => {
      const server = new Server({ name: 'bare2', version: '1' }, { jsonSchemaValidator: validator, capabilities: { tools: {} } });
      server.setRequestHandler('tools/list', async () => ({ tools: [echo] }));
      server.setRequestHandler('tools/call', async ({ params }) => {
        const text = params.name === 'echo' ? params.arguments?.text : undefined;
        if (typeof text !== 'string') return { content: [{ type: 'text', text: 'echo takes { text: string }' }], isError: true };
        return { content: [{ type: 'text', text }] };
      });
      return server;
    },
    { legacy: 'reject', responseMode: 'json' },
  );
  serve(
    {
      fetch: (request) =>
        request.method === 'POST' && new URL(request.url).pathname === '/mcp'
          ? handler.fetch(request)
          : new Response(null, { status: 404 }),
      hostname: '127.0.0.1',
      port: Number(port),
    },
    () => process.stdout.write('ready\n'),
  );
  process.once('SIGINT', () => process.exit(0));
} else {
  const config = loadConfig(
    `[server]\nlisten = 127.0.0.1:${port}\nbase_url = http://127.0.0.1:${port}\ndatabase = ${dbUrl}\n[auth]\ntoken\n    enabled true\n`,
    {},
    { mode: 'serve' },
  );
  const database = await openDatabase(dbUrl, null);
  // Logging as the shipped server does: one JSON line per request, to a file the bench opened for it.
  const log = createLogger(undefined, mode === 'nolog' ? 'warn' : 'info');
  const metrics =
    mode === 'metrics'
      ? new (await import('../../src/metrics/prometheus.ts')).PrometheusMetrics({ population: () => population(database.db), oidc: null })
      : noMetrics;
  const services: Services = { config, database, log, metrics, auth: createAuthenticator(channelsFor(config, database, log)) };

  // The same application either way; only the authenticator differs. The baseline answers every request with
  // the bench user, so the difference between the two is exactly the auth core (token check and user lookup).
  const benchUser = await getUser(database.db, 'bench');
  const fixed: Authenticator = {
    resolve: async () => ({ kind: 'principal', principal: { user: benchUser, via: 'token', scopes: ['mcp'] } }),
  };
  const app = createApp(mode !== 'direct' ? services : { ...services, auth: fixed }, (c) => getConnInfo(c).remote.address ?? '');
  serve({ fetch: app.fetch, hostname: '127.0.0.1', port: Number(port) }, () => process.stdout.write('ready\n'));
  process.once('SIGINT', () => process.exit(0));
}
