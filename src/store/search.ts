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
import type { Access } from '../domain/visibility.ts';
import { accessSql } from './visibility-sql.ts';
import { AppError } from '../domain/errors.ts';
import { SearchTurns, type SearchCaller, type Turns } from './search-turns.ts';
import { visibleSets } from './search-sets.ts';

/** What an indexed item is made of; labels as stored (canonical, comma-joined). */
export interface IndexedText {
  readonly id: string;
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

type Counted = { docs: number; length: number; items: [number, string, number, ReadonlyMap<string, number>][] };

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
    set.items.push([d.seq, d.id, length, counts]);
    bySet.set(d.labels, set);
  }
  const postings: [string, number, number, number, number][] = [];
  const docRows: [number, string, number, number, string][] = [];
  const termDocs = new Map<number, Map<string, number>>();
  for (const [labels, set] of bySet) {
    const { id } = await tx.get<{ id: number }>(sql`
      INSERT INTO search_sets (labels, docs, length) VALUES (${labels}, ${set.docs}, ${set.length})
      ON CONFLICT (labels) DO UPDATE SET docs = docs + excluded.docs, length = length + excluded.length
      RETURNING id`);
    const inSet = termDocs.get(id) ?? new Map<string, number>();
    termDocs.set(id, inSet);
    for (const [seq, itemId, length, counts] of set.items) {
      docRows.push([seq, itemId, id, length, JSON.stringify([...counts.keys()])]);
      for (const [term, tf] of counts) {
        postings.push([term, id, seq, tf, length]);
        inSet.set(term, (inSet.get(term) ?? 0) + 1);
      }
    }
  }
  await tx.run(sql`DELETE FROM search_pending WHERE item_seq IN (SELECT value FROM json_each(${JSON.stringify(docs.map((d) => d.seq))}))`);
  await tx.run(sql`
    INSERT INTO search_docs (item_seq, item_id, set_id, length, terms)
    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(${JSON.stringify(docRows)})`);
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
 * them), with at most `chars` of text in all (one item is always taken, however large), found by a read so that no
 * write lock is held while looking: their seqs, and where the next look starts (null: none left).
 */
export async function unindexedItems(
  db: Db,
  after: number,
  batch: number,
  chars: number,
): Promise<{ seqs: number[]; last: number | null }> {
  const rows = await db.all<{ seq: number; size: number }>(sql`
    SELECT p.item_seq AS seq, min(length(i.title) + length(i.text), ${INDEXED_CHARS}) AS size
    FROM search_pending p JOIN items i ON i.seq = p.item_seq
    WHERE p.item_seq > ${after} ORDER BY p.item_seq LIMIT ${batch}`);
  const seqs: number[] = [];
  let size = 0;
  for (const r of rows) {
    if (seqs.length > 0 && size + r.size > chars) return { seqs, last: seqs[seqs.length - 1]! };
    seqs.push(r.seq);
    size += r.size;
  }
  return { seqs, last: seqs.length < batch ? null : seqs[seqs.length - 1]! };
}

/** How much of an item another writer stored is indexed: what svc itself accepts (requests/items.ts). */
const INDEXED_CHARS = 1024 * 1024;

