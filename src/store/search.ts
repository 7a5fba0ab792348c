// The search index: postings keyed (term, label set, item), added in the same transaction as the item they index
// and removed by triggers on `items` (drizzle/0022_search_postings.sql) by the words stored with the item, whoever
// changes it.
//
// A search reads only the postings of the label sets its caller may see (decided by `visible`, the one access rule),
// so what hidden documents contain changes neither its answer nor the work it does; and it scores every visible
// match with BM25, with the document count, average length and each term's frequency taken over what the caller may
// see. Every statement is driven from the lists of terms and label sets (`json_each` … CROSS JOIN), so the number of
// index seeks is the same whatever the hidden postings are: an IN list would let SQLite skip seeks, and how many it
// skipped would tell.
import { sql, type SQL } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { BM25, documentTerms, inverseFrequency, queryTerms, snippet } from '../domain/search-text.ts';
import { storedLabels } from '../domain/labels.ts';
import { visibleTo, type Access } from '../domain/visibility.ts';
import { accessSql } from './visibility-sql.ts';

/** What an indexed item is made of; labels as stored (canonical, comma-joined). */
export interface IndexedText {
  readonly title: string;
  readonly text: string;
  readonly labels: string;
}

/** Adds an item's postings, in the transaction that wrote it (the triggers have removed what it replaced). */
export async function indexItem(tx: Tx, seq: number, doc: IndexedText): Promise<void> {
  await indexItems(tx, [{ seq, ...doc }]);
}

/** Whether the item has postings (an item an older svc wrote has none). */
export async function isIndexed(tx: Tx, seq: number): Promise<boolean> {
  return (await tx.all(sql`SELECT 1 FROM search_docs WHERE item_seq = ${seq}`)).length > 0;
}

type Counted = { docs: number; length: number; items: [number, number, ReadonlyMap<string, number>][] };

/**
 * Adds the postings of items not indexed yet, in one statement per table: the postings go in sorted by their key,
 * so items written together share the index pages they touch.
 */
export async function indexItems(tx: Tx, docs: readonly ({ readonly seq: number } & IndexedText)[]): Promise<void> {
  if (docs.length === 0) return;
  const bySet = new Map<string, Counted>();
  for (const d of docs) {
    const { counts, length } = documentTerms(d.title, d.text);
    const set = bySet.get(d.labels) ?? { docs: 0, length: 0, items: [] };
    set.docs++;
    set.length += length;
    set.items.push([d.seq, length, counts]);
    bySet.set(d.labels, set);
  }
  const postings: [string, number, number, number, number][] = [];
  const docRows: [number, number, number, string][] = [];
  const termDocs = new Map<number, Map<string, number>>();
  for (const [labels, set] of bySet) {
    const { id } = await tx.get<{ id: number }>(sql`
      INSERT INTO search_sets (labels, docs, length) VALUES (${labels}, ${set.docs}, ${set.length})
      ON CONFLICT (labels) DO UPDATE SET docs = docs + excluded.docs, length = length + excluded.length
      RETURNING id`);
    const inSet = termDocs.get(id) ?? new Map<string, number>();
    termDocs.set(id, inSet);
    for (const [seq, length, counts] of set.items) {
      docRows.push([seq, id, length, JSON.stringify([...counts.keys()])]);
      for (const [term, tf] of counts) {
        postings.push([term, id, seq, tf, length]);
        inSet.set(term, (inSet.get(term) ?? 0) + 1);
      }
    }
  }
  await tx.run(sql`DELETE FROM search_pending WHERE item_seq IN (SELECT value FROM json_each(${JSON.stringify(docs.map((d) => d.seq))}))`);
  await tx.run(sql`
    INSERT INTO search_docs (item_seq, set_id, length, terms)
    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(${JSON.stringify(docRows)})`);
  if (postings.length === 0) return;
  await tx.run(sql`
    INSERT INTO search_postings (term, set_id, item_seq, tf, len)
    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(${JSON.stringify(postings)})
    ORDER BY 1, 2, 3`);
  const counts = [...termDocs].flatMap(([id, inSet]) => [...inSet].map(([term, n]) => [id, term, n]));
  await tx.run(sql`
    INSERT INTO search_terms (set_id, term, docs)
    SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(${JSON.stringify(counts)}) WHERE true
    ORDER BY 1, 2
    ON CONFLICT (set_id, term) DO UPDATE SET docs = docs + excluded.docs`);
}

