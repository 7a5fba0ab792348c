// `svc serve`: open, migrate and check the database, listen, and shut down gracefully on SIGINT/SIGTERM.
import cluster from 'node:cluster';
import type { Server } from 'node:http';
import { serve, type ServerType, type HttpBindings } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { REQUEST_TIMEOUT_SECONDS, type Config } from './config/load.ts';
import { shareConnections, type ConnectionShare } from './http/connections.ts';
import { addressMatcher } from './domain/addresses.ts';
import { openDatabase } from './db/open.ts';
import { createAuthenticator } from './auth/core.ts';
import { channelsFor } from './auth/channels.ts';
import { createApp } from './http/app.ts';
import type { Logger } from './log.ts';
import type { RelyingParty } from './auth/oidc.ts';
import { startAuditRetention } from './jobs/audit-retention.ts';
import { startSearchIndexing } from './jobs/search-index.ts';
import { noMetrics, type Metrics } from './metrics/events.ts';
import type { Database } from './db/open.ts';
import type { Services } from './http/context.ts';
import { population } from './store/population.ts';
import type { Clock } from './domain/clock.ts';
import { startTracing } from './trace/spans.ts';
import { TraceSettingsError } from './trace/settings.ts';
import { VERSION } from './version.ts';

/**
 * Metrics on metrics_listen: prom-client is loaded only then. A worker answers its primary, which serves the sum
 * of all workers; a single process serves its own.
 */
async function startMetrics(
  config: Config,
  sources: { database: Database | null; oidc: RelyingParty | null },
  log: Logger,
): Promise<{ metrics: Metrics; close(): void }> {
  const { PrometheusMetrics, shareWithPrimary, serveScrapes, processScrape } = await import('./metrics/prometheus.ts');
  const metrics = new PrometheusMetrics({
    population: () =>
      sources.database ? population(sources.database.db, sources.database.now()) : Promise.reject(new Error('the database is not open')),
    oidc: config.auth.oidc ? () => ({ ready: sources.oidc?.ready ?? false, lastErrorAt: sources.oidc?.lastErrorAt ?? null }) : null,
  });
  if (cluster.isWorker) {
    shareWithPrimary(metrics);
    return { metrics, close() {} };
  }
  const problems = () =>
    sources.database ? sources.database.problems({ waitMs: 1000 }) : Promise.reject(new Error('the database is not open'));
  const listener = await serveScrapes(config.server.metrics!, processScrape(metrics), log, problems);
  return { metrics, close: () => listener.close() };
}

export interface Running {
  readonly port: number;
  /** Stops accepting, lets in-flight requests finish within the grace period, then closes the database. */
  stop(): Promise<void>;
  /** Like stop, but cuts in-flight requests now (a second stop signal). */
  stopNow(): Promise<void>;
}

/** svc cannot serve: the message says what to fix. */
export class StartupError extends Error {}

/** How long in-flight requests may take to finish after a stop signal before their connections are cut. */
export const SHUTDOWN_GRACE_MS = 10_000;
/** After connections are cut, how long handlers still running get to notice before the database closes. */
const SETTLE_MS = 2_000;

/**
 * Limits that keep a slow or greedy client from holding the server. From [server] (defaults): all of a request's
 * headers within header_timeout (10 s), no body left without a byte for body_idle_timeout (10 s), at most
 * max_connections (1,000) at once (past it a waiting connection is cut for a new one, else the new one is refused),
 * and of them max_connections_per_address (100) for one
 * client. Fixed: the whole request within 60 s (bodies are at most 4 MiB), idle keep-alive connections closed
 * after 5 s, checked every second; half of max_connections for connections still waiting for their request, so
 * slow clients from many addresses leave the other half to requests that arrived.
 */
export const CONNECTION_LIMITS = { requestTimeoutMs: REQUEST_TIMEOUT_SECONDS * 1000, keepAliveTimeoutMs: 5_000, checkEveryMs: 1_000 };
type ConnectionLimits = typeof CONNECTION_LIMITS & {
  headersTimeoutMs: number;
  bodyIdleMs: number;
  maxConnections: number;
  perAddress: number;
  maxWaiting: number;
};

