// `svc serve`: open and migrate the database, listen, and shut down gracefully on SIGINT/SIGTERM.
import { serve, type ServerType } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Config } from './config/load.ts';
import { openDatabase } from './db/open.ts';
import { createAuthenticator } from './auth/core.ts';
import { channelsFor } from './auth/channels.ts';
import { createApp } from './http/app.ts';
import type { Logger } from './log.ts';
import type { RelyingParty } from './auth/oidc.ts';

export interface Running {
  readonly port: number;
  stop(): Promise<void>;
}

/** How long in-flight requests may take to finish after a stop signal before their connections are cut. */
const SHUTDOWN_GRACE_MS = 10_000;

export async function startServer(config: Config, log: Logger): Promise<Running> {
  const database = await openDatabase(config.server.database, config.server.databaseToken);
  await database.migrate();
  // openid-client and its JOSE stack are loaded only when single sign-on is on.
  const oidc: RelyingParty | null = config.auth.oidc
    ? new (await import('./auth/oidc.ts')).RelyingParty(config.auth.oidc, config.auth.groups, log)
    : null;
  oidc?.start();
  const services = { config, db: database.db, log, oidc, auth: createAuthenticator(channelsFor(config, database.db, log)) };
  const app = createApp(services, (c) => getConnInfo(c).remote.address ?? '');

  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: config.server.host, port: config.server.port }, () => resolve(s));
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.server.port;
  log.info('listening', { url: config.server.baseUrl, listen: `${config.server.host}:${port}`, database: database.driver });

  let stopping: Promise<void> | null = null;
  return {
    port,
    stop() {
      stopping ??= new Promise<void>((resolve) => {
        // Stop accepting; idle keep-alive connections close now, in-flight requests get a grace period.
        const http = server as ServerType & { closeIdleConnections?: () => void; closeAllConnections?: () => void };
        const cut = setTimeout(() => {
          log.warn('shutdown_grace_over', { grace_ms: SHUTDOWN_GRACE_MS });
          http.closeAllConnections?.();
        }, SHUTDOWN_GRACE_MS);
        cut.unref();
        oidc?.stop();
        server.close(() => {
          clearTimeout(cut);
          database.close();
          log.info('stopped');
          resolve();
        });
        http.closeIdleConnections?.();
      });
      return stopping;
    },
  };
}
