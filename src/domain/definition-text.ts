// What agents are told must be what a person could read (CONTRACT §6.1): an upstream's definition (of a tool, and
// later of a prompt or an app) with a character a reader cannot see for what it is is never offered and cannot be
// approved as it is. The rule is applied where a definition is read from an upstream, once; pages, the admin API and
// the command line show each such character as a visible escape (`U+202E`).
//
// Held: control characters (C0 and C1; a description may keep tab and newline), format characters (Unicode
// category Cf: zero-width characters, bidi embeddings, overrides and isolates, word joiners and invisible operators,
// the byte-order mark, tag characters U+E0000–U+E007F, the soft hyphen), lone surrogates, which no text shows, and
// what else renders as nothing or as a blank: every default-ignorable code point (Hangul fillers, the combining
// grapheme joiner, Mongolian and Khmer invisible marks, variation selectors), unassigned and private-use code points
// (a font may draw nothing for them), and the line and paragraph separators. A variation selector is kept when it
// directly follows a character that shows (the emoji of ⚠️ needs one); a second in a row, or one after nothing that
// shows, is held: a run of them after one letter carries a whole text, a byte each, that no reader sees.

import { canonicalJson, nestingDepth } from './canonical-json.ts';

/** Characters a reader could not see for what they are, as a character class (for the `v` flag). */
export const UNSEEN = '[\\p{Cc}\\p{Cf}\\p{Cs}\\p{Cn}\\p{Co}\\p{Default_Ignorable_Code_Point}\\u2028\\u2029]';
const SELECTOR = '[\\uFE00-\\uFE0F\\u{E0100}-\\u{E01EF}]';
/** One such character, anywhere in a string: a variation selector only where no character that shows comes before it. */
const HIDDEN_SOURCE = `[${UNSEEN}--${SELECTOR}]|(?<=^|${UNSEEN})${SELECTOR}`;
const HIDDEN = new RegExp(HIDDEN_SOURCE, 'v');
const HIDDEN_ALL = new RegExp(HIDDEN_SOURCE, 'gv');
/** Tab and newline, which a description may hold. */
const DESCRIPTION_BREAKS = /[\t\n]/g;

/** A definition larger than this (its JSON, in UTF-8 bytes) is never offered. */
export const DEFINITION_MAX_BYTES = 16 * 1024;

/** A character as a person reads its escape: U+202E. */
export const escapeOf = (char: string) => `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/** The text with each hidden character written as its escape. */
export function escapeHidden(text: string): string {
  return text.replace(HIDDEN_ALL, escapeOf);
}

/**
 * The text cut into plain runs and hidden characters, for a page that marks each escape. `lines`: the text is JSON
 * written across lines, whose newlines are its own (JSON escapes every control character inside a string).
 */
export function splitHidden(text: string, lines = false): ({ readonly text: string } | { readonly hidden: string })[] {
  const parts: ({ text: string } | { hidden: string })[] = [];
  let at = 0;
  for (const m of text.matchAll(HIDDEN_ALL)) {
    if (lines && m[0] === '\n') continue;
    if (m.index > at) parts.push({ text: text.slice(at, m.index) });
    parts.push({ hidden: escapeOf(m[0]) });
    at = m.index + m[0].length;
  }
  if (at < text.length) parts.push({ text: text.slice(at) });
  return parts;
}

/** Where a string sits in a definition (`description`, `inputSchema.properties.q.description`), escaped itself. */
function pathText(path: readonly (string | number)[]): string {
  return path.map((p) => (typeof p === 'number' ? `[${p}]` : escapeHidden(p))).join('.') || '(the value itself)';
}

/** The hidden characters of one string, as escapes, at most a few of them named. */
function hiddenIn(text: string, isDescription: boolean): string[] {
  const checked = isDescription ? text.replace(DESCRIPTION_BREAKS, '') : text;
  if (!HIDDEN.test(checked)) return [];
  return [...checked.matchAll(HIDDEN_ALL)].map((m) => escapeOf(m[0]));
}

const NAMED_PER_PLACE = 6;
const PLACES_NAMED = 8;

/**
 * Every place in a value (its keys and string values, at any depth) that holds a hidden character, each said as
 * `PATH: U+202E U+200B` (at most a few places and characters named, with how many more). Walked without recursion:
 * an upstream decides how deep its definition nests.
 */
export function hiddenCharacters(value: unknown): string[] {
  const found: string[] = [];
  let places = 0;
  const note = (path: readonly (string | number)[], escapes: string[]) => {
    places++;
    if (found.length >= PLACES_NAMED) return;
    const named = [...new Set(escapes)];
    const more = named.length > NAMED_PER_PLACE ? ` and ${named.length - NAMED_PER_PLACE} more` : '';
    found.push(`${pathText(path)}: ${named.slice(0, NAMED_PER_PLACE).join(' ')}${more}`);
  };
  const todo: { value: unknown; path: (string | number)[] }[] = [{ value, path: [] }];
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    const { value: v, path } = next;
    if (typeof v === 'string') {
      const escapes = hiddenIn(v, path[path.length - 1] === 'description');
      if (escapes.length > 0) note(path, escapes);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) todo.push({ value: v[i], path: [...path, i] });
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, x] = entries[i]!;
        const keyEscapes = hiddenIn(key, false);
        if (keyEscapes.length > 0) note([...path, key], keyEscapes);
        todo.push({ value: x, path: [...path, key] });
      }
    }
  }
  if (places > found.length) found.push(`and ${places - found.length} more places`);
  return found;
}

/** A definition nested deeper than this is never offered (an agent's client could not read it back). */
export const DEFINITION_MAX_DEPTH = 64;

/** A definition's size as the rule reads it: its canonical JSON's UTF-8 bytes, and how deep it nests. */
export function definitionSize(definition: unknown): { bytes: number; depth: number } {
  return { bytes: Buffer.byteLength(canonicalJson(definition)), depth: nestingDepth(definition, DEFINITION_MAX_DEPTH) };
}

/**
 * Why a definition an upstream listed is held, from itself alone: hidden characters anywhere in what it listed (its
 * name included), a name made only of dots, a definition over DEFINITION_MAX_BYTES or nested deeper than
 * DEFINITION_MAX_DEPTH, a tool that requires task-based calls. Empty when nothing holds it.
 */
export function heldReasons(listed: { readonly name: string }, size: { readonly bytes: number; readonly depth: number }): string[] {
  const reasons: string[] = [];
  if (/^\.+$/.test(listed.name)) reasons.push('its name is made only of dots');
  const hidden = hiddenCharacters(listed);
  if (hidden.length > 0) reasons.push(`it holds characters a reader cannot see: ${hidden.join('; ')}`);
  if (size.bytes > DEFINITION_MAX_BYTES)
    reasons.push(`its definition is ${Math.ceil(size.bytes / 1024)} KiB, over ${DEFINITION_MAX_BYTES / 1024} KiB`);
  if (size.depth > DEFINITION_MAX_DEPTH) reasons.push(`its definition nests deeper than ${DEFINITION_MAX_DEPTH} levels`);
  // A tool that can only be called as a task cannot be called through svc until svc relays tasks.
  if ((listed as { readonly execution?: { readonly taskSupport?: unknown } }).execution?.taskSupport === 'required')
    reasons.push('it requires task-based calls, which svc does not relay yet');
  return reasons;
}
