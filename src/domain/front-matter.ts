// The optional front matter of an imported Markdown file: a block between two "---" lines at the top with
// `title:` and `labels:` (a label string, or a [bracketed, list]). Other keys are ignored.

export interface MarkdownDoc {
  title: string | null;
  labels: string | null;
  body: string;
}

export function parseMarkdown(text: string): MarkdownDoc {
  const m = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(text);
  const doc: MarkdownDoc = { title: null, labels: null, body: m ? text.slice(m[0].length) : text };
  if (m) {
    for (const line of m[1]!.split(/\r?\n/)) {
      const kv = /^(title|labels):\s*(.*)$/.exec(line);
      if (!kv) continue;
      const value = unquote(kv[2]!.trim());
      if (kv[1] === 'title') doc.title = value;
      else doc.labels = value.replace(/^\[(.*)\]$/, '$1').split(',').map((l) => unquote(l.trim())).join(',');
    }
  }
  if (doc.title === null || doc.title === '') {
    const heading = /^#\s+(.+)$/m.exec(doc.body);
    doc.title = heading ? heading[1]!.trim() : null;
  }
  return doc;
}

function unquote(value: string): string {
  const q = /^(["'])(.*)\1$/.exec(value);
  return q ? q[2]! : value;
}
