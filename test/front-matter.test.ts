// Front matter is read exactly or refused: the ways a document could silently lose its labels.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { parseMarkdown, FrontMatterError } from '../src/domain/front-matter.ts';

const refused = (text: string, line: number, message: RegExp) => {
  assert.throws(
    () => parseMarkdown(text),
    (e) => e instanceof FrontMatterError && e.line === line && message.test(e.message),
    JSON.stringify(text),
  );
};

describe('front matter', () => {
  test('read exactly: plain, CRLF, a BOM, trailing spaces on the delimiters, a one-line list, quotes', () => {
    for (const text of [
      '---\ntitle: Plan\nlabels: board, finance\n---\nbody',
      '---\r\ntitle: Plan\r\nlabels: board, finance\r\n---\r\nbody',
      '\uFEFF---\ntitle: Plan\nlabels: board finance\n---\nbody',
      '--- \ntitle: Plan\nlabels: board,finance\n---\t\nbody',
      '---\ntitle: "Plan"\nlabels: [board, "finance"]\n---\nbody',
    ]) {
      const doc = parseMarkdown(text);
      assert.deepEqual(
        { title: doc.title, labels: doc.labels, body: doc.body },
        { title: 'Plan', labels: 'board,finance', body: 'body' },
        JSON.stringify(text),
      );
    }
  });

  test('no front matter: the document has no labels, its title comes from its heading', () => {
    assert.deepEqual(parseMarkdown('# Hello\ntext'), { title: 'Hello', labels: null, body: '# Hello\ntext' });
  });

  test('refused, naming the line: block lists, other keys and cases, repeats, comments, an unclosed block, bad labels', () => {
    refused('---\ntitle: Plan\nlabels:\n  - board\n---\nbody', 4, /lists, nested values/);
    refused('---\nlabels:\n- board\n---\n', 3, /lists/);
    refused('---\nLabels: board\n---\n', 2, /unknown key "Labels"/);
    refused('---\ntitle: a\nauthor: b\n---\n', 3, /unknown key "author"/);
    refused('---\nlabels: board\nlabels: eng\n---\n', 3, /"labels" is given twice/);
    refused('---\n# labels: board\n---\n', 2, /comments/);
    refused('---\ntitle: Plan\nlabels: board\n', 1, /no closing "---"/);
    refused('---\nlabels: Board\n---\n', 2, /labels: invalid label "Board"/);
    refused('---\nlabels board\n---\n', 2, /"title: …" or "labels: …"/);
  });
});
