// Text that people read as a name (an app's client name, a person's display name from an identity provider): it must
// read as what it is. No bidirectional overrides or isolates, no invisible, control or C1 characters, no separators
// that break a line.

// Control and format characters (C0 and C1 controls, bidi overrides and isolates, zero-width joiners, BOM, soft
// hyphen), unassigned and private-use code points, line and paragraph separators, every space but U+0020, and the
// fillers and variation selectors that render as nothing.
const UNSEEN =
  // biome-ignore lint/suspicious/noMisleadingCharacterClass: each invisible or joining character is listed on purpose, to be refused alone
  /[\p{Cc}\p{Cf}\p{Cn}\p{Co}\p{Cs}\p{Zl}\p{Zp}\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u2800\u3164\uFE00-\uFE0F\uFFA0\u{E0100}-\u{E01EF}]/gu;
/** Spaces and breaks that a cleaned name keeps as a plain space. */
const SPACES = /[\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000\t\n\r]/gu;

/** A person's display name is at most this long. */
export const PERSON_NAME_MAX = 200;

/** Whether the text holds a character a reader could not see for what it is. */
export function hasUnseen(text: string): boolean {
  return new RegExp(UNSEEN.source, 'u').test(text);
}

/**
 * The text made fit to show: other spaces as plain ones, unseen characters dropped, at most `max` UTF-16 units, never
 * ending in half of a character outside the Basic Multilingual Plane (an emoji cut in two would be unseen itself).
 */
export function cleanDisplayText(text: string, max: number): string {
  let cut = text.replace(SPACES, ' ').replace(UNSEEN, '').replace(/ {2,}/g, ' ').trim().slice(0, max);
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return cut.trim();
}
