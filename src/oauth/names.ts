// Client names are an app's own claim, shown on the consent, token and admin pages and in mail. They must read as
// what they are: no bidirectional overrides or isolates, no invisible or control characters (domain/display-text.ts),
// and not svc itself.
import { cleanDisplayText, hasUnseen } from '../domain/display-text.ts';

// Letters that look like the Latin ones of "svc" (Cyrillic, Greek), folded before the comparison.
const LOOK_ALIKE: Record<string, string> = { ѕ: 's', ѵ: 'v', ν: 'v', с: 'c', ϲ: 'c' };

/**
 * Whether a name, read by a person, is "svc" itself: svc's own name must not be an app's. Letter case, look-alike
 * letters, marks, spacing and punctuation are folded away first (" S.V.C ", "ѕvс" in Cyrillic); a name that merely
 * holds svc's name among other words ("Claude Code (svc)", as Claude Code names a server added as svc) is the app's.
 */
function impersonatesSvc(name: string): boolean {
  const folded = name
    .normalize('NFKC')
    .toLowerCase()
    .replace(/./gu, (ch) => LOOK_ALIKE[ch] ?? ch)
    .replace(/[^\p{L}\p{N}]/gu, '');
  return folded === 'svc';
}

export const NAME_MAX = 100;

/** Why a registered name cannot be shown, or null. */
export function clientNameProblem(name: string, options: { mayNameSvc?: boolean } = {}): string | null {
  if (name.trim() === '' || name.length > NAME_MAX) return `1 to ${NAME_MAX} characters`;
  if (hasUnseen(name)) return 'no control, invisible or bidirectional-formatting characters';
  if (!options.mayNameSvc && impersonatesSvc(name)) return 'an app may not call itself svc';
  return null;
}

/** A metadata document's name made fit to show (unseen characters dropped), or null when nothing fit is left. */
export function cleanClientName(name: unknown): string | null {
  if (typeof name !== 'string') return null;
  const cleaned = cleanDisplayText(name, NAME_MAX);
  return cleaned === '' || impersonatesSvc(cleaned) ? null : cleaned;
}
