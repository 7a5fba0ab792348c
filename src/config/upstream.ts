// [upstream NAME]: an MCP server svc guards (CONTRACT §6.1). A Streamable HTTP endpoint (`url`) or a stdio server
// svc starts (`command`), with the labels of its tools, how new tools are reviewed, the one credential svc sends it
// and how long a call may take. Every problem names its key.
import { createHash } from 'node:crypto';
import { normalize } from 'node:path';
import { readDuration } from './duration.ts';
import { readIniSection, readEnv, ENV_NAME, type Env, type Lines } from './ini-section.ts';
import { isLoopbackIssuerHost } from '../domain/addresses.ts';
import { LabelError, parseLabels, type LabelSet } from '../domain/labels.ts';

export type UpstreamTransport =
  | { readonly kind: 'http'; readonly url: string }
  | {
      readonly kind: 'stdio';
      readonly command: string;
      readonly args: readonly string[];
      /** the child's environment besides PATH and HOME: only these */
      readonly env: Readonly<Record<string, string>>;
      /** shared: one process; user: one per person who calls it */
      readonly isolation: 'shared' | 'user';
      /** absolute paths the child may write; the rest of the filesystem it sees read-only */
      readonly writable: readonly string[];
    };

/**
 * Which protocol era svc's client speaks to an upstream: auto (the newest both support: a `server/discover` probe at
 * 2026-07-28, else the 2025 `initialize` handshake), 2025 (the `initialize` handshake only) or 2026-07-28 (that
 * revision only, no fallback).
 */
export const UPSTREAM_PROTOCOLS = ['auto', '2025', '2026-07-28'] as const;
export type UpstreamProtocol = (typeof UPSTREAM_PROTOCOLS)[number];

/** What an upstream offers that may pass through svc (CONTRACT §6.3); `expose` names them, all three by default. */
export const UPSTREAM_KINDS = ['tools', 'prompts', 'resources'] as const;
export interface UpstreamExpose {
  readonly tools: boolean;
  readonly prompts: boolean;
  /** its resources, resource templates and apps (`ui://` resources) */
  readonly resources: boolean;
}

export interface UpstreamConfig {
  /** a-z 0-9 '-', 1 to 32 characters, starting with a letter: the prefix of its tools (NAME__TOOL) */
  readonly name: string;
  readonly transport: UpstreamTransport;
  /**
   * Which server this is: the SHA-256 of its url, or of its command and arguments. A tool row recorded for another
   * server of the same name is not usable, and its approval is not carried over.
   */
  readonly server: string;
  /** the labels of its tools that have none of their own; empty: unrestricted */
  readonly labels: LabelSet;
  /** admin: a new or changed tool waits for an admin; auto: a new one is approved as found (a changed one still waits) */
  readonly review: 'admin' | 'auto';
  /** only these tool names are ever discovered; null: all */
  readonly tools: readonly string[] | null;
  /** token_env's value, sent as Authorization: Bearer …; null when not set (or not read: the data commands) */
  readonly token: string | null;
  readonly identity: 'none' | 'jwt';
  /** the protocol era svc's client speaks to it (UPSTREAM_PROTOCOLS) */
  readonly protocol: UpstreamProtocol;
  /** which kinds of what it offers pass through; a kind left out is neither listed nor passed on */
  readonly expose: UpstreamExpose;
  readonly timeoutMs: number;
  readonly refreshMs: number;
  /** calls per person to this upstream, per `perSeconds`; null: no limit */
  readonly rate: { readonly calls: number; readonly perSeconds: number } | null;
  /** auth = oauth (§6.2): each person connects their own account, and their calls carry their own token; null: none */
  readonly oauth: UpstreamOauth | null;
}

/** How svc is a client of an `auth = oauth` upstream's authorization server. */
export interface UpstreamOauth {
  /** a client registered there; null: svc registers itself (client metadata document where offered, else DCR) */
  readonly clientId: string | null;
  /** oauth_client_secret_env's value; null: a public client, or not read (the data commands) */
  readonly clientSecret: string | null;
  /** scopes to ask for; empty: none named */
  readonly scopes: readonly string[];
  /**
   * oauth_private_network: the authorization server of an upstream that is not on loopback may be at a loopback,
   * private, link-local or other non-internet address (false: svc sends nothing there)
   */
  readonly privateNetwork: boolean;
}

