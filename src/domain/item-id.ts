// Item ids are relative paths: segments of letters, digits, . _ - separated by /, no empty, "." or ".." segment.

const ITEM_ID = /^(?!.*(?:^|\/)\.{1,2}(?:\/|$))[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/;
export const ITEM_ID_MAX = 256;

export function isItemId(id: string): boolean {
  return id.length <= ITEM_ID_MAX && ITEM_ID.test(id);
}
