// Client names are an app's own claim, shown on the consent, token and admin pages and in mail. They must read as
// what they are: no bidirectional overrides or isolates, no invisible or control characters, and not svc itself.

// Control and format characters (bidi overrides and isolates, zero-width joiners, BOM, soft hyphen), unassigned and
// private-use code points, line and paragraph separators, every space but U+0020, and the fillers and variation
// selectors that render as nothing.
const UNSEEN =
  // biome-ignore lint/suspicious/noMisleadingCharacterClass: each invisible or joining character is listed on purpose, to be refused alone
  /[\p{Cc}\p{Cf}\p{Cn}\p{Co}\p{Cs}\p{Zl}\p{Zp}\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u2800\u3164\uFE00-\uFE0F\uFFA0\u{E0100}-\u{E01EF}]/gu;

// Letters that look like the Latin ones of "svc" (Cyrillic, Greek), folded before the comparison.
const LOOK_ALIKE: Record<string, string> = { ѕ: 's', ѵ: 'v', ν: 'v', с: 'c', ϲ: 'c' };

/** Whether a name, read by a person, says "svc": svc's own name must not be an app's. */
function impersonatesSvc(name: string): boolean {
  const folded = name
    .normalize('NFKC')
    .toLowerCase()
    .replace(/./gu, (ch) => LOOK_ALIKE[ch] ?? ch);
  return /(^|[^\p{L}\p{N}])svc($|[^\p{L}\p{N}])/u.test(folded);
}

export const NAME_MAX = 100;

/** Why a registered name cannot be shown, or null. */
export function clientNameProblem(name: string, options: { mayNameSvc?: boolean } = {}): string | null {
  if (name.trim() === '' || name.length > NAME_MAX) return `1 to ${NAME_MAX} characters`;
  if (new RegExp(UNSEEN.source, 'u').test(name)) return 'no control, invisible or bidirectional-formatting characters';
  if (!options.mayNameSvc && impersonatesSvc(name)) return 'an app may not call itself svc';
  return null;
}

/** A metadata document's name made fit to show (unseen characters dropped), or null when nothing fit is left. */
export function cleanClientName(name: unknown): string | null {
  if (typeof name !== 'string') return null;
  const cleaned = name
    .replace(/[\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000\t\n\r]/gu, ' ')
    .replace(UNSEEN, '')
    .replace(/ {2,}/g, ' ')
    .trim()
    .slice(0, NAME_MAX)
    .trim();
  return cleaned === '' || impersonatesSvc(cleaned) ? null : cleaned;
}
