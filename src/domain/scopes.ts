// What a bearer token may do (CONTRACT §5 "Scopes"): the scope names, their canonical stored form, and the rule
// that keeps `admin` to an admin's unrestricted token. Sessions and the header channel are not scoped.
import { badRequest } from './errors.ts';

export const SCOPES = ['mcp', 'api', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];
export type ScopeSet = readonly Scope[];

/** What each scope opens, in words for the token page, the CLI help and error messages. */
export const SCOPE_MEANING: Readonly<Record<Scope, string>> = {
  mcp: 'read documents through MCP (/mcp)',
  api: 'list and revoke your own tokens and connected apps',
  admin: 'the admin API (/admin/api): users and documents',
};

export const DEFAULT_SCOPES: ScopeSet = ['mcp'];

const isScope = (s: unknown): s is Scope => (SCOPES as readonly unknown[]).includes(s);

/** The canonical set: unique, in SCOPES order. */
function canonical(scopes: Iterable<Scope>): ScopeSet {
  const set = new Set(scopes);
  return SCOPES.filter((s) => set.has(s));
}

/**
 * Scopes from a request: a list or a comma/space separated string; omitted (undefined, null or an empty string)
 * means the default. An unknown scope is refused, never dropped: a token must not silently do less or more.
 */
export function parseScopes(input: unknown): ScopeSet {
  if (input === undefined || input === null || input === '') return DEFAULT_SCOPES;
  const parts = typeof input === 'string' ? input.split(/[\s,]+/).filter((p) => p !== '') : Array.isArray(input) ? input : null;
  if (parts === null) throw badRequest(`scopes: a list or a string of ${SCOPES.join(', ')}`, 'scopes');
  if (parts.length === 0) throw badRequest(`scopes: at least one of ${SCOPES.join(', ')}`, 'scopes');
  for (const p of parts) {
    if (!isScope(p))
      throw badRequest(`scopes: unknown scope ${JSON.stringify(String(p).slice(0, 40))}; known are ${SCOPES.join(', ')}`, 'scopes');
  }
  return canonical(parts as Scope[]);
}

/** `admin` only for a token of an admin, and only without a label restriction (the admin API sees everything). */
export function checkScopesFor(scopes: ScopeSet, owner: { admin: boolean }, restricted: boolean): void {
  if (!scopes.includes('admin')) return;
  if (!owner.admin) throw badRequest('scopes: admin is only for a token of an administrator', 'scopes');
  if (restricted)
    throw badRequest('scopes: a token with a label restriction cannot carry admin (the admin API sees every document)', 'scopes');
}

/** Stored form: space separated, canonical order. */
export function formatScopes(scopes: ScopeSet): string {
  return scopes.join(' ');
}

const stored = new Map<string, ScopeSet>();

/** Reads the stored form; the few distinct values are parsed once (this runs on every bearer request). */
export function storedScopes(text: string): ScopeSet {
  let set = stored.get(text);
  if (set === undefined) {
    set = Object.freeze(canonical(text.split(' ').filter(isScope)));
    if (stored.size < 64) stored.set(text, set);
  }
  return set;
}