export const UPSTREAM_NAME = /^[a-z][a-z0-9-]{0,31}$/;
export const UPSTREAM_NAME_HINT = "a-z 0-9 '-', 1 to 32 characters, starting with a letter";
const KEYS = [
  'url',
  'command',
  'labels',
  'review',
  'tools',
  'token_env',
  'identity',
  'timeout',
  'refresh',
  'rate',
  'isolation',
  'writable',
  'insecure_http',
  'auth',
  'oauth_client_id',
  'oauth_client_secret_env',
  'oauth_scopes',
  'oauth_private_network',
  'protocol',
  'expose',
];
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const RATE_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600 };

/** One `[upstream NAME]` section; `readSecret` reads token_env's value (svc serve and svc check). */
export function readUpstream(name: string, lines: Lines, env: Env, readSecret: boolean, problems: string[]): UpstreamConfig | null {
  const path = `upstream.${name}`;
  if (!UPSTREAM_NAME.test(name)) {
    problems.push(`[upstream ${name}]: "${name.slice(0, 40)}" is not an upstream name: ${UPSTREAM_NAME_HINT}`);
    return null;
  }
  const section = readIniSection(path, lines, KEYS, problems, { header: `[upstream ${name}]`, prefixes: ['env.'] });
  const childEnv = readChildEnv(path, section, problems);
  const transport = readTransport(path, section, childEnv, problems);
  const before = problems.length;
  const upstream: UpstreamConfig = {
    name,
    transport: transport ?? { kind: 'http', url: '' },
    server: serverOf(transport),
    labels: readLabels(path, section.str('labels', ''), problems),
    review: oneOf(path, 'review', section.str('review', 'admin'), ['admin', 'auto'], problems),
    tools: readTools(path, section.str('tools', ''), problems),
    token: readToken(path, section.str('token_env', ''), env, readSecret, problems),
    identity: oneOf(path, 'identity', section.str('identity', 'none'), ['none', 'jwt'], problems),
    protocol: oneOf(path, 'protocol', section.str('protocol', 'auto'), UPSTREAM_PROTOCOLS, problems),
    expose: readExpose(path, section.str('expose', UPSTREAM_KINDS.join(' ')), problems),
    timeoutMs: seconds(path, 'timeout', section.str('timeout', '30s'), problems) * 1000,
    refreshMs: seconds(path, 'refresh', section.str('refresh', '5m'), problems) * 1000,
    rate: readRate(path, section.str('rate', ''), problems),
    oauth: readOauth(path, section, transport, env, readSecret, problems),
  };
  return transport === null || problems.length > before ? null : upstream;
}

type Section = ReturnType<typeof readIniSection>;

function serverOf(transport: UpstreamTransport | null): string {
  const what =
    transport === null ? [] : transport.kind === 'http' ? ['url', transport.url] : ['command', transport.command, ...transport.args];
  return createHash('sha256').update(JSON.stringify(what)).digest('hex');
}

function readTransport(path: string, section: Section, env: Record<string, string>, problems: string[]): UpstreamTransport | null {
  const url = section.str('url', '');
  // Read as written: `ini` would cut a command at `;` or `#` and unquote it its own way.
  const command = section.verbatim('command') ?? '';
  const isolation = section.str('isolation', '');
  const writable = section.verbatim('writable') ?? '';
  const insecure = section.bool('insecure_http', false);
  if ((url === '') === (command === '')) {
    problems.push(`${path}: give exactly one of url (a Streamable HTTP MCP endpoint) and command (a stdio server svc starts)`);
    return null;
  }
  if (url !== '') {
    if (isolation !== '') problems.push(`${path}.isolation: only for a command upstream; an HTTP upstream is one server for everyone`);
    if (Object.keys(env).length > 0) problems.push(`${path}.env.*: only for a command upstream; svc does not start an HTTP upstream`);
    if (writable !== '') problems.push(`${path}.writable: only for a command upstream; svc does not start an HTTP upstream`);
    const checked = checkUrl(path, url, insecure, problems);
    return checked === null ? null : { kind: 'http', url: checked };
  }
  if (insecure) problems.push(`${path}.insecure_http: only for a url upstream`);
  const words = splitCommand(command);
  if (words === null || words.length === 0) {
    problems.push(`${path}.command: an unclosed quote; quote an argument with spaces in "…" or '…'`);
    return null;
  }
  const chosen = oneOf(path, 'isolation', isolation === '' ? 'shared' : isolation, ['shared', 'user'], problems);
  const paths = readWritable(path, writable, problems);
  return { kind: 'stdio', command: words[0]!, args: words.slice(1), env, isolation: chosen, writable: paths };
}

