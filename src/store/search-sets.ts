// Which label sets of the search index a caller may see, decided without reading a row of a set it may not see.
//
// A set's labels never change (an item relabelled moves to another set), and its id comes from AUTOINCREMENT, whose
// sequence only grows: so this process learns each set once, when the sequence passes it. A search reads the
// sequence, the rows of sets made since (if any), and then only the rows of the sets it may see, which also give
// their counts. How many sets it may not see, or whether one went, changes neither its work nor its time.
import { sql } from 'drizzle-orm';
import type { Db } from '../db/open.ts';
import { storedLabels } from '../domain/labels.ts';
import { visibleTo, type Access } from '../domain/visibility.ts';

interface KnownSets {
  /** the sequence of set ids as last read: every set at or below it is learnt */
  last: number;
  /** each set learnt, in the order learnt */
  readonly all: { readonly id: number; readonly labels: string }[];
  readonly labels: Map<number, string>;
  /** per access, the ids of the sets it may see among the first `seen` learnt, less those found gone */
  readonly byAccess: Map<string, { seen: number; ids: number[] }>;
}

const knownSets = new WeakMap<Db, KnownSets>();
/** How many accesses' visible sets are kept; the least recently used goes first. */
const ACCESSES_KEPT = 1000;
/** What stands for labels that are not text (a trigger refuses them): no access may read it. */
const UNREADABLE = '\u0000';
/** Labels as a row holds them: text, or bytes that plain SQL stored before labels had to be text. */
type StoredLabels = string | Uint8Array;
const asLabels = (labels: StoredLabels) => (typeof labels === 'string' ? labels : UNREADABLE);

async function knownSetsOf(db: Db): Promise<KnownSets> {
  let known = knownSets.get(db);
  const [row] = await db.all<{ last: number }>(
    sql`SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'search_sets'), 0) AS last`,
  );
  const last = row?.last ?? 0;
  // A sequence lower than known: the database was replaced (a backup restored). Learn it again.
  if (known === undefined || last < known.last) {
    known = { last: 0, all: [], labels: new Map(), byAccess: new Map() };
    knownSets.set(db, known);
  }
  if (last > known.last) {
    const added = await db.all<{ id: number; labels: StoredLabels }>(
      sql`SELECT id, labels FROM search_sets WHERE id > ${known.last} ORDER BY id`,
    );
    for (const s of added) {
      if (known.labels.has(s.id)) continue;
      known.labels.set(s.id, asLabels(s.labels));
      known.all.push({ id: s.id, labels: asLabels(s.labels) });
    }
    known.last = Math.max(last, added.at(-1)?.id ?? 0);
  }
  return known;
}

/** The ids of the learnt sets `access` may see (those learnt since its last search are judged now). */
function memoOf(known: KnownSets, access: Access): { seen: number; ids: number[] } {
  const key = JSON.stringify([access.labels, access.restriction]);
  const memo = known.byAccess.get(key) ?? { seen: 0, ids: [] };
  known.byAccess.delete(key);
  known.byAccess.set(key, memo);
  if (known.byAccess.size > ACCESSES_KEPT) known.byAccess.delete(known.byAccess.keys().next().value!);
  if (memo.seen < known.all.length) {
    const mayRead = visibleTo(access);
    for (const s of known.all.slice(memo.seen)) if (s.labels !== UNREADABLE && mayRead(storedLabels(s.labels))) memo.ids.push(s.id);
    memo.seen = known.all.length;
  }
  return memo;
}

/**
 * The label sets `access` may see, with their item count and words in all. A set whose labels are not those learnt
 * means the database is not the one this process learnt: it is learnt again, once. After a restore that leaves the
 * sequence as high as before, a search may miss sets until svc restarts (it never reads one it may not see).
 */
export async function visibleSets(db: Db, access: Access, again = true): Promise<{ ids: number[]; docs: number; length: number }> {
  const known = await knownSetsOf(db);
  const memo = memoOf(known, access);
  const rows = await db.all<{ id: number; labels: StoredLabels; docs: number; words: number }>(sql`
    SELECT s.id AS id, s.labels AS labels, s.docs AS docs, s.length AS words
    FROM json_each(${JSON.stringify(memo.ids)}) j CROSS JOIN search_sets s WHERE s.id = j.value`);
  if (rows.some((r) => asLabels(r.labels) !== known.labels.get(r.id))) {
    knownSets.delete(db);
    if (again) return visibleSets(db, access, false);
    throw new Error('the search index changed its label sets under svc');
  }
  // Sets that went (their last item did) are not asked for again: ids are never used twice.
  if (rows.length < memo.ids.length) memo.ids = rows.map((r) => r.id);
  return {
    ids: rows.map((r) => r.id),
    docs: rows.reduce((n, r) => n + r.docs, 0),
    length: rows.reduce((n, r) => n + r.words, 0),
  };
}
