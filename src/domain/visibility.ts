// The one access rule of svc, in two forms that must agree (test/visibility.test.ts checks every pair):
// `visible` for code holding labels in memory, `visibleSql` inside every query that returns items, so an
// invisible item never leaves the database.
import { sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { LabelSet } from './labels.ts';

/** An item is visible exactly when every one of its labels is among the user's labels. */
export function visible(itemLabels: LabelSet, userLabels: LabelSet): boolean {
  const mine = new Set(userLabels);
  return itemLabels.every((l) => mine.has(l));
}

/** SQL condition: the item with this seq has no label outside the user's labels. */
export function visibleSql(itemSeq: SQLWrapper, userLabels: LabelSet): SQL {
  return sql`NOT EXISTS (SELECT 1 FROM item_labels il WHERE il.item_seq = ${itemSeq}
    AND il.label NOT IN (SELECT value FROM json_each(${JSON.stringify(userLabels)})))`;
}