/** writable: absolute paths, split like `command`; the child sees everything else read-only. */
function readWritable(path: string, text: string, problems: string[]): string[] {
  const words = splitCommand(text);
  if (words === null) {
    problems.push(`${path}.writable: an unclosed quote; quote a path with spaces in "…" or '…'`);
    return [];
  }
  const relative = words.find((w) => !w.startsWith('/'));
  if (relative !== undefined) problems.push(`${path}.writable: "${relative.slice(0, 80)}" is not an absolute path`);
  return [...new Set(words.map((w) => normalize(w).replace(/(.)\/$/, '$1')))];
}

function checkUrl(path: string, text: string, insecure: boolean, problems: string[]): string | null {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    problems.push(
      `${path}.url: "${text.slice(0, 80)}" is not a URL; give the upstream's MCP endpoint, such as https://tracker.internal/mcp`,
    );
    return null;
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') {
    problems.push(`${path}.url: ${u.protocol} is not http: or https:`);
    return null;
  }
  if (u.username !== '' || u.password !== '' || u.hash !== '') {
    problems.push(`${path}.url: no user, password or #fragment in the URL; give a credential with token_env`);
    return null;
  }
  if (u.protocol === 'http:' && !insecure && !isLoopbackIssuerHost(u.hostname)) {
    problems.push(
      `${path}.url: plain http to another machine sends every call and its credential in clear text; use https://, or set insecure_http = true for a network you trust`,
    );
    return null;
  }
  return u.href;
}

/** `env.NAME = value` keys: the stdio child's environment. */
function readChildEnv(path: string, section: Section, problems: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of section.prefixed('env.')) {
    if (!ENV_NAME.test(key)) problems.push(`${path}.env.${key.slice(0, 40)}: not an environment variable name`);
    else if (typeof value !== 'string') problems.push(`${path}.env.${key}: expected a single value`);
    else env[key] = unquoted(section.verbatim(`env.${key}`) ?? value.trim());
  }
  return env;
}

/** A value wrapped whole in "…" or '…' without them (to keep a `;` or `#` after a space in it); else as it is. */
function unquoted(text: string): string {
  const q = text[0];
  return text.length >= 2 && (q === '"' || q === "'") && text.endsWith(q) && !text.slice(1, -1).includes(q) ? text.slice(1, -1) : text;
}

/** Splits a command line into words as a shell would for plain words and '…' or "…" quotes; no expansion. */
export function splitCommand(text: string): string[] | null {
  const words: string[] = [];
  let word: string | null = null;
  let quote: '"' | "'" | null = null;
  for (const ch of text) {
    if (quote !== null) {
      if (ch === quote) quote = null;
      else word += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      word ??= '';
    } else if (/\s/.test(ch)) {
      if (word !== null) words.push(word);
      word = null;
    } else word = (word ?? '') + ch;
  }
  if (quote !== null) return null;
  if (word !== null) words.push(word);
  return words;
}

function readLabels(path: string, text: string, problems: string[]): LabelSet {
  try {
    return parseLabels(text);
  } catch (e) {
    if (!(e instanceof LabelError)) throw e;
    problems.push(`${path}.labels: ${e.message}`);
    return [];
  }
}

function readTools(path: string, text: string, problems: string[]): readonly string[] | null {
  if (text === '') return null;
  const names = text.split(/[\s,]+/).filter((n) => n !== '');
  const bad = names.find((n) => !TOOL_NAME.test(n));
  if (bad !== undefined) problems.push(`${path}.tools: "${bad.slice(0, 40)}" is not a tool name (A-Z a-z 0-9 _ - ., at most 128)`);
  return [...new Set(names)];
}

