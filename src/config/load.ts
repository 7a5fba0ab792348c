// Reads svc.ini once, validates all of it, and returns one frozen Config. Every problem is collected, so an
// operator fixes the file in one pass; nothing in svc reads the environment after this.
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { readIniSection, readEnv, ENV_NAME, type Env, type Lines } from './ini-section.ts';
import { readNotify, type NotifyConfig } from './notify.ts';
import { parseLabels, LabelError, type LabelSet } from '../domain/labels.ts';
import { parseDuration, DURATION_HINT } from '../domain/duration.ts';
import { parseTree, type TreeNode } from './tree.ts';
import { isLoopbackIssuerHost, normalizeIp, parseNetwork } from '../domain/addresses.ts';

export interface SessionConfig {
  /** the session cookie's name as sent: `__Host-<cookie_name>` when base_url is https */
  readonly cookieName: string;
  /** the single sign-on flow cookie's name: `__Secure-<cookie_name>_oidc` when base_url is https */
  readonly flowCookieName: string;
  readonly ttlSeconds: number;
  readonly secret: Buffer;
}
export interface OidcConfig {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly redirectUrl: string;
  readonly jit: boolean;
  readonly defaultAcl: LabelSet;
  readonly uidClaim: string;
  readonly subjectClaim: string;
}
export interface HeaderConfig {
  readonly userHeader: string;
  readonly emailHeader: string;
  readonly nameHeader: string | null;
  readonly groupsHeader: string | null;
  readonly secretHeader: string;
  readonly sharedSecret: Buffer;
  readonly trustedProxies: readonly string[];
  readonly jit: boolean;
  readonly defaultAcl: LabelSet;
}
export interface OauthConfig {
  readonly accessTtlSeconds: number;
  readonly refreshTtlSeconds: number;
  readonly refreshGraceSeconds: number;
  readonly dynamicRegistration: boolean;
  readonly clientMetadataDocuments: boolean;
  readonly advertiseOnMcp: boolean;
  /** testing only: fetch client metadata documents from loopback and private addresses */
  readonly clientMetadataAllowPrivate: boolean;
  /** enterprise-managed authorization (ID-JAG, CONTRACT §7.1), or null when not configured */
  readonly enterprise: EnterpriseConfig | null;
}
/** The enterprise identity provider whose Identity Assertion JWT Authorization Grants svc accepts. */
export interface EnterpriseConfig {
  readonly issuer: string;
  /** the `aud` an assertion must carry: svc's issuer (base_url) unless configured */
  readonly audience: string;
  readonly jit: boolean;
  readonly defaultAcl: LabelSet;
  readonly subjectClaim: string;
  /** the claim that may vouch for a pre-provisioned uid, as oidc's uid_claim (inherited from [auth] oidc for the same issuer) */
  readonly uidClaim: string;
}
export interface ConnectionsConfig {
  /** connections at once; more are refused at accept */
  readonly max: number;
  /** connections (or, behind a trusted proxy, requests in flight) one client address may hold */
  readonly perAddress: number;
  /** all of a request's headers must arrive within this */
  readonly headersTimeoutMs: number;
  /** a request body that brings no byte for this long is cut */
  readonly bodyIdleMs: number;
}
/** A request may take this long in all (Node's requestTimeout); the two deadlines above must fit in it. */
export const REQUEST_TIMEOUT_SECONDS = 60;
export interface GroupsConfig {
  readonly claim: string;
  readonly map: ReadonlyMap<string, LabelSet>;
}
export interface Config {
  readonly server: {
    readonly host: string;
    readonly port: number;
    readonly baseUrl: string; // origin only, no trailing slash
    readonly secure: boolean;
    readonly database: string;
    readonly databaseToken: string | null;
    /** addresses and networks of reverse proxies whose X-Forwarded-For names the client */
    readonly trustedProxies: readonly string[];
    /** browser origins besides base_url's that may call /mcp */
    readonly allowedOrigins: readonly string[];
    /** audit entries older than this are removed (seconds) */
    readonly auditRetentionSeconds: number;
    readonly logLevel: LogLevel;
    /** processes serving the socket; 0 = one per core */
    readonly workers: number;
    /** where GET /metrics is served, never the public listener; null = off */
    readonly metrics: { readonly host: string; readonly port: number } | null;
    /** what one process lets clients hold (CONTRACT §5 Connections) */
    readonly connections: ConnectionsConfig;
  };
  /** mail to users ([notify]); null when the section is absent */
  readonly notify: NotifyConfig | null;
  readonly auth: {
    readonly session: SessionConfig | null;
    readonly local: boolean;
    readonly oidc: OidcConfig | null;
    readonly header: HeaderConfig | null;
    readonly token: boolean;
    readonly groups: GroupsConfig | null;
    /** OAuth 2.1 authorization server for MCP clients (CONTRACT §7), or null when off */
    readonly oauth: OauthConfig | null;
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(problems.join('\n'));
  }
}

