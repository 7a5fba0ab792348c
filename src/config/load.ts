// Reads svc.ini once, validates all of it, and returns one frozen Config. Every problem is collected, so an
// operator fixes the file in one pass; nothing in svc reads the environment after this.
import type { Env } from './ini-section.ts';
import { splitSections } from './sections.ts';
import { readServer } from './server.ts';
import { readAuth } from './auth/read.ts';
import { readNotify } from './notify.ts';
import { readUpstream, type UpstreamConfig } from './upstream.ts';
import type { Config, LoadOptions } from './types.ts';

export type {
  Config,
  ServerConfig,
  AuthConfig,
  LoadOptions,
  LogLevel,
  SessionConfig,
  OidcConfig,
  HeaderConfig,
  OauthConfig,
  EnterpriseConfig,
  ConnectionsConfig,
  GroupsConfig,
} from './types.ts';
export type { UpstreamConfig, UpstreamTransport } from './upstream.ts';
export { REQUEST_TIMEOUT_SECONDS } from './connections.ts';

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(problems.join('\n'));
  }
}

export function loadConfig(text: string, env: Env, options: LoadOptions): Config {
  const problems: string[] = [];
  const sections = splitSections(text, problems);
  const server = readServer(sections.get('server'), env, options.baseDir ?? process.cwd(), problems);
  const upstreams: UpstreamConfig[] = [];
  for (const [name, lines] of sections) {
    if (!name.startsWith('upstream ')) continue;
    const upstream = readUpstream(name.slice('upstream '.length), lines, env, options.mode === 'serve', problems);
    if (upstream) upstreams.push(upstream);
  }
  // The session secret seals the key that signs identity assertions, and a person's upstream tokens; a person
  // connects their account from a signed-in browser.
  const signing = upstreams.find((u) => u.identity === 'jwt');
  const connecting = upstreams.find((u) => u.oauth !== null);
  const auth = readAuth(
    sections.get('auth') ?? [],
    env,
    options,
    server,
    problems,
    signing ? `upstream.${signing.name}.identity is jwt` : connecting ? `upstream.${connecting.name}.auth is oauth` : null,
  );
  const notify = sections.has('notify') ? readNotify(sections.get('notify'), env, options.mode === 'serve', problems) : null;
  if (problems.length > 0) throw new ConfigError(problems.map((p) => `svc: config: ${p}`));
  return deepFreeze({ server: server!, auth, notify, upstreams });
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value) && !Buffer.isBuffer(value)) {
    Object.freeze(value);
    for (const v of value instanceof Map ? value.values() : Object.values(value)) deepFreeze(v);
  }
  return value;
}
