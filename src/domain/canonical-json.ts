// One JSON text per value: object keys sorted at every depth, no spaces. What a fingerprint is taken over, so two
// definitions that differ only in key order or spacing have the same fingerprint. Written without recursion: a
// caller's arguments may nest as deep as a request body allows, and their hash must never fail (an upstream call
// is audited with it).
import { createHash } from 'node:crypto';

/** What is left to write: a piece of text, or a value. */
type Part = { readonly text: string } | { readonly value: unknown };

export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  const todo: Part[] = [{ value }];
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    if ('text' in next) {
      out.push(next.text);
      continue;
    }
    const v = next.value;
    const parts: Part[] = [];
    if (Array.isArray(v)) {
      parts.push({ text: '[' });
      for (let i = 0; i < v.length; i++) {
        if (i > 0) parts.push({ text: ',' });
        parts.push({ value: v[i] === undefined ? null : v[i] });
      }
      parts.push({ text: ']' });
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v as Record<string, unknown>)
        .filter(([, x]) => x !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      parts.push({ text: '{' });
      for (const [i, [k, x]] of entries.entries()) parts.push({ text: `${i > 0 ? ',' : ''}${JSON.stringify(k)}:` }, { value: x });
      parts.push({ text: '}' });
    } else {
      out.push(JSON.stringify(v) ?? 'null');
      continue;
    }
    for (let i = parts.length - 1; i >= 0; i--) todo.push(parts[i]!);
  }
  return out.join('');
}

/** The SHA-256 (hex) of a text. */
/** Whether a JSON value is an object (not null, not an array): what svc reads keys of in a peer's message. */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The SHA-256 (hex) of a value's canonical JSON. */
export function fingerprint(value: unknown): string {
  return sha256(canonicalJson(value));
}

/**
 * How deep a value nests (a scalar is 0, `[]` and `{}` are 1), counted without recursion and no further than `max` + 1:
 * enough to tell a value that nests deeper than `max`, however deep it goes.
 */
export function nestingDepth(value: unknown, max: number): number {
  let deepest = 0;
  const todo: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    const v = next.value;
    if (v === null || typeof v !== 'object') continue;
    const depth = next.depth + 1;
    if (depth > deepest) deepest = depth;
    if (deepest > max) return deepest;
    for (const x of Array.isArray(v) ? v : Object.values(v as Record<string, unknown>))
      if (x !== null && typeof x === 'object') todo.push({ value: x, depth });
  }
  return deepest;
}