export interface LoadOptions {
  /**
   * 'serve' resolves every `_env` secret. 'data' (the user, item and token commands) checks the whole file but
   * reads only the database token, so an operator can manage data without holding the session or SSO secrets.
   */
  readonly mode: 'serve' | 'data';
  /** the folder of the configuration file: a relative `file:` database path is resolved against it (default: cwd) */
  readonly baseDir?: string;
}


const SERVER_KEYS = [
  'listen', 'base_url', 'database', 'database_token_env', 'trusted_proxies', 'allowed_origins', 'audit_retention', 'log_level', 'workers', 'metrics_listen',
  'max_connections', 'max_connections_per_address', 'header_timeout', 'body_idle_timeout',
] as const;
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

type Kind = 'bool' | 'text' | 'duration' | 'env' | 'labels' | 'header' | 'map' | 'block';
const AUTH_SPEC: Record<string, Record<string, Kind>> = {
  session: { cookie_name: 'text', ttl: 'duration', secret_env: 'env' },
  local: { enabled: 'bool' },
  oidc: {
    enabled: 'bool', issuer: 'text', client_id: 'text', client_secret_env: 'env', redirect_url: 'text', jit: 'bool',
    default_acl: 'labels', uid_claim: 'text', subject_claim: 'text',
  },
  header: {
    enabled: 'bool', user_header: 'header', email_header: 'header', name_header: 'header', groups_header: 'header',
    secret_header: 'header', shared_secret_env: 'env', trusted_proxy: 'text', jit: 'bool', default_acl: 'labels',
  },
  token: { enabled: 'bool' },
  groups: { enabled: 'bool', claim: 'text', map: 'map' },
  oauth: {
    enabled: 'bool', access_ttl: 'duration', refresh_ttl: 'duration', refresh_grace: 'duration', dynamic_registration: 'bool',
    client_metadata_documents: 'bool', advertise_on_mcp: 'bool', client_metadata_allow_private: 'bool', enterprise: 'block',
  },
};
/** Nested blocks of [auth] (kind 'block'), by their dotted name below auth. */
const BLOCK_SPEC: Record<string, Record<string, Exclude<Kind, 'map' | 'block'>>> = {
  'oauth.enterprise': { issuer: 'text', audience: 'text', jit: 'bool', default_acl: 'labels', subject_claim: 'text', uid_claim: 'text' },
};

const HEADER_NAME = /^[A-Za-z0-9-]+$/;
const MIN_SECRET_BYTES = 32;

export function loadConfig(text: string, env: Env, options: LoadOptions): Config {
  const problems: string[] = [];
  const sections = splitSections(text, problems);
  const server = readServer(sections.get('server'), env, options.baseDir ?? process.cwd(), problems);
  const auth = readAuth(sections.get('auth') ?? [], env, options, server, problems);
  const notify = sections.has('notify') ? readNotify(sections.get('notify'), env, options.mode === 'serve', problems) : null;
  if (problems.length > 0) throw new ConfigError(problems.map((p) => `svc: config: ${p}`));
  return deepFreeze({ server: server!, auth: auth!, notify });
}

