// Items. Every read on behalf of a user goes through `visibleSql`, inside the query.
import { eq, asc, gt, and } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { items } from '../db/schema.ts';
import { formatLabels, storedLabels, type LabelSet } from '../domain/labels.ts';
import type { Access } from '../domain/visibility.ts';
import { accessSql } from './visibility-sql.ts';
import { notFound } from '../domain/errors.ts';
import { indexItem, indexItems, isIndexed } from './search.ts';

export interface Item {
  readonly id: string;
  readonly title: string;
  readonly text: string;
  readonly labels: LabelSet;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface ItemSummary {
  readonly id: string;
  readonly title: string;
  readonly labels: LabelSet;
}

/** A document's fields, checked (requests/items.ts); labels undefined: a replaced item keeps its own. */
export interface ItemInput {
  readonly title: string;
  readonly text: string;
  /** undefined: not stated, so a replaced item keeps its labels (a new one has none); []: unrestricted */
  readonly labels?: LabelSet;
}

/**
 * Creates or replaces an item. A replacement that does not state labels keeps the ones the item has, so a
 * document never becomes readable by everyone because its labels were left out. A trigger keeps item_labels in
 * step; the search index is kept here, in the same transaction.
 */
export async function putItem(tx: Tx, id: string, input: ItemInput, now = Date.now()): Promise<{ item: Item; created: boolean }> {
  const { row, created, reindex } = await writeItem(tx, id, input, now);
  if (reindex) await indexItem(tx, row.seq, row);
  return { item: toItem(row), created };
}

/** Writes the item; `reindex`: its postings are to be added. */
async function writeItem(
  tx: Tx,
  id: string,
  input: ItemInput,
  now: number,
): Promise<{ row: typeof items.$inferSelect; created: boolean; reindex: boolean }> {
  const { title, text } = input;
  const labels = input.labels === undefined ? null : formatLabels(input.labels);
  const existed = await tx.select({ title: items.title, text: items.text, labels: items.labels }).from(items).where(eq(items.id, id)).get();
  const rows = await tx
    .insert(items)
    .values({ id, title, text, labels: labels ?? '', createdAt: now, updatedAt: now })
    .onConflictDoUpdate({ target: items.id, set: { title, text, ...(labels === null ? {} : { labels }), updatedAt: now } })
    .returning();
  const row = rows[0]!;
  // A change of words or labels has had its old postings removed by a trigger; an unchanged item is indexed only if
  // it has no postings (an older svc wrote it).
  const same = existed !== undefined && existed.title === row.title && existed.text === row.text && existed.labels === row.labels;
  return { row, created: existed === undefined, reindex: !same || !(await isIndexed(tx, row.seq)) };
}

export async function removeItem(tx: Tx, id: string): Promise<void> {
  // A trigger removes its postings.
  const rows = await tx.delete(items).where(eq(items.id, id)).returning({ seq: items.seq });
  if (rows.length === 0) throw notFound(`no item "${id}"`);
}

/** Every item, for administrators and the CLI. */
export async function listAllItems(db: Db): Promise<ItemSummary[]> {
  const rows = await db.select({ id: items.id, title: items.title, labels: items.labels }).from(items).orderBy(asc(items.id)).all();
  return rows.map((r) => ({ id: r.id, title: r.title, labels: storedLabels(r.labels) }));
}

export async function findItem(db: Db, id: string): Promise<Item | null> {
  const row = await db.select().from(items).where(eq(items.id, id)).get();
  return row ? toItem(row) : null;
}

export async function getAnyItem(db: Db, id: string): Promise<Item> {
  const row = await db.select().from(items).where(eq(items.id, id)).get();
  if (!row) throw notFound(`no item "${id}"`);
  return toItem(row);
}

/** The item if it exists and the user may see it; invisible and missing are the same answer. */
export async function fetchVisible(db: Db, id: string, access: Access): Promise<Item | null> {
  const row = await db
    .select()
    .from(items)
    .where(and(eq(items.id, id), accessSql(items.seq, access)))
    .get();
  return row ? toItem(row) : null;
}

/** One page of visible items in a stable order; the cursor is opaque to callers. */
/**
 * The visible items by id, `limit` at a time, after the id `after` (null: from the first). The position is an id the
 * caller has seen, never a sequence number of the whole store, so paging tells nobody how many items exist.
 */
export async function listVisible(
  db: Db,
  access: Access,
  after: string | null,
  limit: number,
): Promise<{ items: ItemSummary[]; last: string | null }> {
  const rows = await db
    .select({ id: items.id, title: items.title, labels: items.labels })
    .from(items)
    .where(and(after === null ? undefined : gt(items.id, after), accessSql(items.seq, access)))
    .orderBy(asc(items.id))
    .limit(limit + 1)
    .all();
  const page = rows.slice(0, limit);
  return {
    items: page.map((r) => ({ id: r.id, title: r.title, labels: storedLabels(r.labels) })),
    last: rows.length > limit ? page[page.length - 1]!.id : null,
  };
}

function toItem(row: typeof items.$inferSelect): Item {
  return {
    id: row.id,
    title: row.title,
    text: row.text,
    labels: storedLabels(row.labels),
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/**
 * Creates or replaces the items; call it inside one write so an import is whole or not at all. Their postings are
 * added together at the end, sorted, which costs far less than one item at a time.
 */
export async function putItems(tx: Tx, docs: readonly { id: string; input: ItemInput }[]): Promise<{ id: string; created: boolean }[]> {
  const results = [];
  const toIndex = new Map<number, typeof items.$inferSelect>();
  const now = Date.now();
  for (const d of docs) {
    const { row, created, reindex } = await writeItem(tx, d.id, d.input, now);
    // An item written twice in one import is indexed once, as its last version (the first was never indexed).
    if (reindex) toIndex.set(row.seq, row);
    results.push({ id: d.id, created });
  }
  await indexItems(tx, [...toIndex.values()]);
  return results;
}
