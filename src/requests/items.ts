// Documents as administrators, the CLI and the admin page ask for them: an id, and `{title, text, labels?}`. Checked
// here into what the item actions take. Labels left out (undefined) mean "as they are" for a replaced document;
// an empty string or list means none.
import { badRequest } from '../domain/errors.ts';
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
