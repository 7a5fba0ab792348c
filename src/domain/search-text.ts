// How svc's search reads text: the one tokenizer for documents and queries, and the snippet shown with a hit.
// Both sides go through `fold`, so a query finds exactly the words a document was indexed under: letters and digits,
// combining marks dropped after canonical decomposition ("Café" and "cafe" are one word), lower case.

/** A word as it appears in the text: a letter or digit, then letters, digits and combining marks. */
const WORD = /[\p{L}\p{N}][\p{L}\p{N}\p{M}]*/gu;
const MARKS = /\p{M}/gu;

/** A term longer than this is cut to it, on both sides, so one long token cannot make a large index key. */
export const MAX_TERM_LENGTH = 64;

/** How many distinct words of a query count; the rest are ignored. */
export const MAX_QUERY_TERMS = 32;

const ASCII = /^[\x00-\x7f]*$/;

export function fold(word: string): string {
  // Plain ASCII has nothing to decompose: the common case skips the normalization.
  const folded = ASCII.test(word) ? word.toLowerCase() : word.normalize('NFD').replace(MARKS, '').toLowerCase();
  // Cut by code points, never inside a surrogate pair.
  return folded.length > MAX_TERM_LENGTH ? Array.from(folded).slice(0, MAX_TERM_LENGTH).join('') : folded;
}

/** A document's terms with how often each occurs, and its length in words (title and text together). */
export interface DocumentTerms {
  readonly counts: ReadonlyMap<string, number>;
  readonly length: number;
}

export function documentTerms(title: string, text: string): DocumentTerms {
  const counts = new Map<string, number>();
  let length = 0;
  for (const part of [title, text]) {
    for (const m of part.matchAll(WORD)) {
      const term = fold(m[0]);
      if (term === '') continue;
      counts.set(term, (counts.get(term) ?? 0) + 1);
      length++;
    }
  }
  return { counts, length };
}

/** A query's distinct terms, in order, at most MAX_QUERY_TERMS; empty when it has no word. */
export function queryTerms(query: string): string[] {
  const terms = new Set<string>();
  for (const m of query.matchAll(WORD)) {
    const term = fold(m[0]);
    if (term !== '') terms.add(term);
    if (terms.size === MAX_QUERY_TERMS) break;
  }
  return [...terms];
}

/** How many words a snippet shows at most. */
const SNIPPET_WORDS = 24;

/**
 * The passage of `text` of at most SNIPPET_WORDS words that holds the most distinct query terms (the first such),
 * with "…" where it cuts the text; the text's start when no term is in it (a match in the title).
 */
export function snippet(text: string, terms: readonly string[]): string {
  const words = [...text.matchAll(WORD)].map((m) => ({ at: m.index, end: m.index + m[0].length, term: fold(m[0]) }));
  if (words.length === 0) return '';
  const wanted = new Set(terms);
  // One pass with a sliding window: how many times each query word occurs in the window starting at `start`.
  const inWindow = new Map<string, number>();
  const enter = (i: number, by: number) => {
    const t = words[i]?.term;
    if (t === undefined || !wanted.has(t)) return;
    const n = (inWindow.get(t) ?? 0) + by;
    if (n === 0) inWindow.delete(t);
    else inWindow.set(t, n);
  };
  for (let i = 0; i < Math.min(words.length, SNIPPET_WORDS); i++) enter(i, 1);
  let best = 0;
  let bestCount = 0;
  for (let start = 0; start < words.length; start++) {
    if (inWindow.size > bestCount && wanted.has(words[start]!.term)) {
      best = start;
      bestCount = inWindow.size;
    }
    enter(start, -1);
    enter(start + SNIPPET_WORDS, 1);
  }
  // A little of what comes before the first match, as a reader would want, but never past the window's last match.
  let lastMatch = best;
  for (let i = best; i < Math.min(words.length, best + SNIPPET_WORDS); i++) if (wanted.has(words[i]!.term)) lastMatch = i;
  const start = Math.max(0, Math.min(Math.max(best - 3, lastMatch - SNIPPET_WORDS + 1), words.length - SNIPPET_WORDS));
  const end = Math.min(words.length, start + SNIPPET_WORDS);
  const body = text.slice(words[start]!.at, words[end - 1]!.end);
  return `${start > 0 ? '…' : ''}${body}${end < words.length ? '…' : ''}`;
}

/** BM25's constants, as FTS5 and most engines use them. */
const K1 = 1.2;
const B = 0.75;

/** A term's weight over `documents` documents of which `frequency` hold it (never below a small positive floor). */
export function inverseFrequency(documents: number, frequency: number): number {
  const idf = Math.log((documents - frequency + 0.5) / (frequency + 0.5));
  return idf > 0 ? idf : 1e-6;
}

/** The factors the store's SQL multiplies each posting by: score += idf · tf · k1plus / (tf + k1 · (norm + slope · length)). */
export const BM25 = { k1: K1, k1plus: K1 + 1, norm: 1 - B, slope: (avgLength: number) => (avgLength > 0 ? B / avgLength : 0) };
