// Items. Every read on behalf of a user goes through `visibleSql`, inside the query.
import { eq, asc, gt, and, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { items } from '../db/schema.ts';
import { formatLabels, storedLabels, type LabelSet } from '../domain/labels.ts';
import type { Access } from '../domain/visibility.ts';
import { accessSql } from './visibility-sql.ts';
import { notFound } from '../domain/errors.ts';

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

export interface SearchHit {
  readonly id: string;
  readonly title: string;
  readonly snippet: string;
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
 * document never becomes readable by everyone because its labels were left out. Triggers keep the full-text
 * index and item_labels in step.
 */
export async function putItem(tx: Tx, id: string, input: ItemInput, now = Date.now()): Promise<{ item: Item; created: boolean }> {
  const { title, text } = input;
  const labels = input.labels === undefined ? null : formatLabels(input.labels);
  const existed = await tx.select({ seq: items.seq }).from(items).where(eq(items.id, id)).get();
  const rows = await tx
    .insert(items)
    .values({ id, title, text, labels: labels ?? '', createdAt: now, updatedAt: now })
    .onConflictDoUpdate({ target: items.id, set: { title, text, ...(labels === null ? {} : { labels }), updatedAt: now } })
    .returning();
  return { item: toItem(rows[0]!), created: existed === undefined };
}

export async function removeItem(tx: Tx, id: string): Promise<void> {
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

/**
 * How many matches a search ranks at most. FTS5 ranks every match before it can return the best, so a term found in
 * a tenth of a million documents would cost a tenth of a second per search. Past this many matches svc ranks the
 * newest RANK_WINDOW of them (by insertion order): every result is still one the caller may read, and every
 * visible match of a rarer query is still ranked.
 */
export const RANK_WINDOW = 20_000;

/**
 * Full-text search, best first. The query is reduced to words, each quoted, so no user input is ever FTS5
 * syntax. Ordering by the FTS table's own rank lets SQLite stop after `limit` visible hits.
 */
export async function searchVisible(db: Db, query: string, access: Access, limit: number, window = RANK_WINDOW): Promise<SearchHit[]> {
  const match = ftsQuery(query);
  if (match === null) return [];
  const ranked = (from: number | null) =>
    db.all<SearchHit>(sql`
      SELECT i.id AS id, i.title AS title, snippet(items_fts, 1, '', '', '…', 24) AS snippet
      FROM items_fts JOIN items i ON i.seq = items_fts.rowid
      WHERE items_fts MATCH ${match} ${from === null ? sql`` : sql`AND items_fts.rowid >= ${sql.raw(String(from))}`} AND ${accessSql(sql`i.seq`, access)}
      ORDER BY items_fts.rank
      LIMIT ${limit}`);
  // Walking the matches newest first costs no ranking: it finds where the window starts, if there are that many.
  const [edge] = await db.all<{ seq: number }>(sql`
    SELECT rowid AS seq FROM items_fts WHERE items_fts MATCH ${match} ORDER BY rowid DESC LIMIT 1 OFFSET ${window - 1}`);
  if (edge === undefined) return ranked(null);
  // Written into the statement, not bound: FTS5 narrows its scan by a rowid bound only when it is a literal (a
  // bound one costs the whole scan, measured here). It is an integer read from the database.
  if (!Number.isSafeInteger(edge.seq)) return ranked(null);
  const hits = await ranked(edge.seq);
  // A caller who may read few of the newest matches gets the whole ranking: slower, never fewer results.
  return hits.length === limit ? hits : ranked(null);
}

const MAX_TERMS = 32;

export function ftsQuery(query: string): string | null {
  const words = query.match(/[\p{L}\p{N}]+/gu);
  if (!words) return null;
  return words
    .slice(0, MAX_TERMS)
    .map((w) => `"${w}"`)
    .join(' ');
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

/** Creates or replaces the items; call it inside one write so an import is whole or not at all. */
export async function putItems(tx: Tx, docs: readonly { id: string; input: ItemInput }[]): Promise<{ id: string; created: boolean }[]> {
  const results = [];
  for (const d of docs) results.push({ id: d.id, created: (await putItem(tx, d.id, d.input)).created });
  return results;
}
