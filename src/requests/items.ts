// Documents as administrators, the CLI and the admin page ask for them: an id, and `{title, text, labels?}`. Checked
// here into what the item actions take. Labels left out (undefined) mean "as they are" for a replaced document;
// an empty string or list means none.
import { basename } from 'node:path';
import { badRequest } from '../domain/errors.ts';
import { formatLabels } from '../domain/labels.ts';
import { parseMarkdown, FrontMatterError } from '../domain/front-matter.ts';
import { ITEM_ID_MAX, isItemId } from '../domain/item-id.ts';
import type { ItemInput } from '../store/items.ts';
import { labelsField, rejectUnknown, type Body } from './fields.ts';

export const TITLE_MAX = 500;
export const TEXT_MAX = 1024 * 1024;

export function checkItemId(id: unknown): string {
  if (typeof id !== 'string' || !isItemId(id)) {
    throw badRequest(`id: an item id is a relative path of letters, digits, . _ - and / (at most ${ITEM_ID_MAX} characters)`, 'id');
  }
  return id;
}

/** A document's fields; `labels` undefined when the request does not state them. */
export function itemRequest(input: { title: unknown; text: unknown; labels?: unknown }): ItemInput {
  if (typeof input.title !== 'string' || input.title.trim() === '' || input.title.length > TITLE_MAX) {
    throw badRequest(`title: required, at most ${TITLE_MAX} characters`, 'title');
  }
  if (typeof input.text !== 'string' || input.text.length > TEXT_MAX) {
    throw badRequest(`text: required, at most ${TEXT_MAX} characters`, 'text');
  }
  return {
    title: input.title.trim(),
    text: input.text,
    ...(input.labels === undefined ? {} : { labels: labelsField(input.labels) }),
  };
}

/** The admin API's body: `{title, text, labels?}` and nothing else. */
export function itemBody(body: Body): ItemInput {
  rejectUnknown(body, ['title', 'text', 'labels']);
  return itemRequest(body as { title: unknown; text: unknown; labels?: unknown });
}

/** An item as the admin form holds it: labels undefined when neither the form nor the file states them. */
export interface FormItem {
  id: string;
  title: string;
  text: string;
  labels: string | undefined;
}

/**
 * The item a form describes: a file's front matter and body, with the form's fields filling what it leaves out.
 * Labels are stated by a non-empty labels field or a file's `labels:` line (empty there means none); the
 * confirmation of a replacement carries the decision it showed in `labels_action`.
 */
export async function itemFromUpload(body: Record<string, unknown>): Promise<FormItem> {
  const field = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : '');
  const file = body.file instanceof File && body.file.size > 0 ? body.file : null;
  let id = field('id').trim();
  let title = field('title').trim();
  const action = field('labels_action');
  let labels: string | undefined =
    action === 'set' ? field('labels') : action === 'keep' || field('labels').trim() === '' ? undefined : field('labels');
  // The confirmation sends the text back encoded: a browser would turn its line ends into CRLF.
  let text = body.text_b64 === undefined ? field('text') : Buffer.from(field('text_b64'), 'base64').toString('utf8');
  if (file) {
    let doc: ReturnType<typeof parseMarkdown>;
    try {
      doc = parseMarkdown(await file.text());
    } catch (e) {
      if (e instanceof FrontMatterError) throw badRequest(`${file.name}:${e.line}: ${e.message}`, 'file');
      throw e;
    }
    if (doc.labels !== null && labels !== undefined && formatLabels(labelsField(labels)) !== doc.labels) {
      throw badRequest(
        `labels: the file says "${doc.labels || '(none)'}" and the form says "${labels.trim()}"; give them in one place`,
        'labels',
      );
    }
    if (doc.labels !== null) labels = doc.labels;
    id ||= basename(file.name).replace(/\.md$/i, '');
    title ||= doc.title ?? '';
    text = doc.body;
  }
  if (title === '') title = basename(id);
  return { id, title, text, labels: labels === undefined ? undefined : formatLabels(labelsField(labels)) };
}