/**
 * Up to `batch` items waiting to be indexed after seq `after` (written by another writer than svc: the triggers list
 * them), found by a read so that no write lock is held while looking: their seqs, and where the next look starts
 * (null: none left).
 */
export async function unindexedItems(db: Db, after: number, batch: number): Promise<{ seqs: number[]; last: number | null }> {
  const rows = await db.all<{ seq: number; size: number }>(sql`
    SELECT p.item_seq AS seq, length(i.title) + length(i.text) AS size FROM search_pending p JOIN items i ON i.seq = p.item_seq
    WHERE p.item_seq > ${after} ORDER BY p.item_seq LIMIT ${batch}`);
  // A batch's texts are held in memory with their postings: large documents make smaller batches.
  const seqs: number[] = [];
  let size = 0;
  for (const r of rows) {
    if (seqs.length > 0 && size + r.size > BATCH_TEXT_CHARS) return { seqs, last: seqs[seqs.length - 1]! };
    seqs.push(r.seq);
    size += r.size;
  }
  return { seqs, last: seqs.length < batch ? null : seqs[seqs.length - 1]! };
}

/** How much text one batch of background indexing takes at most (one item is always taken, however large). */
const BATCH_TEXT_CHARS = 4 * 1024 * 1024;

/** Indexes those of `seqs` still waiting (another instance may have indexed some); returns how many. */
export async function indexUnindexed(tx: Tx, seqs: readonly number[]): Promise<number> {
  // As text whatever plain SQL stored: a BLOB would stop every batch after it.
  const rows = await tx.all<{ seq: number } & IndexedText>(sql`
    SELECT seq, CAST(title AS TEXT) AS title, CAST(text AS TEXT) AS text, CAST(labels AS TEXT) AS labels FROM items i
    WHERE seq IN (SELECT item_seq FROM search_pending WHERE item_seq IN (SELECT value FROM json_each(${JSON.stringify(seqs)})))
      AND NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.item_seq = i.seq)`);
  await indexItems(tx, rows);
  // Waiting but indexed already (nothing else writes search_docs, but a pending row must never stay forever).
  await tx.run(sql`DELETE FROM search_pending WHERE item_seq IN (SELECT value FROM json_each(${JSON.stringify(seqs)}))`);
  return rows.length;
}

export interface SearchHit {
  readonly id: string;
  readonly title: string;
  readonly snippet: string;
}

/** The label sets `access` may see, with their item count and words in all. */
async function visibleSets(db: Db, access: Access): Promise<{ ids: number[]; docs: number; length: number }> {
  const sets = await db.all<{ id: number; labels: string; docs: number; words: number }>(
    sql`SELECT id, labels, docs, length AS words FROM search_sets`,
  );
  const ids: number[] = [];
  let docs = 0;
  let length = 0;
  const mayRead = visibleTo(access);
  for (const s of sets) {
    if (!mayRead(storedLabels(s.labels))) continue;
    ids.push(s.id);
    docs += s.docs;
    length += s.words;
  }
  return { ids, docs, length };
}

/**
 * Full-text search, best first: every visible item holding all the query's words, ranked by BM25 over what the
 * caller may see. The query is reduced to words by the index's own tokenizer, so no user input is ever syntax.
 */
export async function searchVisible(db: Db, query: string, access: Access, limit: number): Promise<SearchHit[]> {
  const terms = queryTerms(query);
  if (terms.length === 0 || limit <= 0) return [];
  const sets = await visibleSets(db, access);
  if (sets.docs === 0) return [];
  const setsJson = JSON.stringify(sets.ids);
  // One word's weight multiplies every score alike, so it cannot change the order: only several words need theirs.
  const words = terms.length === 1 ? [{ term: terms[0]!, weight: 1 }] : await weighed(db, terms, setsJson, sets.docs);
  if (words === null) return [];
  const ranked = await rank(db, words, setsJson, sets.length / sets.docs, limit);
  if (ranked.length === 0) return [];
  return hits(db, ranked, terms, access);
}

