// Who can see what, for administrators: every answer here comes from visibleSql, the same condition the MCP tools
// use, applied in the other direction (users and tokens for an item) or for another user; never a second copy of
// the rule.
import { and, asc, count, eq, gt, isNotNull, isNull, or, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/open.ts';
import { items, tokens, users } from '../db/schema.ts';
import { storedLabels, type LabelSet } from '../domain/labels.ts';
import type { Access } from '../domain/visibility.ts';
import { accessSql, storedLabelsJson, visibleSql } from './visibility-sql.ts';
import { toUser, type User } from './users.ts';
import { pageOf, window, type Page, type PageRequest } from './paging.ts';

/** How many users can see the item with this seq. */
const readerCount = (itemSeq: SQL) =>
  sql<number>`(SELECT count(*) FROM users u WHERE ${visibleSql(itemSeq, storedLabelsJson(sql`u.labels`))})`;

export interface ItemRow {
  readonly id: string;
  readonly title: string;
  readonly labels: LabelSet;
  readonly readers: number;
}

export const ITEM_PAGE = 50;

/** One page of all items, by id, with how many users can see each; `query` matches id or title, `label` filters. */
export async function listItemsWithReaders(
  db: Db,
  options: { query?: string; label?: string; page?: number },
): Promise<{ items: ItemRow[]; total: number }> {
  const conditions: SQL[] = [];
  const q = options.query?.trim();
  if (q) conditions.push(sql`(instr(lower(${items.id}), lower(${q})) > 0 OR instr(lower(${items.title}), lower(${q})) > 0)`);
  if (options.label)
    conditions.push(sql`EXISTS (SELECT 1 FROM item_labels il WHERE il.item_seq = ${items.seq} AND il.label = ${options.label})`);
  const where = conditions.length === 0 ? undefined : and(...conditions);
  const total = (await db.select({ n: sql<number>`count(*)` }).from(items).where(where).get())!.n;
  const page = Math.max(1, options.page ?? 1);
  const rows = await db
    .select({ id: items.id, title: items.title, labels: items.labels, readers: readerCount(sql`${items.seq}`) })
    .from(items)
    .where(where)
    .orderBy(asc(items.id))
    .limit(ITEM_PAGE)
    .offset((page - 1) * ITEM_PAGE)
    .all();
  return { items: rows.map((r) => ({ id: r.id, title: r.title, labels: storedLabels(r.labels), readers: r.readers })), total };
}

export interface RestrictedTokenReader {
  readonly tokenId: string;
  readonly name: string;
  readonly owner: string;
  readonly restriction: LabelSet;
}

export interface Readers {
  /** one page of the users who can see the item, by uid, and how many there are in all */
  readonly users: Page<User> & { readonly total: number };
  /** one page of the active label-restricted tokens that can, and how many there are in all */
  readonly restrictedTokens: Page<RestrictedTokenReader> & { readonly total: number };
}

/** The users who can see an item, and, apart, the active label-restricted tokens that can: a page of each. */
export async function readersOf(
  db: Db,
  itemId: string,
  pages: { users: PageRequest; tokens: PageRequest },
  now = Date.now(),
): Promise<Readers | null> {
  const item = await db.select({ seq: items.seq }).from(items).where(eq(items.id, itemId)).get();
  if (!item) return null;
  const seq = sql`${item.seq}`;
  const canRead = visibleSql(seq, storedLabelsJson(users.labels));
  const userWindow = window(pages.users);
  const readers = await db
    .select()
    .from(users)
    .where(canRead)
    .orderBy(asc(users.uid))
    .limit(userWindow.limit)
    .offset(userWindow.offset)
    .all();
  const userTotal = (await db.select({ n: count() }).from(users).where(canRead).get())?.n ?? 0;
  const tokenCanRead = and(
    isNotNull(tokens.labels),
    isNull(tokens.revokedAt),
    or(isNull(tokens.expiresAt), gt(tokens.expiresAt, now)),
    visibleSql(seq, storedLabelsJson(users.labels), storedLabelsJson(tokens.labels)),
  );
  const tokenWindow = window(pages.tokens);
  const restricted = await db
    .select({ tokenId: tokens.id, name: tokens.name, owner: users.uid, labels: tokens.labels })
    .from(tokens)
    .innerJoin(users, eq(users.id, tokens.userId))
    .where(tokenCanRead)
    .orderBy(asc(users.uid), asc(tokens.name), asc(tokens.id))
    .limit(tokenWindow.limit)
    .offset(tokenWindow.offset)
    .all();
  const tokenTotal =
    (await db.select({ n: count() }).from(tokens).innerJoin(users, eq(users.id, tokens.userId)).where(tokenCanRead).get())?.n ?? 0;
  return {
    users: { ...pageOf(readers.map(toUser), pages.users), total: userTotal },
    restrictedTokens: {
      ...pageOf(
        restricted.map((t) => ({ tokenId: t.tokenId, name: t.name, owner: t.owner, restriction: storedLabels(t.labels ?? '') })),
        pages.tokens,
      ),
      total: tokenTotal,
    },
  };
}

/** How many items this access can see. */
export async function countVisible(db: Db, access: Access): Promise<number> {
  return (await db.select({ n: sql<number>`count(*)` }).from(items).where(accessSql(items.seq, access)).get())!.n;
}
