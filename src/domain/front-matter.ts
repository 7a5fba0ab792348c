// The optional front matter of an imported Markdown file: a block between two "---" lines at the very top with
// `title:` and `labels:`, one line each. It is read exactly or refused, never guessed: an unknown key (`Labels:`
// too), a list, a repeated key or an unclosed block is an error naming the line, so a document never loses its
// labels, and becomes readable by everyone, through a typo. A UTF-8 BOM and CRLF line ends are read as usual.
import { parseLabels, formatLabels, LabelError } from './labels.ts';

export interface MarkdownDoc {
  title: string | null;
  /** canonical label string ('' for none), or null when the front matter does not say */
  labels: string | null;
  body: string;
}

/** A problem on one line of a file's front matter (1-based). */
export class FrontMatterError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(message);
  }
}

const DELIMITER = /^---[ \t]*$/;
const KEY_VALUE = /^([^\s:]+):(?:[ \t]+(.*?))?[ \t]*$/;

export function parseMarkdown(source: string): MarkdownDoc {
  const text = source.startsWith('\uFEFF') ? source.slice(1) : source;
  const lines = text.split(/\r?\n/);
  const doc: MarkdownDoc = { title: null, labels: null, body: text };
  if (DELIMITER.test(lines[0] ?? '')) {
    const end = lines.findIndex((l, i) => i > 0 && DELIMITER.test(l));
    if (end === -1) throw new FrontMatterError(1, 'the front matter that starts here has no closing "---" line');
    for (let i = 1; i < end; i++) readLine(doc, lines[i]!, i + 1);
    doc.body = lines.slice(end + 1).join('\n');
  }
  if (doc.title === null || doc.title === '') {
    const heading = /^#\s+(.+)$/m.exec(doc.body);
    doc.title = heading ? heading[1]!.trim() : null;
  }
  return doc;
}

function readLine(doc: MarkdownDoc, line: string, number: number): void {
  if (line.trim() === '') return;
  if (/^[\s\-#]/.test(line)) {
    throw new FrontMatterError(
      number,
      'lists, nested values and comments are not read in front matter; give labels on one line, such as "labels: eng, finance"',
    );
  }
  const m = KEY_VALUE.exec(line);
  if (!m) throw new FrontMatterError(number, 'front matter lines are "title: …" or "labels: …"');
  const [, key, raw = ''] = m;
  if (key !== 'title' && key !== 'labels') {
    throw new FrontMatterError(number, `unknown key "${key}"; front matter takes only "title" and "labels", in lower case`);
  }
  if (doc[key] !== null) throw new FrontMatterError(number, `"${key}" is given twice`);
  if (key === 'title') {
    doc.title = unquote(raw);
    return;
  }
  // A one-line flow list, [eng, finance], names its labels exactly, so it is read too.
  const inner = /^\[(.*)\]$/.exec(raw)?.[1] ?? raw;
  try {
    doc.labels = formatLabels(
      parseLabels(
        inner
          .split(/[\s,]+/)
          .filter((l) => l !== '')
          .map(unquote),
      ),
    );
  } catch (e) {
    if (e instanceof LabelError) throw new FrontMatterError(number, `labels: ${e.message}`);
    throw e;
  }
}

function unquote(value: string): string {
  const q = /^(["'])(.*)\1$/.exec(value);
  return q ? q[2]! : value;
}
