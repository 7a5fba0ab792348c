// [auth]: an indented tree of sub-sections, one per way in. The tree is checked against each sub-section's keys
// here; each sub-section's values are read by its own reader, in an order that keeps reported problems stable.
import { parseTree } from '../tree.ts';
import type { Env, Lines } from '../ini-section.ts';
import type { AuthConfig, LoadOptions, ServerConfig } from '../types.ts';
import { Section, type AuthContext, type Spec } from './section.ts';
import { SESSION_KEYS, readSession } from './session.ts';
import { LOCAL_KEYS, readLocal } from './local.ts';
import { OIDC_KEYS, readOidc } from './oidc.ts';
import { HEADER_KEYS, readHeader } from './header.ts';
import { TOKEN_KEYS, readToken } from './token.ts';
import { GROUPS_KEYS, readGroups } from './groups.ts';
import { OAUTH_KEYS, readOauth } from './oauth.ts';

/** The sub-sections of [auth], in the order error messages list them. */
const AUTH_SPEC: Readonly<Record<string, Spec>> = {
  session: SESSION_KEYS,
  local: LOCAL_KEYS,
  oidc: OIDC_KEYS,
  header: HEADER_KEYS,
  token: TOKEN_KEYS,
  groups: GROUPS_KEYS,
  oauth: OAUTH_KEYS,
};

/** `sessionFor` names what else needs the session secret (an upstream's identity = jwt), or null. */
export function readAuth(
  lines: Lines,
  env: Env,
  options: LoadOptions,
  server: ServerConfig | null,
  problems: string[],
  sessionFor: string | null = null,
): AuthConfig {
  const context: AuthContext = { env, mode: options.mode, problems };
  const sections = splitAuth(lines, problems);
  const get = (name: string) => sections.get(name) ?? new Section(name, undefined, problems);

  const local = readLocal(get('local'));
  const token = readToken(get('token'));
  const oidcOn = get('oidc').bool('enabled');
  const headerOn = get('header').bool('enabled');
  const groupsOn = get('groups').bool('enabled');
  if (!local && !token && !oidcOn && !headerOn) {
    problems.push('auth: no channel is enabled; enable at least one of local, oidc, header, token with "enabled true"');
  }

  const session = readSession(get('session'), local || oidcOn ? 'local or oidc is enabled' : sessionFor, server?.secure ?? false, context);
  const oidc = oidcOn ? readOidc(get('oidc'), context) : null;
  const header = headerOn ? readHeader(get('header'), context) : null;
  const groups = groupsOn ? readGroups(get('groups'), problems) : null;
  const oauth = readOauth(get('oauth'), { canSignIn: local || oidcOn || headerOn, baseUrl: server?.baseUrl ?? '', problems });
  // OAuth's access tokens are svc tokens: with the token channel off, every one it issued would be refused.
  if (oauth && !token) {
    problems.push(
      'auth.oauth.enabled: OAuth issues svc bearer tokens, which auth.token.enabled false refuses; enable token, or turn oauth off',
    );
  }
  return { session, local, oidc, header, token, groups, oauth };
}

/** The tree's top-level nodes as sections, each child checked against its sub-section's keys. */
function splitAuth(lines: Lines, problems: string[]): Map<string, Section> {
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
  return sections;
}
