// Items from a folder of Markdown files (svc item import, and the quickstart's examples). Every file is read and
// checked before anything is written (the action writes all of them in one transaction), so one bad file leaves the
// database untouched.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep, basename } from 'node:path';
import { parseMarkdown, FrontMatterError } from '../domain/front-matter.ts';
import { AppError } from '../domain/errors.ts';
import type { ItemInput } from '../store/items.ts';
import { checkItemId, itemRequest } from './items.ts';

function markdownFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...markdownFiles(path));
    else if (entry.isFile() && entry.name.endsWith('.md')) out.push(path);
  }
  return out.sort();
}

export interface MarkdownItem {
  readonly id: string;
  readonly input: ItemInput;
}

/**
 * Reads and checks every *.md under dir; the id is the relative path without .md. Writes nothing. Every bad file
 * is reported, one a line, naming the file and the line.
 */
export function readMarkdownDir(dir: string): MarkdownItem[] {
  const problems: string[] = [];
  const items: MarkdownItem[] = [];
  for (const file of markdownFiles(dir)) {
    const id = relative(dir, file).slice(0, -'.md'.length).split(sep).join('/');
    try {
      const doc = parseMarkdown(readFileSync(file, 'utf8'));
      // No labels: line is not an empty one: a replaced item keeps what it has.
      checkItemId(id);
      const input = itemRequest({
        title: doc.title ?? basename(id),
        text: doc.body,
        ...(doc.labels === null ? {} : { labels: doc.labels }),
      });
      items.push({ id, input });
    } catch (e) {
      if (e instanceof FrontMatterError) problems.push(`${file}:${e.line}: ${e.message}`);
      else if (e instanceof AppError) problems.push(`${file}: ${e.message}`);
      else throw e;
    }
  }
  if (problems.length > 0) throw new AppError('bad_request', `nothing was imported; fix these files first:\n${problems.join('\n')}`);
  return items;
}