/** Indexes those of `seqs` still waiting (another instance may have indexed some); returns how many. */
export async function indexUnindexed(tx: Tx, seqs: readonly number[]): Promise<number> {
  // As text whatever plain SQL stored (a BLOB would stop every batch after it), and no more than svc would take.
  const rows = await tx.all<{ seq: number } & IndexedText>(sql`
    SELECT seq, CAST(id AS TEXT) AS id, substr(CAST(title AS TEXT), 1, ${INDEXED_CHARS}) AS title,
      substr(CAST(text AS TEXT), 1, ${INDEXED_CHARS}) AS text, CAST(labels AS TEXT) AS labels FROM items i
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

/**
 * What one search may cost. A statement of a broad search reads about `slice` postings' worth of work (a posting of
 * the first word counts 1, each further word's lookup LOOKUP more: about 6 ms here either way), and a search may
 * take `slices` such statements (about 3 s); a broader one is refused before it starts.
 */
export interface SearchLimits {
  readonly slice: number;
  readonly slices: number;
}
export const SEARCH_LIMITS: SearchLimits = { slice: 60_000, slices: 500 };
/** A further word's lookup costs about six times reading one posting of the first (measured at a million items). */
const LOOKUP = 6;

/** The turns broad searches take, one process-wide set (store/search-turns.ts). */
const broadSearches = new SearchTurns();

export interface SearchOptions {
  readonly limits?: SearchLimits;
  readonly turns?: SearchTurns;
  /** aborted when the caller has gone: a broad search stops before its next turn */
  readonly signal?: AbortSignal;
}

/**
 * Full-text search, best first: every visible item holding all the query's words, ranked by BM25 over what the
 * caller may see. The query is reduced to words by the index's own tokenizer, so no user input is ever syntax.
 * `caller` (the user, and the credential they came with) takes turns when the search is broad; a search too broad to
 * rank, or past the broad searches a credential or user may have under way, is refused with an AppError that says
 * what to do.
 */
export async function searchVisible(
  db: Db,
  query: string,
  access: Access,
  limit: number,
  caller: SearchCaller,
  options: SearchOptions = {},
): Promise<SearchHit[]> {
  const { limits = SEARCH_LIMITS, turns = broadSearches, signal } = options;
  const terms = queryTerms(query);
  if (terms.length === 0 || limit <= 0) return [];
  const sets = await visibleSets(db, access);
  if (sets.docs === 0) return [];
  const setsJson = JSON.stringify(sets.ids);
  // One word's weight multiplies every score alike, so it cannot change the order: only several words need theirs.
  const words = terms.length === 1 ? [{ term: terms[0]!, weight: 1 }] : await weighed(db, terms, setsJson, sets.docs);
  if (words === null) return [];
  const plan = slices(await postingsBySet(db, words[0]!.term, setsJson), words.length, limits);
  if (plan.statements === 0) return [];
  if (plan.statements > limits.slices)
    throw new AppError('bad_request', 'This search matches too many of the documents you may read to rank them all: add a rarer word.');
  const ranking: Ranking = { db, words, avgLength: sets.length / sets.docs, limit };
  let ranked: number[];
  if (plan.statements === 1) ranked = (await rankSlice(ranking, plan.pieces[0]!.sets, null, null)).map((r) => r.seq);
  else {
    const broad = await turns.run(caller, (turn) => rankBroad(ranking, plan, turn, signal));
    if ('refused' in broad) throw tooMany(broad.refused, broad.limit);
    ranked = broad.done;
  }
  if (ranked.length === 0) return [];
  return hits(db, ranked, terms, access);
}

function tooMany(refused: 'credential' | 'user', limit: number): AppError {
  const what =
    refused === 'credential'
      ? `This token or session has ${limit} broad searches under way already`
      : `You have ${limit} broad searches under way already, over all your tokens and sessions`;
  return new AppError('too_many_requests', `${what}: wait for one to finish, or add a rarer word.`, undefined, 1);
}

/**
 * Each word with its BM25 weight from how many visible items hold it, rarest first (the order `rankSlice` chains
 * them in, so the rarest word drives); null when a word is in none (every word is required).
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

/** How many postings the word has in each visible label set that holds it, in the sets' order. */
async function postingsBySet(db: Db, term: string, setsJson: string): Promise<{ id: number; postings: number }[]> {
  return db.all<{ id: number; postings: number }>(sql`
    SELECT d.set_id AS id, d.docs AS postings FROM json_each(${setsJson}) s CROSS JOIN search_terms d
    WHERE d.set_id = s.value AND d.term = ${term}
    ORDER BY s.key`);
}

/**
 * The statements a ranking takes: label sets together while their postings of the first word fit in one slice (one
 * statement), and a set with more cut into `statements` slices of its items (by seq, each slice's end found when it
 * comes).
 */
interface Plan {
  readonly pieces: { readonly sets: number[]; readonly statements: number }[];
  /** postings of the first word per statement */
  readonly perSlice: number;
  readonly statements: number;
}

function slices(bySet: { id: number; postings: number }[], words: number, limits: SearchLimits): Plan {
  const perSlice = Math.max(1, Math.floor(limits.slice / (1 + LOOKUP * (words - 1))));
  const pieces: { sets: number[]; statements: number }[] = [];
  let group: { sets: number[]; statements: number; postings: number } | null = null;
  for (const { id, postings } of bySet) {
    if (postings <= 0) continue;
    if (postings > perSlice) {
      pieces.push({ sets: [id], statements: Math.ceil(postings / perSlice) });
      continue;
    }
    if (group === null || group.postings + postings > perSlice) {
      group = { sets: [], statements: 1, postings: 0 };
      pieces.push(group);
    }
    group.sets.push(id);
    group.postings += postings;
  }
  return { pieces, perSlice, statements: pieces.reduce((n, p) => n + p.statements, 0) };
}

interface Ranking {
  readonly db: Db;
  readonly words: readonly { term: string; weight: number }[];
  readonly avgLength: number;
  readonly limit: number;
}

type Scored = { seq: number; score: number };

/** Best first, ties by the newer item, as every statement orders them. */
const better = (a: Scored, b: Scored) => b.score - a.score || b.seq - a.seq;

/**
 * A broad ranking, a statement per turn: each slice's best, kept to the `limit` best of all. A set cut into slices
 * takes as many as planned, the last one open-ended, so items written meanwhile cannot keep it going. An item
 * moved from one slice to a later one while the search goes on counts once.
 */
async function rankBroad(ranking: Ranking, plan: Plan, turn: Turns, signal: AbortSignal | undefined): Promise<number[]> {
  let best: Scored[] = [];
  const keep = (rows: Scored[]) => {
    const seen = new Set<number>();
    best = [...best, ...rows]
      .sort(better)
      .filter((r) => !seen.has(r.seq) && seen.add(r.seq))
      .slice(0, ranking.limit);
  };
  const inTurn = async (step: () => Promise<void>) => {
    if (signal?.aborted) throw new AppError('bad_request', 'The search was cancelled.');
    await turn.take();
    try {
      await step();
    } finally {
      turn.done();
    }
  };
  const term = ranking.words[0]!.term;
  for (const piece of plan.pieces) {
    // A piece of several statements is one label set: its slices end where sliceEnd says, the last one open.
    let after: number | null = null;
    for (let i = 0; i < piece.statements && (i === 0 || after !== null); i++)
      await inTurn(async () => {
        const upto = i === piece.statements - 1 ? null : await sliceEnd(ranking.db, term, piece.sets[0]!, after, plan.perSlice);
        keep(await rankSlice(ranking, piece.sets, after, upto));
        after = upto;
      });
  }
  return best.map((r) => r.seq);
}

/** The seq of the `count`th posting of `term` in one label set after seq `after`; null when fewer are left. */
async function sliceEnd(db: Db, term: string, set: number, after: number | null, count: number): Promise<number | null> {
  const from = after === null ? sql`` : sql` AND item_seq > ${after}`;
  const [row] = await db.all<{ seq: number }>(sql`
    SELECT item_seq AS seq FROM search_postings WHERE term = ${term} AND set_id = ${set}${from}
    ORDER BY item_seq LIMIT 1 OFFSET ${count - 1}`);
  return row?.seq ?? null;
}

/**
 * The `limit` best of the given label sets' items (those after seq `after` up to `upto`, where given) by BM25 summed
 * over the words. The first (rarest) word's visible postings drive; each further word is one step of a chain that
 * looks the item up in the same label set and adds its score, or makes it null: a step reads only what the one
 * before kept, so an item is dropped at the first word it lacks, and each lookup is made once (`LIMIT -1` keeps
 * SQLite from merging the steps, which would repeat a lookup wherever its score is used; a join of 33 tables would
 * take it longer to plan than to run).
 */
async function rankSlice(ranking: Ranking, sets: number[], after: number | null, upto: number | null): Promise<Scored[]> {
  const { db, words, avgLength, limit } = ranking;
  const score = (p: SQL, weight: number) =>
    sql`${weight} * ${p}.tf * ${BM25.k1plus} / (${p}.tf + ${BM25.k1} * (${BM25.norm} + ${BM25.slope(avgLength)} * ${p}.len))`;
  const step = (i: number) => sql.raw(`w${i}`);
  const from = after === null ? sql`` : sql` AND p0.item_seq > ${after}`;
  const to = upto === null ? sql`` : sql` AND p0.item_seq <= ${upto}`;
  const steps = [
    sql`w0 AS (SELECT p0.item_seq AS seq, p0.set_id AS set_id, ${score(sql`p0`, words[0]!.weight)} AS score
      FROM json_each(${JSON.stringify(sets)}) s CROSS JOIN search_postings p0
      WHERE p0.term = ${words[0]!.term} AND p0.set_id = s.value${from}${to} LIMIT -1)`,
    ...words.slice(1).map(
      (w, i) => sql`${step(i + 1)} AS (SELECT seq, set_id, score + (SELECT ${score(sql`p`, w.weight)} FROM search_postings p
        WHERE p.term = ${w.term} AND p.set_id = ${step(i)}.set_id AND p.item_seq = ${step(i)}.seq) AS score
      FROM ${step(i)} WHERE score IS NOT NULL LIMIT -1)`,
    ),
  ];
  return db.all<Scored>(sql`
    WITH ${sql.join(steps, sql`, `)}
    SELECT seq, score FROM ${step(words.length - 1)} WHERE score IS NOT NULL
    ORDER BY score DESC, seq DESC LIMIT ${limit}`);
}

/** How much of a hit's text its snippet is cut from: the snippet of a very long text comes from its beginning. */
const SNIPPET_SOURCE_CHARS = 16_384;

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
