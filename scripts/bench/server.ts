// A server for the /mcp throughput benchmark, run as its own process.
//   tsx scripts/bench/server.ts auth   DB_URL PORT  -> the shipped app (createApp): auth core on every request
//   tsx scripts/bench/server.ts direct DB_URL PORT  -> the same pipeline and /mcp route, but with the caller fixed
//                                                     by this script instead of resolved (the unauthenticated baseline)
// The baseline exists only here: the shipped server has no switch that skips authentication.
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { loadConfig } from '../../src/config/load.ts';
import { openDatabase } from '../../src/db/open.ts';
import { createAuthenticator } from '../../src/auth/core.ts';
import { channelsFor } from '../../src/auth/channels.ts';
import { createApp } from '../../src/http/app.ts';
import { securityHeaders, bodyLimits, requestLog } from '../../src/http/middleware.ts';
import { mcpRoutes } from '../../src/http/routes/mcp.ts';
import type { Env, Services } from '../../src/http/context.ts';
import { getUser } from '../../src/store/users.ts';
import { silentLogger } from '../../src/log.ts';

const [mode, dbUrl, port] = process.argv.slice(2) as [string, string, string];
const config = loadConfig(
  `[server]\nlisten = 127.0.0.1:${port}\nbase_url = http://127.0.0.1:${port}\ndatabase = ${dbUrl}\n[auth]\ntoken\n    enabled true\n`,
  {},
  { mode: 'serve' },
);
const database = await openDatabase(dbUrl, null);
const services: Services = { config, db: database.db, log: silentLogger, auth: createAuthenticator(channelsFor(config, database.db)) };

let app: Hono<Env>;
if (mode === 'auth') {
  app = createApp(services, (c) => getConnInfo(c).remote.address ?? '');
} else {
  const user = await getUser(database.db, 'bench');
  app = new Hono<Env>();
  app.use(securityHeaders());
  app.use(requestLog(services));
  app.use(bodyLimits());
  app.use(async (c, next) => {
    c.set('peer', '127.0.0.1');
    c.set('resolution', { kind: 'principal', principal: { user, via: 'token' } });
    await next();
  });
  app.route('/', mcpRoutes(services));
}
serve({ fetch: app.fetch, hostname: '127.0.0.1', port: Number(port) }, () => process.stdout.write('ready\n'));
process.once('SIGINT', () => process.exit(0));