function splitSections(text: string, problems: string[]): Map<string, Lines> {
  const sections = new Map<string, Lines>();
  let current: Lines | null = null;
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = i + 1;
    const header = /^\s*\[([^\]]*)\]\s*$/.exec(raw);
    if (header) {
      const name = header[1]!.trim();
      if (name !== 'server' && name !== 'auth' && name !== 'notify') {
        problems.push(`${name}: unknown section (line ${line}); svc.ini has [server], [notify] and [auth]`);
        current = [];
      } else if (sections.has(name)) {
        problems.push(`${name}: section given twice (line ${line})`);
        current = [];
      } else {
        current = [];
        sections.set(name, current);
      }
      return;
    }
    const trimmed = raw.trim();
    if (current === null) {
      if (trimmed !== '' && !trimmed.startsWith('#') && !trimmed.startsWith(';')) {
        problems.push(`line ${line}: outside any section; start the file with [server]`);
      }
      return;
    }
    current.push({ text: raw, line });
  });
  return sections;
}

function readServer(lines: Lines | undefined, env: Env, baseDir: string, problems: string[]): Config['server'] | null {
  const section = readIniSection('server', lines, SERVER_KEYS, problems);
  const str = section.str;

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

  let database = str('database', 'file:svc.db');
  if (!/^(file:.+|libsql:\/\/.+|https?:\/\/.+|wss?:\/\/.+)$/.test(database)) {
    problems.push(`server.database: "${database}" is not a libSQL URL (file:PATH, libsql://, http:// or https://)`);
  } else if (/^file:(?!\/|:memory:)/.test(database)) {
    // Relative to the configuration file, so one config names one database from whatever folder svc starts in.
    database = `file:${resolve(baseDir, database.slice('file:'.length))}`;
  }
  const tokenEnv = str('database_token_env', '');
  let databaseToken: string | null = null;
  if (tokenEnv !== '') databaseToken = readEnv('server.database_token_env', tokenEnv, env, problems);

  const trustedProxies = str('trusted_proxies', '').split(/[\s,]+/).filter((p) => p !== '');
  for (const p of trustedProxies) {
    if (!parseNetwork(p)) problems.push(`server.trusted_proxies: "${p}" is not an IP address or network (such as 10.0.0.5 or 10.0.0.0/8)`);
  }
  const allowedOrigins: string[] = [];
  for (const o of str('allowed_origins', '').split(/[\s,]+/).filter((p) => p !== '')) {
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

  const retentionText = str('audit_retention', '180d');
  const auditRetentionSeconds = parseDuration(retentionText);
  if (auditRetentionSeconds === null) problems.push(`server.audit_retention: "${retentionText}" is not a duration; ${DURATION_HINT}`);
  const logLevel = str('log_level', 'info');
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) problems.push(`server.log_level: "${logLevel}" is not one of ${LOG_LEVELS.join(', ')}`);
  const workersText = str('workers', '1');
  const workers = /^\d{1,3}$/.test(workersText) ? Number(workersText) : NaN;
  if (Number.isNaN(workers)) problems.push(`server.workers: "${workersText}" is not a number of processes (0 = one per core)`);
  const metricsText = str('metrics_listen', '');
  const metrics = metricsText === '' ? null : parseHostPort(metricsText);
  if (metricsText !== '' && metrics === null) problems.push(`server.metrics_listen: "${metricsText}" is not host:port (such as 127.0.0.1:9464)`);
  if (metrics && hostPort && metrics.port === hostPort.port && metrics.port !== 0) {
    problems.push(`server.metrics_listen: must not share listen's port ${hostPort.port}; metrics are never served on the public listener`);
  }

  const connections = readConnections(str, problems);

  if (!hostPort) return null;
  return {
    host: hostPort.host, port: hostPort.port, baseUrl, secure, database, databaseToken, trustedProxies, allowedOrigins,
    auditRetentionSeconds: auditRetentionSeconds ?? 0, logLevel: logLevel as LogLevel, workers: Number.isNaN(workers) ? 1 : workers,
    metrics, connections,
  };
}

