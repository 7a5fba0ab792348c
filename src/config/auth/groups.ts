// auth.groups: labels granted for the groups an identity provider or proxy names.
import { parseLabels, LabelError, type LabelSet } from '../../domain/labels.ts';
import type { Section, Spec } from './section.ts';
import type { GroupsConfig } from '../types.ts';

export const GROUPS_KEYS: Spec = { enabled: 'bool', claim: 'text', map: 'map' };

/** Called only when groups is enabled. */
export function readGroups(section: Section, problems: string[]): GroupsConfig {
  const map = new Map<string, LabelSet>();
  for (const entry of section.values.get('map')?.children ?? []) {
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
  return { claim: section.raw('claim') || 'groups', map };
}
