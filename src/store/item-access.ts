// Who can see what, for administrators: every answer here comes from visibleSql, the same condition the MCP tools
// use, applied in the other direction (users and tokens for an item) or for another user; never a second copy of
// the rule.
import { and, asc, eq, gt, isNotNull, isNull, or, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/open.ts';
import { items, tokens, users } from '../db/schema.ts';
import { storedLabels, type LabelSet } from '../domain/labels.ts';
import { accessSql, storedLabelsJson, visibleSql, type Access } from '../domain/visibility.ts';
import { toUser, type User } from './users.ts';

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
  readonly labels: LabelSet;
}

/** The users who can see an item, and, apart, the active label-restricted tokens that can. */
export async function readersOf(
  db: Db,
  itemId: string,
  now = Date.now(),
): Promise<{ users: User[]; restrictedTokens: RestrictedTokenReader[] } | null> {
  const item = await db.select({ seq: items.seq }).from(items).where(eq(items.id, itemId)).get();
  if (!item) return null;
  const seq = sql`${item.seq}`;
  const readers = await db
    .select()
    .from(users)
    .where(visibleSql(seq, storedLabelsJson(users.labels)))
    .orderBy(asc(users.uid))
    .all();
  const restricted = await db
    .select({ tokenId: tokens.id, name: tokens.name, owner: users.uid, labels: tokens.labels })
    .from(tokens)
    .innerJoin(users, eq(users.id, tokens.userId))
    .where(
      and(
        isNotNull(tokens.labels),
        isNull(tokens.revokedAt),
        or(isNull(tokens.expiresAt), gt(tokens.expiresAt, now)),
        visibleSql(seq, storedLabelsJson(users.labels), storedLabelsJson(tokens.labels)),
      ),
    )
    .orderBy(asc(users.uid), asc(tokens.name))
    .all();
  return {
    users: readers.map(toUser),
    restrictedTokens: restricted.map((t) => ({ tokenId: t.tokenId, name: t.name, owner: t.owner, labels: storedLabels(t.labels ?? '') })),
  };
}

/** How many items this access can see. */
export async function countVisible(db: Db, access: Access): Promise<number> {
  return (await db.select({ n: sql<number>`count(*)` }).from(items).where(accessSql(items.seq, access)).get())!.n;
}