function readConnections(str: (key: string, fallback: string) => string, problems: string[]): ConnectionsConfig {
  const count = (key: string, fallback: string, max: number): number => {
    const text = str(key, fallback);
    const n = /^[1-9][0-9]{0,6}$/.test(text) ? Number(text) : NaN;
    if (!(n <= max)) problems.push(`server.${key}: "${text}" is not a whole number from 1 to ${max}`);
    return Number.isNaN(n) || n > max ? Number(fallback) : n;
  };
  const deadline = (key: string, fallback: string): number => {
    const text = str(key, fallback);
    const seconds = parseDuration(text);
    if (seconds === null) problems.push(`server.${key}: "${text}" is not a duration; ${DURATION_HINT}`);
    else if (seconds > REQUEST_TIMEOUT_SECONDS) problems.push(`server.${key}: "${text}" is longer than a whole request may take (${REQUEST_TIMEOUT_SECONDS}s)`);
    return (seconds !== null && seconds <= REQUEST_TIMEOUT_SECONDS ? seconds : parseDuration(fallback)!) * 1000;
  };
  const max = count('max_connections', '1000', 100_000);
  // Ten percent of the limit when not given, at most 100, so a smaller max_connections needs no second line.
  const perAddress = count('max_connections_per_address', String(Math.max(1, Math.min(100, Math.floor(max / 10)))), 100_000);
  if (perAddress > max) problems.push(`server.max_connections_per_address: ${perAddress} is more than max_connections (${max}); one address would need no share`);
  return { max, perAddress, headersTimeoutMs: deadline('header_timeout', '10s'), bodyIdleMs: deadline('body_idle_timeout', '10s') };
}

export function parseHostPort(text: string): { host: string; port: number } | null {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  if (!m) return null;
  const port = Number(m[3]);
  if (port > 65535) return null;
  const host = m[1] ?? m[2]!;
  if (m[1] !== undefined && isIP(host) !== 6) return null;
  return { host, port };
}

/** One subtree of [auth], its keys checked against the spec and its values by kind. */
class Section {
  readonly values = new Map<string, TreeNode>();
  constructor(
    readonly name: string,
    readonly node: TreeNode | undefined,
    private readonly problems: string[],
  ) {}
  get present(): boolean {
    return this.node !== undefined;
  }
  raw(key: string): string {
    return this.values.get(key)?.value ?? '';
  }
  path(key: string): string {
    return `auth.${this.name}.${key}`;
  }
  bool(key: string, fallback = false): boolean {
    const node = this.values.get(key);
    if (!node) return fallback;
    if (node.value === 'true') return true;
    if (node.value !== 'false') this.problems.push(`${this.path(key)}: "${node.value}" is not true or false`);
    return false;
  }
  /** A duration in seconds, or `fallback` when the key is absent. */
  duration(key: string, fallback: number): number {
    const text = this.raw(key);
    if (text === '') return fallback;
    const seconds = parseDuration(text);
    if (seconds === null) this.problems.push(`${this.path(key)}: "${text}" is not a duration; ${DURATION_HINT}`);
    return seconds ?? fallback;
  }
  labels(key: string): LabelSet {
    try {
      return parseLabels(this.raw(key));
    } catch (e) {
      if (!(e instanceof LabelError)) throw e;
      this.problems.push(`${this.path(key)}: ${e.message}`);
      return [];
    }
  }
  /** A value that must be present when `why` applies; returns '' when missing (a problem is recorded). */
  required(key: string, why: string): string {
    const value = this.raw(key);
    if (value === '') this.problems.push(`${this.path(key)}: required when ${why}`);
    return value;
  }
}

