// The access rule of domain/visibility.ts in SQL, applied inside every query that returns items (or counts who may
// read one), so an invisible item never leaves the database. test/labels.test.ts checks it against `visible`.
import { sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { LabelSet } from '../domain/labels.ts';
import type { Access } from '../domain/visibility.ts';

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
