import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { documentTerms, fold, inverseFrequency, MAX_QUERY_TERMS, MAX_TERM_LENGTH, queryTerms, snippet } from '../src/domain/search-text.ts';

describe('the search tokenizer', () => {
  test('folds case and accents, on documents and queries alike', () => {
    assert.equal(fold('Café'), 'cafe');
    assert.equal(fold('ÉCOLE'), 'ecole');
    assert.deepEqual(queryTerms('Crème brûlée, CRÈME!'), ['creme', 'brulee']);
    const { counts, length } = documentTerms('Crème', 'crème brûlée 2027');
    assert.deepEqual(
      [...counts],
      [
        ['creme', 2],
        ['brulee', 1],
        ['2027', 1],
      ],
    );
    assert.equal(length, 4);
  });
  test('a query is words only: no syntax, at most MAX_QUERY_TERMS distinct words', () => {
    assert.deepEqual(queryTerms('"a" OR b* NEAR(c) -d'), ['a', 'or', 'b', 'near', 'c', 'd']);
    assert.deepEqual(queryTerms('… — !!'), []);
    const many = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    assert.equal(queryTerms(many).length, MAX_QUERY_TERMS);
  });
  test('a long token is cut to MAX_TERM_LENGTH on both sides, so it still matches', () => {
    const long = 'x'.repeat(500);
    const [term] = queryTerms(long);
    assert.equal(term!.length, MAX_TERM_LENGTH);
    assert.ok(documentTerms('', long).counts.has(term!));
  });
  test('idf is positive even for a word in every document', () => {
    assert.ok(inverseFrequency(10, 10) > 0);
    assert.ok(inverseFrequency(1000, 1) > inverseFrequency(1000, 100));
  });
});

describe('snippets', () => {
  const text = Array.from({ length: 100 }, (_, i) => `w${i}`).join(' ');
  test('the passage around the match, with ellipses where the text is cut', () => {
    const s = snippet(text, ['w50']);
    assert.match(s, /^…w47 w48 w49 w50 /);
    assert.match(s, /…$/);
    assert.equal(s.replace(/…/g, '').split(' ').length, 24);
  });
  test('the passage holding the most distinct terms wins', () => {
    assert.match(snippet(text, ['w10', 'w80', 'w85']), /w80 .* w85/);
  });
  test('no match in the text (a title match): the start; short texts whole', () => {
    assert.match(snippet(text, ['absent']), /^w0 w1 .*w23…$/);
    assert.equal(snippet('just this', ['this']), 'just this');
    assert.equal(snippet('', ['x']), '');
  });
});

describe('the tokenizer on the edges', () => {
  test('a long word is cut by code points, never inside a surrogate pair', () => {
    const word = `${'a'.repeat(63)}𝒜𝒜`;
    const term = fold(word);
    assert.equal(Array.from(term).length, MAX_TERM_LENGTH);
    assert.ok(term.endsWith('𝒜'), 'the pair is kept whole');
    assert.equal(term, Buffer.from(term, 'utf8').toString('utf8'), 'well-formed text');
  });
});

describe('snippets keep every word of the passage they chose', () => {
  test('a match at the far end of the passage stays in it', () => {
    const words = [
      ...Array.from({ length: 10 }, (_, i) => `a${i}`),
      'alpha',
      ...Array.from({ length: 22 }, (_, i) => `m${i}`),
      'beta',
      'tail',
    ];
    const s = snippet(words.join(' '), ['alpha', 'beta']);
    assert.match(s, /alpha/);
    assert.match(s, /beta/);
  });
});
