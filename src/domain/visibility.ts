// The one access rule of svc, in two forms that must agree (test/labels.test.ts checks every pair):
// `visible` for code holding labels in memory, `visibleSql` inside every query that returns items, so an
// invisible item never leaves the database.
//
// An item is visible exactly when every one of its labels is among the user's labels, and, for a token with a
// label restriction, also among the restriction's labels. A token therefore never sees more than its owner,
// whatever the owner gains later, and a restriction naming labels the owner lacks grants nothing.
import { sql, type SQL, type SQLWrapper } from 'drizzle-orm';
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
  const mine = new Set(userLabels);
  const allowed = restriction === null ? null : new Set(restriction);
  return itemLabels.every((l) => mine.has(l) && (allowed === null || allowed.has(l)));
}

/** A label set in SQL: labels held in memory, or a JSON array computed in the query (see storedLabelsJson). */
export type LabelsSql = LabelSet | SQL;

const asJson = (labels: LabelsSql): SQL => (Array.isArray(labels) ? sql`${JSON.stringify(labels)}` : (labels as SQL));

/** The JSON array of a stored label column (canonical: [a-z0-9_.:-] joined by commas, so this is valid JSON). */
export function storedLabelsJson(column: SQLWrapper): SQL {
  return sql`(CASE WHEN ${column} = '' THEN '[]' ELSE '["' || replace(${column}, ',', '","') || '"]' END)`;
}

/** visibleSql for an Access. */
export function accessSql(itemSeq: SQLWrapper, access: Access): SQL {
  return visibleSql(itemSeq, access.labels, access.restriction);
}

/** SQL condition: the item with this seq has no label outside the user's labels (and outside the restriction). */
export function visibleSql(itemSeq: SQLWrapper, userLabels: LabelsSql, restriction: LabelsSql | null = null): SQL {
  const outsideRestriction = restriction === null ? sql`` : sql` OR il.label NOT IN (SELECT value FROM json_each(${asJson(restriction)}))`;
  return sql`NOT EXISTS (SELECT 1 FROM item_labels il WHERE il.item_seq = ${itemSeq}
    AND (il.label NOT IN (SELECT value FROM json_each(${asJson(userLabels)}))${outsideRestriction}))`;
}
