// A token's or grant's label restriction (CONTRACT §5 Tokens): what it may name, and how the audit trail records it.
// What a restricted token may see is the access rule in visibility.ts.
import { badRequest } from './errors.ts';
import { formatLabels, type LabelSet } from './labels.ts';
import { storedHash } from './secrets.ts';

/** Labels one restriction may name: a restriction narrows its owner's access, so it never needs more. */
export const RESTRICTION_MAX = 64;

/**
 * A restriction names only labels its owner holds when it is set: one they lack would let the token see nothing
 * more, and could only make the record, its audit row and every page that shows it larger.
 */
export function checkHeldByOwner(restriction: LabelSet, ownerLabels: LabelSet): void {
  const held = new Set(ownerLabels);
  const lacking = restriction.filter((l) => !held.has(l));
  if (lacking.length === 0) return;
  const named = lacking
    .slice(0, 3)
    .map((l) => JSON.stringify(l))
    .join(', ');
  throw badRequest(
    `labels: the owner does not hold ${named}${lacking.length > 3 ? ` and ${lacking.length - 3} more` : ''}; a restriction can only narrow the owner's labels`,
    'labels',
  );
}

/** What the audit trail keeps of a restriction: how many labels, and a SHA-256 of its canonical form, not the list. */
export function restrictionDigest(restriction: LabelSet | null): { size: number; sha256: string } | null {
  return restriction === null ? null : { size: restriction.length, sha256: storedHash(formatLabels(restriction)) };
}