function readAuth(lines: Lines, env: Env, options: LoadOptions, server: { secure: boolean; baseUrl: string } | null, problems: string[]): Config['auth'] | null {
  const secure = server?.secure ?? false;
  const baseUrl = server?.baseUrl ?? '';
  const tree = parseTree(lines);
  for (const p of tree.problems) problems.push(`auth: line ${p.line}: ${p.message}`);

  const sections = new Map<string, Section>();
  for (const node of tree.roots) {
    const spec = AUTH_SPEC[node.key];
    if (!spec) {
      problems.push(`auth.${node.key}: unknown key (line ${node.line}); [auth] takes ${Object.keys(AUTH_SPEC).join(', ')}`);
      continue;
    }
    if (sections.has(node.key)) {
      problems.push(`auth.${node.key}: given twice (lines ${sections.get(node.key)!.node!.line} and ${node.line})`);
      continue;
    }
    if (node.value !== '') {
      problems.push(`auth.${node.key}: takes no value (line ${node.line}); put its settings on indented lines below it`);
    }
    const section = new Section(node.key, node, problems);
    sections.set(node.key, section);
    for (const child of node.children) {
      const kind = spec[child.key];
      const path = `auth.${node.key}.${child.key}`;
      if (!kind) {
        problems.push(`${path}: unknown key (line ${child.line}); ${node.key} takes ${Object.keys(spec).join(', ')}`);
      } else if (section.values.has(child.key)) {
        problems.push(`${path}: given twice (lines ${section.values.get(child.key)!.line} and ${child.line})`);
      } else if (kind === 'map' || kind === 'block') {
        const what = kind === 'map' ? 'one mapping a line' : 'its settings on indented lines';
        if (child.value !== '') problems.push(`${path}: takes no value (line ${child.line}); put ${what} below it`);
        section.values.set(child.key, child);
      } else if (child.children.length > 0) {
        problems.push(`${path}: takes a value, not indented lines below it (line ${child.line})`);
      } else {
        section.values.set(child.key, child);
      }
    }
  }
  const get = (name: string) => sections.get(name) ?? new Section(name, undefined, problems);

  const local = get('local').bool('enabled');
  const token = get('token').bool('enabled');
  const oidcSection = get('oidc');
  const headerSection = get('header');
  const groupsSection = get('groups');
  const oidcOn = oidcSection.bool('enabled');
  const headerOn = headerSection.bool('enabled');
  const groupsOn = groupsSection.bool('enabled');
  if (!local && !token && !oidcOn && !headerOn) {
    problems.push('auth: no channel is enabled; enable at least one of local, oidc, header, token with "enabled true"');
  }

  const secretFrom = (section: Section, key: string, why: string): string | null => {
    const name = section.required(key, why);
    if (name === '') return null;
    if (options.mode === 'data') {
      if (!ENV_NAME.test(name)) problems.push(`${section.path(key)}: "${name}" is not an environment variable name`);
      return '';
    }
    return readEnv(section.path(key), name, env, problems);
  };

  // Session settings are checked whenever a channel that logs people in by cookie is on.
  let session: SessionConfig | null = null;
  const sessionSection = get('session');
  if (local || oidcOn) {
    const why = 'local or oidc is enabled';
    const cookieName = sessionSection.required('cookie_name', why);
    if (cookieName !== '' && !/^[A-Za-z0-9_-]{1,64}$/.test(cookieName)) {
      problems.push(`${sessionSection.path('cookie_name')}: "${cookieName}" is not a cookie name (letters, digits, _ and -)`);
    }
    const ttlText = sessionSection.required('ttl', why);
    const ttlSeconds = ttlText === '' ? null : parseDuration(ttlText);
    if (ttlText !== '' && ttlSeconds === null) problems.push(`${sessionSection.path('ttl')}: "${ttlText}" is not a duration; ${DURATION_HINT}`);
    const secret = secretFrom(sessionSection, 'secret_env', why);
    if (secret !== null && options.mode === 'serve' && Buffer.byteLength(secret) < MIN_SECRET_BYTES) {
      problems.push(
        `${sessionSection.path('secret_env')}: the secret in ${sessionSection.raw('secret_env')} is ${Buffer.byteLength(secret)} bytes; it must be at least ${MIN_SECRET_BYTES} (try: openssl rand -base64 48)`,
      );
    }
    // Over https the prefixes make browsers refuse a cookie set by a subdomain or over plain http.
    session = {
      cookieName: secure ? `__Host-${cookieName}` : cookieName,
      flowCookieName: secure ? `__Secure-${cookieName}_oidc` : `${cookieName}_oidc`,
      ttlSeconds: ttlSeconds ?? 0,
      secret: Buffer.from(secret ?? ''),
    };
  } else {
    checkOptionalDuration(sessionSection, 'ttl', problems);
  }

  let oidc: OidcConfig | null = null;
  if (oidcOn) {
    const why = 'oidc is enabled';
    const issuer = oidcSection.required('issuer', why);
    checkIssuer(oidcSection, issuer, problems);
    const clientId = oidcSection.required('client_id', why);
    const clientSecret = secretFrom(oidcSection, 'client_secret_env', why) ?? '';
    const redirectUrl = oidcSection.required('redirect_url', why);
    if (redirectUrl !== '') {
      if (!isHttpUrl(redirectUrl) || new URL(redirectUrl).pathname !== '/oidc/callback') {
        problems.push(`${oidcSection.path('redirect_url')}: "${redirectUrl}" must be an http(s) URL whose path is /oidc/callback`);
      }
    }
    oidc = {
      issuer, clientId, clientSecret, redirectUrl,
      jit: oidcSection.bool('jit'),
      defaultAcl: oidcSection.labels('default_acl'),
      uidClaim: oidcSection.raw('uid_claim') || 'preferred_username',
      subjectClaim: oidcSection.raw('subject_claim') || 'sub',
    };
  }

  let header: HeaderConfig | null = null;
  if (headerOn) {
    const why = 'header is enabled';
    const headerName = (key: string, required: boolean): string | null => {
      const value = required ? headerSection.required(key, why) : headerSection.raw(key);
      if (value !== '' && !HEADER_NAME.test(value)) {
        problems.push(`${headerSection.path(key)}: "${value}" is not a header name (letters, digits and -)`);
      }
      return value === '' ? null : value.toLowerCase();
    };
    const userHeader = headerName('user_header', true) ?? '';
    const emailHeader = headerName('email_header', true) ?? '';
    const nameHeader = headerName('name_header', false);
    const groupsHeader = headerName('groups_header', false);
    const secretHeader = headerName('secret_header', true) ?? '';
    const sharedSecret = secretFrom(headerSection, 'shared_secret_env', why);
    if (sharedSecret !== null && options.mode === 'serve' && Buffer.byteLength(sharedSecret) < 16) {
      problems.push(`${headerSection.path('shared_secret_env')}: the secret in ${headerSection.raw('shared_secret_env')} is too short; use at least 16 bytes (better 32)`);
    }
    const proxyText = headerSection.required('trusted_proxy', why);
    const trustedProxies = proxyText.split(/[\s,]+/).filter((p) => p !== '');
    for (const p of trustedProxies) {
      if (isIP(p) === 0) problems.push(`${headerSection.path('trusted_proxy')}: "${p}" is not an IP address`);
    }
    header = {
      userHeader, emailHeader, nameHeader, groupsHeader, secretHeader,
      sharedSecret: Buffer.from(sharedSecret ?? ''),
      trustedProxies: trustedProxies.map(normalizeIp),
      jit: headerSection.bool('jit'),
      defaultAcl: headerSection.labels('default_acl'),
    };
  }

  let groups: GroupsConfig | null = null;
  if (groupsOn) {
    const map = new Map<string, LabelSet>();
    const mapNode = groupsSection.values.get('map');
    for (const entry of mapNode?.children ?? []) {
      const path = `auth.groups.map.${entry.key}`;
      if (entry.children.length > 0) problems.push(`${path}: takes labels, not indented lines below it (line ${entry.line})`);
      if (map.has(entry.key)) problems.push(`${path}: given twice (line ${entry.line})`);
      try {
        const labels = parseLabels(entry.value);
        if (labels.length === 0) problems.push(`${path}: names no labels (line ${entry.line})`);
        map.set(entry.key, labels);
      } catch (e) {
        if (!(e instanceof LabelError)) throw e;
        problems.push(`${path}: ${e.message}`);
      }
    }
    if (map.size === 0) problems.push('auth.groups.map: required when groups is enabled: at least one "idp-group labels" line');
    groups = { claim: groupsSection.raw('claim') || 'groups', map };
  }

  let oauth: OauthConfig | null = null;
  const oauthSection = get('oauth');
  const enterpriseSection = block(oauthSection, 'enterprise', problems);
  if (enterpriseSection && !oauthSection.bool('enabled')) {
    problems.push('auth.oauth.enterprise: takes effect only with oauth enabled; add "enabled true" under oauth, or remove the block');
  }
  if (oauthSection.bool('enabled')) {
    // People grant access on a page after signing in, so one sign-in channel must be on.
    if (!local && !oidcOn && !headerOn) {
      problems.push('auth.oauth: needs a way for people to sign in and consent: enable local, oidc or header');
    }
    oauth = {
      accessTtlSeconds: oauthSection.duration('access_ttl', 3600),
      refreshTtlSeconds: oauthSection.duration('refresh_ttl', 30 * 86400),
      refreshGraceSeconds: oauthSection.duration('refresh_grace', 60),
      dynamicRegistration: oauthSection.bool('dynamic_registration', true),
      clientMetadataDocuments: oauthSection.bool('client_metadata_documents', true),
      advertiseOnMcp: oauthSection.bool('advertise_on_mcp'),
      clientMetadataAllowPrivate: oauthSection.bool('client_metadata_allow_private'),
      enterprise: enterpriseSection ? readEnterprise(enterpriseSection, baseUrl, oidc, problems) : null,
    };
  }

  return { session, local, oidc, header, token, groups, oauth };
}

