// Records for tests to put straight into the store, written as briefly as a test wants them (a label string, a ttl
// like '1h') and made into the typed values the store takes, by the same readers svc's requests use.
import { parseLabels } from '../../src/domain/labels.ts';
import { tokenRequest } from '../../src/requests/tokens.ts';
import { itemRequest } from '../../src/requests/items.ts';
import type { NewUser, UserChange } from '../../src/store/users.ts';
import type { NewToken } from '../../src/store/tokens.ts';
import type { ItemInput } from '../../src/store/items.ts';

export interface TestUser {
  uid: string;
  email: string;
  name?: string;
  /** an ACL label string or a list */
  labels?: string | readonly string[];
  admin?: boolean;
  passwordHash?: string | null;
}

export function userRecord(u: TestUser): NewUser {
  return {
    uid: u.uid,
    email: u.email,
    name: u.name ?? '',
    labels: parseLabels(u.labels ?? ''),
    admin: u.admin ?? false,
    passwordHash: u.passwordHash ?? null,
  };
}

/** A personal token named `name`; `ttl` a duration or undefined, `labels` a restriction, `scopes` as on the CLI. */
export function tokenRecord(name: string, ttl?: string, labels: string | readonly string[] | null = null, scopes?: string): NewToken {
  return tokenRequest({ name, ttl, labels, scopes });
}

/** A document; `labels` undefined keeps a replaced one's own. */
export function itemRecord(item: { title: string; text: string; labels?: string | readonly string[] }): ItemInput {
  return itemRequest(item);
}

/** A change of a user, with labels as a label string or a list. */
export function changeRecord(change: Omit<UserChange, 'labels'> & { labels?: string | readonly string[] }): UserChange {
  const { labels, ...rest } = change;
  return { ...rest, ...(labels === undefined ? {} : { labels: parseLabels(labels) }) };
}
