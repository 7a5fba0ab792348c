// Login sessions: a row per session, keyed by SHA-256 of the random id the signed cookie carries.
import { eq, and, gt, lt, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { sessions, users } from '../db/schema.ts';
import { randomId, storedHash } from '../domain/secrets.ts';
import { toUser, type User } from './users.ts';

/** Starts a session and returns its secret id (the cookie carries it, signed). */
export async function createSession(tx: Tx, userId: number, ttlSeconds: number, now = Date.now()): Promise<string> {
  const id = randomId(20);
  await tx.insert(sessions).values({ id: storedHash(id), userId, createdAt: now, expiresAt: now + ttlSeconds * 1000 });
  // Expired rows are useless; clearing them here keeps the table small without a timer.
  await tx.delete(sessions).where(lt(sessions.expiresAt, now));
  return id;
}

function prepareLookup(db: Db) {
  return db
    .select({ u: users })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(and(eq(sessions.id, sql.placeholder('id')), gt(sessions.expiresAt, sql.placeholder('now'))))
    .prepare();
}
const lookups = new WeakMap<Db, ReturnType<typeof prepareLookup>>();

export async function sessionUser(db: Db, id: string, now = Date.now()): Promise<User | null> {
  let lookup = lookups.get(db);
  if (!lookup) {
    lookup = prepareLookup(db);
    lookups.set(db, lookup);
  }
  const row = await lookup.get({ id: storedHash(id), now });
  return row ? toUser(row.u) : null;
}

export async function endSession(tx: Tx, id: string): Promise<void> {
  await tx.delete(sessions).where(eq(sessions.id, storedHash(id)));
}

export async function endAllSessions(tx: Tx, userId: number): Promise<number> {
  const rows = await tx.delete(sessions).where(eq(sessions.userId, userId)).returning({ userId: sessions.userId });
  return rows.length;
}