/** A nested block (kind 'block') of a section, its keys checked against BLOCK_SPEC; null when absent. */
function block(parent: Section, key: string, problems: string[]): Section | null {
  const node = parent.values.get(key);
  if (!node) return null;
  const name = `${parent.name}.${key}`;
  const spec = BLOCK_SPEC[name]!;
  const section = new Section(name, node, problems);
  for (const child of node.children) {
    const path = section.path(child.key);
    if (!spec[child.key]) problems.push(`${path}: unknown key (line ${child.line}); ${key} takes ${Object.keys(spec).join(', ')}`);
    else if (section.values.has(child.key)) problems.push(`${path}: given twice (lines ${section.values.get(child.key)!.line} and ${child.line})`);
    else if (child.children.length > 0) problems.push(`${path}: takes a value, not indented lines below it (line ${child.line})`);
    else section.values.set(child.key, child);
  }
  return section;
}

/** An identity provider's issuer: https, or plain http on loopback only (tests and local development). */
function checkIssuer(section: Section, issuer: string, problems: string[]): void {
  if (issuer === '') return;
  if (!isHttpUrl(issuer)) problems.push(`${section.path('issuer')}: "${issuer}" is not an http(s) URL`);
  else if (new URL(issuer).protocol === 'http:' && !isLoopbackIssuerHost(new URL(issuer).hostname)) {
    problems.push(`${section.path('issuer')}: must be https:// (plain http is allowed only for a provider on loopback)`);
  }
}

