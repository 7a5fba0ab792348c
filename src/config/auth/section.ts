// One subtree of [auth] (such as `oidc` or `oauth.enterprise`): its keys checked against the sub-section's spec,
// its values read by kind. Every reader under auth/ works on one of these.
import { parseLabels, LabelError, type LabelSet } from '../../domain/labels.ts';
import { readDuration } from '../duration.ts';
import { readEnv, ENV_NAME, type Env } from '../ini-section.ts';
import type { TreeNode } from '../tree.ts';
import type { LoadOptions } from '../types.ts';

export type Kind = 'bool' | 'text' | 'duration' | 'env' | 'labels' | 'header' | 'map' | 'block';
/** The keys of one sub-section and what each holds; their order is the order error messages list them in. */
export type Spec = Readonly<Record<string, Kind>>;
/** The keys of a nested block, which holds plain values only. */
export type BlockSpec = Readonly<Record<string, Exclude<Kind, 'map' | 'block'>>>;

/** What every reader of [auth] needs besides its own section. */
export interface AuthContext {
  readonly env: Env;
  readonly mode: LoadOptions['mode'];
  readonly problems: string[];
}

export class Section {
  readonly values = new Map<string, TreeNode>();
  constructor(
    readonly name: string,
    readonly node: TreeNode | undefined,
    private readonly problems: string[],
  ) {}
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
  /** A duration in seconds; `fallback` when the key is absent or not a duration (then a problem is recorded). */
  duration<T>(key: string, fallback: T): number | T {
    const text = this.raw(key);
    if (text === '') return fallback;
    return readDuration(this.path(key), text, this.problems) ?? fallback;
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

/**
 * The secret an `_env` key names, required when `why` applies; null when missing. In 'data' mode only the name is
 * checked and '' stands for the secret, which is never read.
 */
export function secretFrom(section: Section, key: string, why: string, context: AuthContext): string | null {
  const name = section.required(key, why);
  if (name === '') return null;
  if (context.mode === 'data') {
    if (!ENV_NAME.test(name)) context.problems.push(`${section.path(key)}: "${name}" is not an environment variable name`);
    return '';
  }
  return readEnv(section.path(key), name, context.env, context.problems);
}

/** A nested block (kind 'block') of a section, its keys checked against `spec`; null when absent. */
export function block(parent: Section, key: string, spec: BlockSpec, problems: string[]): Section | null {
  const node = parent.values.get(key);
  if (!node) return null;
  const section = new Section(`${parent.name}.${key}`, node, problems);
  for (const child of node.children) {
    const path = section.path(child.key);
    if (!spec[child.key]) problems.push(`${path}: unknown key (line ${child.line}); ${key} takes ${Object.keys(spec).join(', ')}`);
    else if (section.values.has(child.key))
      problems.push(`${path}: given twice (lines ${section.values.get(child.key)!.line} and ${child.line})`);
    else if (child.children.length > 0) problems.push(`${path}: takes a value, not indented lines below it (line ${child.line})`);
    else section.values.set(child.key, child);
  }
  return section;
}