/**
 * Each word with its BM25 weight from how many visible items hold it, rarest first (the order `rank` joins them
 * in, so the rarest word drives); null when a word is in none (every word is required).
 */
async function weighed(db: Db, terms: string[], setsJson: string, documents: number): Promise<{ term: string; weight: number }[] | null> {
  const frequencies = await db.all<{ i: number; df: number }>(sql`
    SELECT t.key AS i, sum(d.docs) AS df
    FROM json_each(${JSON.stringify(terms)}) t CROSS JOIN json_each(${setsJson}) s CROSS JOIN search_terms d
    WHERE d.term = t.value AND d.set_id = s.value
    GROUP BY t.key`);
  if (frequencies.length < terms.length) return null;
  return frequencies
    .sort((a, b) => a.df - b.df || a.i - b.i)
    .map((f) => ({ term: terms[f.i]!, weight: inverseFrequency(documents, f.df) }));
}

/**
 * The `limit` best items' seqs by BM25 summed over the words. The first (rarest) word's visible postings drive; each
 * further word is a lookup of the same item in the same label set (a subquery: a join of 33 tables would take SQLite
 * longer to plan than to run), and an item lacking one is dropped at the first it lacks.
 */
async function rank(
  db: Db,
  words: { term: string; weight: number }[],
  setsJson: string,
  avgLength: number,
  limit: number,
): Promise<number[]> {
  const score = (tf: SQL, weight: number) =>
    sql`${weight} * ${tf} * ${BM25.k1plus} / (${tf} + ${BM25.k1} * (${BM25.norm} + ${BM25.slope(avgLength)} * len))`;
  const column = (i: number) => sql.raw(`tf${i}`);
  const lookups = words
    .slice(1)
    .map(
      (w, i) =>
        sql`, (SELECT p.tf FROM search_postings p WHERE p.term = ${w.term} AND p.set_id = p0.set_id AND p.item_seq = p0.item_seq) AS ${column(i + 1)}`,
    );
  const present = words.slice(1).map((_, i) => sql` AND ${column(i + 1)} IS NOT NULL`);
  const total = sql.join(
    words.map((w, i) => score(column(i), w.weight)),
    sql` + `,
  );
  const rows = await db.all<{ seq: number }>(sql`
    SELECT seq FROM (
      SELECT p0.item_seq AS seq, p0.len AS len, p0.tf AS tf0${sql.join(lookups)}
      FROM json_each(${setsJson}) s CROSS JOIN search_postings p0
      WHERE p0.term = ${words[0]!.term} AND p0.set_id = s.value
    ) WHERE true${sql.join(present)}
    ORDER BY ${total} DESC, seq DESC LIMIT ${limit}`);
  return rows.map((r) => r.seq);
}

/** How much of a hit's text its snippet is cut from: the snippet of a very long text comes from its beginning. */
const SNIPPET_SOURCE_CHARS = 65_536;

/** The ranked items the caller may read (the access rule again, inside the query), in rank order, with snippets. */
async function hits(db: Db, ranked: number[], terms: string[], access: Access): Promise<SearchHit[]> {
  const rows = await db.all<{ seq: number; id: string; title: string; text: string }>(sql`
    SELECT i.seq AS seq, i.id AS id, i.title AS title, substr(i.text, 1, ${SNIPPET_SOURCE_CHARS}) AS text FROM items i
    WHERE i.seq IN (SELECT value FROM json_each(${JSON.stringify(ranked)})) AND ${accessSql(sql`i.seq`, access)}`);
  const bySeq = new Map(rows.map((r) => [r.seq, r]));
  const out: SearchHit[] = [];
  for (const seq of ranked) {
    const r = bySeq.get(seq);
    if (r !== undefined) out.push({ id: r.id, title: r.title, snippet: snippet(r.text, terms) });
  }
  return out;
}