function readEnterprise(section: Section, baseUrl: string, oidc: OidcConfig | null, problems: string[]): EnterpriseConfig {
  const issuer = section.required('issuer', 'oauth enterprise is configured');
  checkIssuer(section, issuer, problems);
  const audience = section.raw('audience');
  if (audience !== '' && !isHttpUrl(audience)) problems.push(`${section.path('audience')}: "${audience}" is not an http(s) URL`);
  return {
    issuer,
    audience: audience || baseUrl,
    jit: section.bool('jit'),
    defaultAcl: section.labels('default_acl'),
    subjectClaim: section.raw('subject_claim') || 'sub',
    // The same provider vouches for a uid by the same claim in both ways in: an operator who moved oidc off a
    // claim its users can edit must not find that claim trusted again here.
    uidClaim: section.raw('uid_claim') || (oidc?.issuer === issuer ? oidc.uidClaim : 'preferred_username'),
  };
}

function checkOptionalDuration(section: Section, key: string, problems: string[]): void {
  const text = section.raw(key);
  if (text !== '' && parseDuration(text) === null) problems.push(`${section.path(key)}: "${text}" is not a duration; ${DURATION_HINT}`);
}

function isHttpUrl(text: string): boolean {
  try {
    const u = new URL(text);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value) && !Buffer.isBuffer(value)) {
    Object.freeze(value);
    for (const v of value instanceof Map ? value.values() : Object.values(value)) deepFreeze(v);
  }
  return value;
}