function limitsOf(config: Config, overrides: Partial<ConnectionLimits> = {}): ConnectionLimits {
  const { max, perAddress, headersTimeoutMs, bodyIdleMs } = config.server.connections;
  return {
    ...CONNECTION_LIMITS,
    headersTimeoutMs,
    bodyIdleMs,
    maxConnections: max,
    perAddress,
    maxWaiting: Math.max(1, Math.floor(max / 2)),
    ...overrides,
  };
}

/** What svc serves with, built before it listens, and how to close it again. */
interface Composed {
  readonly database: Database;
  readonly services: Services;
  readonly app: ReturnType<typeof createApp>;
  /** aborted when the stop begins: streams held open end then, so the server can close */
  readonly stopping: AbortController;
  close(): Promise<void>;
}

/** Metrics, the database (migrated, and refused when it cannot be written), single sign-on, the auth core, the app. */
async function compose(config: Config, log: Logger, clock: Clock | undefined): Promise<Composed> {
  // Traces, when the environment names an exporter (the SDK is loaded only then): first, so that nothing started
  // before it goes untraced, and stopped last.
  const tracing = await startTracing(log, VERSION).catch((e: unknown) => {
    throw e instanceof TraceSettingsError ? new StartupError(e.message) : e;
  });
  const sources = { database: null as Database | null, oidc: null as RelyingParty | null };
  const prometheus = config.server.metrics ? await startMetrics(config, sources, log) : null;
  const database = await openDatabase(config.server.database, config.server.databaseToken, {
    ...(prometheus ? { events: prometheus.metrics } : {}),
    ...(clock ? { clock } : {}),
  }).catch(async (e: unknown) => {
    prometheus?.close();
    await tracing.stop();
    throw e;
  });
  sources.database = database;
  try {
    await database.migrate();
    // Refuse to serve a database svc cannot write: every login and change would fail.
    const problems = await database.problems();
    if (problems.length > 0) throw new StartupError(problems.join('\n'));
  } catch (e) {
    database.close();
    prometheus?.close();
    await tracing.stop();
    throw e;
  }
  // openid-client and its JOSE stack are loaded only when single sign-on is on.
  const oidc = config.auth.oidc ? new (await import('./auth/oidc.ts')).RelyingParty(config.auth.oidc, config.auth.groups, log) : null;
  oidc?.start();
  sources.oidc = oidc;
  const metrics = prometheus?.metrics ?? noMetrics;
  // What the database holds sealed under a session secret other than this one, said and settled before the upstreams
  // start (a new signing key, accounts to connect again).
  if (config.upstreams.length > 0 && config.auth.session)
    await (await import('./upstream/secret-change.ts')).settleSecretChange(database, config.auth.session.secret, log);
  // The upstreams' connections and tool discovery, when there are [upstream] sections (loaded only then).
  const gateway =
    config.upstreams.length > 0 ? await (await import('./upstream/gateway.ts')).startGateway(config, database, log, metrics) : null;
  const auth = createAuthenticator(channelsFor(config, database, log));
  const stopping = new AbortController();
  const services = { config, database, log, oidc, metrics, auth, gateway: gateway?.gateway ?? null, stopping: stopping.signal };
  const app = createApp(services, (c) => getConnInfo(c).remote.address ?? '');
  return {
    database,
    services,
    app,
    stopping,
    async close() {
      oidc?.stop();
      await gateway?.stop();
      database.close();
      prometheus?.close();
      await tracing.stop();
    },
  };
}

const SHARE_EXCEEDED = {
  error: 'too_many_requests',
  message: "this client address holds its share of the server's connections; try again when some have finished",
};

/**
 * The app's fetch, counting the requests whose handler has not finished (so the database closes only after the
 * last one), and refusing a request a trusted proxy forwards for a client that holds its share already.
 */
function counted(app: Composed['app'], share: () => ConnectionShare | null) {
  let active = 0;
  let settled: (() => void) | null = null;
  const fetch: typeof app.fetch = async (request, env, ctx) => {
    const { incoming, outgoing } = (env ?? {}) as Partial<HttpBindings>;
    const shares = share();
    if (shares && incoming && outgoing && !shares.admitForwarded(incoming, outgoing))
      return Response.json(SHARE_EXCEEDED, { status: 429, headers: { 'Retry-After': '5', Connection: 'close' } });
    active++;
    try {
      return await app.fetch(request, env, ctx);
    } finally {
      if (--active === 0) settled?.();
    }
  };
  return {
    fetch,
    active: () => active,
    /** Resolves when no handler runs, or after `withinMs`: handlers of cut connections may still be running. */
    drained: (withinMs: number) =>
      active === 0
        ? Promise.resolve()
        : new Promise<void>((r) => {
            settled = r;
            setTimeout(r, withinMs).unref();
          }),
  };
}

