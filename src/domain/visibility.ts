// The one access rule of svc, in two forms that must agree (test/labels.test.ts checks every pair):
// `visible` here, for code holding labels in memory, and its SQL form `visibleSql` (store/visibility-sql.ts) inside
// every query that returns items, so an invisible item never leaves the database.
//
// An item is visible exactly when every one of its labels is among the user's labels, and, for a token with a
// label restriction, also among the restriction's labels. A token therefore never sees more than its owner,
// whatever the owner gains later, and a restriction naming labels the owner lacks grants nothing.
import type { LabelSet } from './labels.ts';

/** Whose access a read uses: the user's labels, and the token's restriction (null: none). */
export interface Access {
  readonly labels: LabelSet;
  readonly restriction: LabelSet | null;
}

/** The labels that count for this access: the user's, narrowed by a restriction. */
export function effectiveLabels(access: Access): LabelSet {
  return access.restriction === null ? access.labels : access.labels.filter((l) => access.restriction!.includes(l));
}

export function visible(itemLabels: LabelSet, userLabels: LabelSet, restriction: LabelSet | null = null): boolean {
  return visibleTo({ labels: userLabels, restriction })(itemLabels);
}

/** `visible` for one access, made once to judge many label sets. */
export function visibleTo(access: Access): (itemLabels: LabelSet) => boolean {
  const mine = new Set(access.labels);
  const allowed = access.restriction === null ? null : new Set(access.restriction);
  return (itemLabels) => itemLabels.every((l) => mine.has(l) && (allowed === null || allowed.has(l)));
}
