// [server]: where svc listens, the database it serves, and what it trusts about the network in front of it.
import { resolve } from 'node:path';
import { readIniSection, readEnv, type Env, type IniSection, type Lines } from './ini-section.ts';
import { readDuration } from './duration.ts';
import { readConnections } from './connections.ts';
import { parseHostPort } from './host-port.ts';
import { isLoopbackIssuerHost, parseNetwork } from '../domain/addresses.ts';
import { LOG_LEVELS, type LogLevel, type ServerConfig } from './types.ts';

const SERVER_KEYS = [
  'listen',
  'base_url',
  'database',
  'database_token_env',
  'insecure_database',
  'trusted_proxies',
  'allowed_origins',
  'audit_retention',
  'log_level',
  'workers',
  'metrics_listen',
  'max_connections',
  'max_connections_per_address',
  'header_timeout',
  'body_idle_timeout',
] as const;

export function readServer(lines: Lines | undefined, env: Env, baseDir: string, problems: string[]): ServerConfig | null {
  const section = readIniSection('server', lines, SERVER_KEYS, problems);
  const str = section.str;
  const { hostPort, baseUrl, secure } = readListen(str, problems);
  const { database, databaseToken } = readDatabase(section, env, baseDir, problems);
  const trustedProxies = readTrustedProxies(str('trusted_proxies', ''), problems);
  const allowedOrigins = readOrigins(str('allowed_origins', ''), problems);
  const { auditRetentionSeconds, logLevel, workers, metrics } = readOperation(str, hostPort, problems);
  const connections = readConnections(str, problems);

  if (!hostPort) return null;
  return {
    host: hostPort.host,
    port: hostPort.port,
    baseUrl,
    secure,
    database,
    databaseToken,
    trustedProxies,
    allowedOrigins,
    auditRetentionSeconds,
    logLevel,
    workers,
    metrics,
    connections,
  };
}

type Str = IniSection['str'];
type HostPort = NonNullable<ReturnType<typeof parseHostPort>>;

/** listen and base_url, which defaults to listen's address. */
function readListen(str: Str, problems: string[]): { hostPort: HostPort | null; baseUrl: string; secure: boolean } {
  const listen = str('listen', '127.0.0.1:8080');
  const hostPort = parseHostPort(listen);
  if (!hostPort) problems.push(`server.listen: "${listen}" is not host:port (such as 127.0.0.1:8080 or [::1]:8080)`);

  const defaultBase = hostPort ? `http://${hostPort.host.includes(':') ? `[${hostPort.host}]` : hostPort.host}:${hostPort.port}` : '';
  const baseText = str('base_url', defaultBase);
  let baseUrl = '';
  let secure = false;
  try {
    const u = new URL(baseText);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    if (u.pathname !== '/' || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') {
      problems.push(`server.base_url: must be an origin such as https://svc.example.com, without a path`);
    }
    baseUrl = u.origin;
    secure = u.protocol === 'https:';
  } catch {
    problems.push(`server.base_url: "${baseText}" is not an http:// or https:// URL`);
  }
  return { hostPort, baseUrl, secure };
}

/** database, insecure_database and database_token_env. */
function readDatabase(
  section: IniSection,
  env: Env,
  baseDir: string,
  problems: string[],
): { database: string; databaseToken: string | null } {
  let database = section.str('database', 'file:svc.db');
  if (!/^(file:.+|libsql:\/\/.+|https?:\/\/.+|wss?:\/\/.+)$/.test(database)) {
    problems.push(`server.database: "${database}" is not a libSQL URL (file:PATH, libsql://, http:// or https://)`);
  } else if (/^file:(?!\/|:memory:)/.test(database)) {
    // Relative to the configuration file, so one config names one database from whatever folder svc starts in.
    database = `file:${resolve(baseDir, database.slice('file:'.length))}`;
  }
  // Plain http:// and ws://, and any URL with tls=0 (which @libsql/client then speaks without TLS), carry the database
  // token and every row in clear text: only to this machine, unless the operator says the network between is trusted.
  const insecure = section.bool('insecure_database', false);
  const clear = clearTextDatabase(database);
  if (clear !== null && !insecure && !isLoopbackIssuerHost(clear.host)) {
    problems.push(
      `server.database: ${clear.how} to another machine sends the database token and every row in clear text; use https://, wss:// or libsql:// with TLS, or set insecure_database = true for a network you trust`,
    );
  }
  const tokenEnv = section.str('database_token_env', '');
  let databaseToken: string | null = null;
  if (tokenEnv !== '') databaseToken = readEnv('server.database_token_env', tokenEnv, env, problems);
  return { database, databaseToken };
}

