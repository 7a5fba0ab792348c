// Single sign-on identities: (provider, subject) -> user.
import { and, eq, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { identities, users } from '../db/schema.ts';
import { toUser, type User } from './users.ts';

export async function userBySubject(db: Db, provider: string, subject: string): Promise<User | null> {
  const row = await db
    .select({ u: users })
    .from(identities)
    .innerJoin(users, eq(users.id, identities.userId))
    .where(and(eq(identities.provider, provider), eq(identities.subject, subject)))
    .get();
  return row ? toUser(row.u) : null;
}

/** Links a subject to a user; false when the subject is linked already (someone else won a race). */
export async function linkIdentity(tx: Tx, provider: string, subject: string, userId: number, now = Date.now()): Promise<boolean> {
  const rows = await tx
    .insert(identities)
    .values({ provider, subject, userId, createdAt: now })
    .onConflictDoNothing()
    .returning({ userId: identities.userId });
  return rows.length === 1;
}

export async function hasIdentity(db: Db, userId: number): Promise<boolean> {
  const row = await db.select({ one: sql<number>`1` }).from(identities).where(eq(identities.userId, userId)).get();
  return row !== undefined;
}