type Listening = ServerType & { closeIdleConnections(): void; closeAllConnections(): void };

/** Listens with the connection limits, connections shared between client addresses (http/connections.ts). */
async function listen(
  config: Config,
  limits: ConnectionLimits,
  fetch: Composed['app']['fetch'],
  log: Logger,
): Promise<{ server: Listening; share: ConnectionShare; port: number }> {
  let share: ConnectionShare | null = null;
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve(
      {
        fetch,
        hostname: config.server.host,
        port: config.server.port,
        serverOptions: {
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          connectionsCheckingInterval: limits.checkEveryMs,
        },
      },
      () => resolve(s),
    );
    share = shareConnections(s as Server, limits, addressMatcher(config.server.trustedProxies), log);
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.server.port;
  return { server: server as Listening, share: share!, port };
}

/**
 * The background jobs: indexing items an older svc wrote, audit retention, and mail to users when [notify] is set
 * (loaded only then).
 */
async function startJobs(config: Config, database: Database, log: Logger): Promise<{ stop(): Promise<void> }> {
  const indexing = startSearchIndexing(database, log);
  const retention = startAuditRetention(database, config.server.auditRetentionSeconds * 1000, log);
  const notices = config.notify
    ? (await import('./notify/job.ts')).startNoticeJob(database, config.notify, config.server.baseUrl, log)
    : null;
  return {
    async stop() {
      await indexing.stop();
      await retention.stop();
      await notices?.stop();
    },
  };
}

export async function startServer(
  config: Config,
  log: Logger,
  options: { graceMs?: number; limits?: Partial<ConnectionLimits>; clock?: Clock } = {},
): Promise<Running> {
  const composed = await compose(config, log, options.clock);
  let share: ConnectionShare | null = null;
  const requests = counted(composed.app, () => share);
  const listening = await listen(config, limitsOf(config, options.limits), requests.fetch, log);
  share = listening.share;
  log.info('listening', {
    url: config.server.baseUrl,
    listen: `${config.server.host}:${listening.port}`,
    database: composed.database.location,
    driver: composed.database.driver,
  });
  const jobs = await startJobs(config, composed.database, log);
  return { port: listening.port, ...shutdown({ ...listening, composed, requests, jobs }, options.graceMs ?? SHUTDOWN_GRACE_MS, log) };
}

/**
 * A graceful stop: stop accepting, let requests in flight finish within the grace (then cut their connections), give
 * handlers of cut connections a moment, then stop the jobs, write what the auth core holds, and close the database.
 */
function shutdown(
  parts: {
    server: Listening;
    share: ConnectionShare;
    composed: Composed;
    requests: ReturnType<typeof counted>;
    jobs: { stop(): Promise<void> };
  },
  graceMs: number,
  log: Logger,
): Omit<Running, 'port'> {
  const { server, share, composed, requests, jobs } = parts;
  let cut: NodeJS.Timeout | null = null;
  let stopping: Promise<void> | null = null;
  const cutConnections = () => {
    if (cut) clearTimeout(cut);
    server.closeAllConnections();
  };
  const closeAll = async () => {
    share.stop();
    await jobs.stop();
    await composed.services.auth.close?.().catch(() => undefined);
    await composed.close();
    log.info('stopped');
  };
  const stop = () => {
    composed.stopping.abort();
    stopping ??= new Promise<void>((resolve) => {
      cut = setTimeout(() => {
        log.warn('shutdown_grace_over', { grace_ms: graceMs, in_flight: requests.active() });
        cutConnections();
      }, graceMs);
      cut.unref();
      server.close(() => {
        if (cut) clearTimeout(cut);
        void requests.drained(SETTLE_MS).then(closeAll).then(resolve);
      });
      server.closeIdleConnections();
    });
    return stopping;
  };
  return {
    stop,
    stopNow() {
      const done = stop();
      cutConnections();
      return done;
    },
  };
}