/** trusted_proxies: addresses and networks whose X-Forwarded-For is believed. */
function readTrustedProxies(text: string, problems: string[]): string[] {
  const trustedProxies = text.split(/[\s,]+/).filter((p) => p !== '');
  for (const p of trustedProxies) {
    if (!parseNetwork(p)) problems.push(`server.trusted_proxies: "${p}" is not an IP address or network (such as 10.0.0.5 or 10.0.0.0/8)`);
  }
  return trustedProxies;
}

/** audit_retention, log_level, workers and metrics_listen (which must not be listen's port). */
function readOperation(
  str: Str,
  hostPort: HostPort | null,
  problems: string[],
): Pick<ServerConfig, 'auditRetentionSeconds' | 'logLevel' | 'workers' | 'metrics'> {
  const auditRetentionSeconds = readDuration('server.audit_retention', str('audit_retention', '180d'), problems);
  const logLevel = str('log_level', 'info');
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel))
    problems.push(`server.log_level: "${logLevel}" is not one of ${LOG_LEVELS.join(', ')}`);
  const workersText = str('workers', '1');
  const workers = /^\d{1,3}$/.test(workersText) ? Number(workersText) : NaN;
  if (Number.isNaN(workers)) problems.push(`server.workers: "${workersText}" is not a number of processes (0 = one per core)`);
  const metricsText = str('metrics_listen', '');
  const metrics = metricsText === '' ? null : parseHostPort(metricsText);
  if (metricsText !== '' && metrics === null)
    problems.push(`server.metrics_listen: "${metricsText}" is not host:port (such as 127.0.0.1:9464)`);
  if (metrics && hostPort && metrics.port === hostPort.port && metrics.port !== 0) {
    problems.push(`server.metrics_listen: must not share listen's port ${hostPort.port}; metrics are never served on the public listener`);
  }
  return {
    auditRetentionSeconds: auditRetentionSeconds ?? 0,
    logLevel: logLevel as LogLevel,
    workers: Number.isNaN(workers) ? 1 : workers,
    metrics,
  };
}

/** allowed_origins: browser origins, written without a path. */
function readOrigins(text: string, problems: string[]): string[] {
  const allowedOrigins: string[] = [];
  for (const o of text.split(/[\s,]+/).filter((p) => p !== '')) {
    let origin: string | null = null;
    try {
      const u = new URL(o);
      if ((u.protocol === 'http:' || u.protocol === 'https:') && u.origin === o.replace(/\/$/, '')) origin = u.origin;
    } catch {
      // reported below
    }
    if (origin === null) problems.push(`server.allowed_origins: "${o}" is not an origin (scheme://host[:port], no path)`);
    else allowedOrigins.push(origin);
  }
  return allowedOrigins;
}

/** How a database URL goes without TLS (`http://`, `ws://`, `tls=0`), and to which host; null when it is TLS or a file. */
function clearTextDatabase(database: string): { how: string; host: string } | null {
  let url: URL;
  try {
    url = new URL(database);
  } catch {
    return null;
  }
  if (url.protocol === 'file:') return null;
  const how =
    url.protocol === 'http:' || url.protocol === 'ws:' ? `${url.protocol}//` : url.searchParams.get('tls') === '0' ? 'tls=0' : null;
  return how === null ? null : { how, host: url.hostname };
}