/** expose: kinds separated by spaces or commas, as `tools`; at least one, since an upstream passing nothing is no upstream. */
function readExpose(path: string, text: string, problems: string[]): UpstreamExpose {
  const words = text.split(/[\s,]+/).filter((w) => w !== '');
  const kinds: readonly string[] = UPSTREAM_KINDS;
  const unknown = words.find((w) => !kinds.includes(w));
  if (unknown !== undefined) problems.push(`${path}.expose: "${unknown.slice(0, 40)}" is not one of ${UPSTREAM_KINDS.join(', ')}`);
  else if (words.length === 0)
    problems.push(`${path}.expose: name at least one of ${UPSTREAM_KINDS.join(', ')}, or leave the key out for all three`);
  return { tools: words.includes('tools'), prompts: words.includes('prompts'), resources: words.includes('resources') };
}

/** auth and the oauth_* keys: only `auth = oauth` on a url upstream takes them, and then never token_env. */
function readOauth(
  path: string,
  section: Section,
  transport: UpstreamTransport | null,
  env: Env,
  readSecret: boolean,
  problems: string[],
): UpstreamOauth | null {
  const auth = oneOf(path, 'auth', section.str('auth', 'none'), ['none', 'oauth'], problems);
  const clientId = section.str('oauth_client_id', '');
  const secretEnv = section.str('oauth_client_secret_env', '');
  const scopes = section.str('oauth_scopes', '');
  const privateNetwork = section.bool('oauth_private_network', false);
  if (auth !== 'oauth') {
    if (privateNetwork) problems.push(`${path}.oauth_private_network: only with auth = oauth`);
    for (const [key, value] of [
      ['oauth_client_id', clientId],
      ['oauth_client_secret_env', secretEnv],
      ['oauth_scopes', scopes],
    ])
      if (value !== '') problems.push(`${path}.${key}: only with auth = oauth`);
    return null;
  }
  if (transport?.kind === 'stdio')
    problems.push(`${path}.auth: oauth is for a url upstream; svc cannot connect a person's account to a command`);
  if (section.str('token_env', '') !== '')
    problems.push(`${path}.token_env: not with auth = oauth; each person's own token is sent, never a service credential`);
  if (secretEnv !== '' && clientId === '') problems.push(`${path}.oauth_client_secret_env: give oauth_client_id with it`);
  if (clientId !== '' && !/^[\x21-\x7e]{1,255}$/.test(clientId))
    problems.push(`${path}.oauth_client_id: printable characters without spaces, at most 255`);
  const scopeList = scopes.split(/\s+/).filter((x) => x !== '');
  const badScope = scopeList.find((x) => !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(x));
  if (badScope !== undefined) problems.push(`${path}.oauth_scopes: "${badScope.slice(0, 40)}" is not an OAuth scope`);
  const clientSecret =
    secretEnv === ''
      ? null
      : readSecret
        ? readEnv(`${path}.oauth_client_secret_env`, secretEnv, env, problems)
        : checkEnvName(path, secretEnv, problems);
  return { clientId: clientId === '' ? null : clientId, clientSecret, scopes: [...new Set(scopeList)], privateNetwork };
}

function checkEnvName(path: string, name: string, problems: string[]): null {
  if (!ENV_NAME.test(name)) problems.push(`${path}.oauth_client_secret_env: "${name}" is not an environment variable name`);
  return null;
}

function readToken(path: string, name: string, env: Env, readSecret: boolean, problems: string[]): string | null {
  if (name === '') return null;
  if (!readSecret) {
    if (!ENV_NAME.test(name)) problems.push(`${path}.token_env: "${name}" is not an environment variable name`);
    return null;
  }
  return readEnv(`${path}.token_env`, name, env, problems);
}

function oneOf<T extends string>(path: string, key: string, value: string, allowed: readonly T[], problems: string[]): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  problems.push(`${path}.${key}: "${value.slice(0, 40)}" is not one of ${allowed.join(', ')}`);
  return allowed[0]!;
}

function seconds(path: string, key: string, text: string, problems: string[]): number {
  // A duration is a positive whole number of s, m, h or d; 1 stands in after a problem, which stops svc anyway.
  return readDuration(`${path}.${key}`, text, problems) ?? 1;
}

function readRate(path: string, text: string, problems: string[]): UpstreamConfig['rate'] {
  if (text === '') return null;
  const m = /^(\d{1,9})\s*\/\s*([smh])$/.exec(text);
  const calls = m ? Number(m[1]) : 0;
  if (!m || calls < 1) {
    problems.push(`${path}.rate: "${text.slice(0, 40)}" is not a rate; give calls per second, minute or hour, such as 120/m`);
    return null;
  }
  return { calls, perSeconds: RATE_UNITS[m[2]!]! };
}
