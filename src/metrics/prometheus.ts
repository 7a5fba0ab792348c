// The metrics behind metrics_listen, on prom-client. Each process keeps its own registry; with several workers the
// primary asks each for theirs and serves the sum (prom-client's cluster aggregation), so a scrape sees the whole
// server. Gauges that read the database are taken once, not summed across workers.
import { MCP_METHODS } from '../domain/mcp-methods.ts';
import { createServer } from 'node:http';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { AuthOutcome, LoginOutcome, Metrics, UpstreamCallKind } from './events.ts';
import type { Population } from '../store/population.ts';
import type { Logger } from '../log.ts';

/** What the gauges read at scrape time. */
export interface GaugeSources {
  population(): Promise<Population>;
  /** null when single sign-on is off */
  oidc: (() => { ready: boolean; lastErrorAt: number | null }) | null;
}

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const MCP_TOOLS = new Set(['whoami', 'search', 'fetch']);
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class PrometheusMetrics implements Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests by route template, method and status',
    labelNames: ['route', 'method', 'status'],
    registers: [this.registry],
  });
  private readonly requestSeconds = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request duration by route template and method',
    labelNames: ['route', 'method'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly authOutcomes = new Counter({
    name: 'svc_auth_outcomes_total',
    help: 'How the auth core answered, by channel and outcome',
    labelNames: ['channel', 'outcome'],
    registers: [this.registry],
  });
  private readonly logins = new Counter({
    name: 'svc_login_attempts_total',
    help: 'Sign-in attempts by method and outcome (throttled: refused before the password was checked)',
    labelNames: ['method', 'outcome'],
    registers: [this.registry],
  });
  private readonly mcpCalls = new Counter({
    name: 'svc_mcp_calls_total',
    help: 'MCP messages by JSON-RPC method and tool',
    labelNames: ['method', 'tool'],
    registers: [this.registry],
  });
  private readonly mcpSeconds = new Histogram({
    name: 'svc_mcp_call_duration_seconds',
    help: 'MCP message handling time by JSON-RPC method and tool',
    labelNames: ['method', 'tool'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly busyRetries = new Counter({
    name: 'svc_database_busy_retries_total',
    help: 'Writes that found the database locked by another process and tried again',
    registers: [this.registry],
  });
  private readonly databaseErrors = new Counter({
    name: 'svc_database_errors_total',
    help: 'Writes that failed: busy after the whole wait, or failed',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private readonly databaseStatementCount = new Counter({
    name: 'svc_database_statements_total',
    help: 'Statements sent to the database: read (on a database server bearer lookups that arrived together are one; on the file one per distinct token) or write (inside a write transaction, BEGIN and COMMIT included)',
    labelNames: ['kind'],
    registers: [this.registry],
  });

  private readonly upstreamCalls = new Counter({
    name: 'svc_upstream_calls_total',
    help: 'Requests to upstream MCP servers by upstream, outcome (ok, error, unavailable, timeout, protocol, too_large, rate_limited, cancelled, …) and kind (tool, prompt, resource, completion)',
    labelNames: ['upstream', 'outcome', 'kind'],
    registers: [this.registry],
  });
  private readonly upstreamSeconds = new Histogram({
    name: 'svc_upstream_call_seconds',
    help: 'Time of calls to upstream MCP servers, by upstream',
    labelNames: ['upstream'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly upstreamsUp = new Gauge({
    name: 'svc_upstream_up',
    help: '1 when svc reached the upstream the last time it tried, else 0',
    labelNames: ['upstream'],
    registers: [this.registry],
  });

  constructor(sources: GaugeSources) {
    collectDefaultMetrics({ register: this.registry });
    // The population is read once per scrape and shared by the three gauges.
    let pending: Promise<Population> | null = null;
    const read = () => (pending ??= sources.population().finally(() => setImmediate(() => (pending = null))));
    const populationGauge = (name: string, help: string, pick: (p: Population) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        aggregator: 'max',
        async collect() {
          this.set(pick(await read()));
        },
      });
    populationGauge('svc_users', 'Users', (p) => p.users);
    populationGauge('svc_sessions_active', 'Sessions not yet expired', (p) => p.activeSessions);
    populationGauge('svc_tokens_active', 'Personal access tokens neither expired nor revoked', (p) => p.activeTokens);
    const oidc = sources.oidc;
    if (oidc !== null) {
      new Gauge({
        name: 'svc_oidc_discovery_ready',
        help: "1 once the OpenID provider's metadata is known, else 0",
        registers: [this.registry],
        aggregator: 'min',
        collect() {
          this.set(oidc().ready ? 1 : 0);
        },
      });
      new Gauge({
        name: 'svc_oidc_discovery_last_error_timestamp_seconds',
        help: 'When discovery last failed (0: never)',
        registers: [this.registry],
        aggregator: 'max',
        collect() {
          this.set((oidc().lastErrorAt ?? 0) / 1000);
        },
      });
    }
    // Counters start at zero for the outcomes an operator alerts on, so a rate() has a series before the first event.
    this.logins.inc({ method: 'password', outcome: 'throttled' }, 0);
    this.databaseErrors.inc({ kind: 'busy' }, 0);
    this.busyRetries.inc(0);
  }

  // Each series' child is looked up once by a plain string key: prom-client would otherwise sort and join the
  // label names on every call, which showed on the /mcp hot path.
  private readonly children = new Map<string, { inc(): void } | { observe(v: number): void }>();
  private child<T extends { inc(): void } | { observe(v: number): void }>(key: string, make: () => T): T {
    let c = this.children.get(key) as T | undefined;
    if (c === undefined) {
      c = make();
      this.children.set(key, c);
    }
    return c;
  }

  upstreamCall(upstream: string, outcome: string, seconds: number, kind: UpstreamCallKind): void {
    this.upstreamCalls.inc({ upstream, outcome, kind });
    this.upstreamSeconds.observe({ upstream }, seconds);
  }
  upstreamUp(upstream: string, up: boolean): void {
    this.upstreamsUp.set({ upstream }, up ? 1 : 0);
  }

  request(route: string, method: string, status: number, seconds: number): void {
    const m = HTTP_METHODS.has(method) ? method : 'OTHER';
    this.child(`r ${route} ${m} ${status}`, () => this.requests.labels({ route, method: m, status: String(status) })).inc();
    this.child(`rs ${route} ${m}`, () => this.requestSeconds.labels({ route, method: m })).observe(seconds);
  }
  auth(channel: string, outcome: AuthOutcome): void {
    this.child(`a ${channel} ${outcome}`, () => this.authOutcomes.labels({ channel, outcome })).inc();
  }
  login(method: 'password' | 'oidc', outcome: LoginOutcome): void {
    this.logins.inc({ method, outcome });
  }
  mcp(method: string, tool: string, seconds: number): void {
    const labels = { method: MCP_METHODS.has(method) ? method : 'other', tool: tool === '' ? '' : MCP_TOOLS.has(tool) ? tool : 'other' };
    this.child(`m ${labels.method} ${labels.tool}`, () => this.mcpCalls.labels(labels)).inc();
    this.child(`ms ${labels.method} ${labels.tool}`, () => this.mcpSeconds.labels(labels)).observe(seconds);
  }
  busyRetry(): void {
    this.busyRetries.inc();
  }
  databaseError(kind: 'busy' | 'failed'): void {
    this.databaseErrors.inc({ kind });
  }
  databaseStatements(kind: 'read' | 'write', count: number): void {
    this.child(`ds ${kind}`, () => this.databaseStatementCount.labels({ kind })).inc(count);
  }
}

/** In a worker: answer the primary's requests for this process's metrics. */
export function shareWithPrimary(metrics: PrometheusMetrics): void {
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([metrics.registry]);
}

/**
 * GET /metrics on metrics_listen: the registry of this process, or with workers the primary's sum of theirs.
 * In a single process also GET /readyz with the database problems spelled out (the public /readyz names only
 * their kind). Nothing else is served there.
 */
export async function serveScrapes(
  where: { host: string; port: number },
  scrape: () => Promise<{ body: string; type: string }>,
  log: Logger,
  problems?: () => Promise<string[]>,
): Promise<{ close(): void }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/readyz' && problems && req.method === 'GET') {
      const answer = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      problems().then(
        (found) =>
          answer(found.length > 0 ? 503 : 200, found.length > 0 ? { status: 'unavailable', problems: found } : { status: 'ready' }),
        () => answer(503, { status: 'unavailable', problems: ['the database is not open'] }),
      );
      return;
    }
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res
        .writeHead(404, { 'content-type': 'text/plain' })
        .end(`only GET /metrics${problems ? ' and GET /readyz are' : ' is'} served here\n`);
      return;
    }
    scrape().then(
      ({ body, type }) => res.writeHead(200, { 'content-type': type }).end(req.method === 'HEAD' ? undefined : body),
      () => res.writeHead(503, { 'content-type': 'text/plain' }).end('metrics are not available right now\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => reject(new Error(`server.metrics_listen: cannot listen on ${where.host}:${where.port} (${e.message})`)));
    server.listen(where.port, where.host, () => resolve());
  });
  const address = server.address();
  log.info('metrics_listening', { listen: `${where.host}:${typeof address === 'object' && address ? address.port : where.port}` });
  return { close: () => server.close() };
}

export function processScrape(metrics: PrometheusMetrics): () => Promise<{ body: string; type: string }> {
  return async () => ({ body: await metrics.registry.metrics(), type: metrics.registry.contentType });
}

export function clusterScrape(): () => Promise<{ body: string; type: string }> {
  const aggregator = new AggregatorRegistry();
  return async () => ({ body: await aggregator.clusterMetrics(), type: aggregator.contentType });
}
