// User records, as checked input makes them (requests/users.ts for the admin API and the CLI, provisioning for single
// sign-on). A uid is unique regardless of letter case and never reused; svc keeps at least one admin.
import { eq, sql, asc, and, isNull, gt, or, ne } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { users, identities, tokens, sessions } from '../db/schema.ts';
import { storedHash } from '../domain/secrets.ts';
import { formatLabels, storedLabels, type LabelSet } from '../domain/labels.ts';
import { AppError, conflict, notFound } from '../domain/errors.ts';
import { uidTaken } from '../db/errors.ts';

export interface User {
  readonly id: number;
  readonly uid: string;
  readonly email: string;
  readonly name: string;
  readonly labels: LabelSet;
  readonly admin: boolean;
  readonly hasPassword: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** A user to create, checked already (requests/users.ts, or single sign-on's provisioning). */
export interface NewUser {
  readonly uid: string;
  readonly email: string;
  readonly name: string;
  readonly labels: LabelSet;
  readonly admin: boolean;
  /** a PHC string, or null: no password (single sign-on only) */
  readonly passwordHash: string | null;
}

/** The fields of a user to change, checked already; the others stay. */
export interface UserChange {
  email?: string;
  name?: string;
  labels?: LabelSet;
  admin?: boolean;
  /** a PHC string, or null to remove the password */
  passwordHash?: string | null;
}

type Row = typeof users.$inferSelect;

export function toUser(row: Row): User {
  return {
    id: row.id,
    uid: row.uid,
    email: row.email,
    name: row.name,
    labels: storedLabels(row.labels),
    admin: row.admin,
    hasPassword: row.passwordHash !== null,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/** Creates a user; a uid that exists or existed once is a conflict. */
export async function createUser(tx: Tx, input: NewUser, now = Date.now()): Promise<User> {
  const uid = input.uid;
  const values = {
    uid,
    email: input.email,
    name: input.name,
    labels: formatLabels(input.labels),
    admin: input.admin,
    passwordHash: input.passwordHash,
    createdAt: now,
    updatedAt: now,
  };
  try {
    const rows = await tx.insert(users).values(values).returning();
    return toUser(rows[0]!);
  } catch (e) {
    if (uidTaken(e)) throw conflict(`uid: "${uid}" is taken or was used before (uids are never reused)`, 'uid');
    throw e;
  }
}

/** Creates a user under the first free uid of `candidates` (single sign-on: base, base-2, …). */
export async function createUserWithFreeUid(tx: Tx, candidates: Iterable<string>, input: Omit<NewUser, 'uid'>): Promise<User> {
  let tries = 0;
  for (const uid of candidates) {
    if (++tries > 1000) break;
    try {
      return await createUser(tx, { ...input, uid });
    } catch (e) {
      if (!(e instanceof AppError && e.code === 'conflict')) throw e;
    }
  }
  throw conflict('no free uid could be derived for this user');
}

/**
 * The user with this uid, in any letter case: uids are unique regardless of case. Users made before that rule
 * whose uids differ only by case are found by their exact spelling alone.
 */
export async function findUser(db: Db, uid: string): Promise<User | null> {
  const rows = await db.select().from(users).where(sql`${users.uid} = ${uid} COLLATE NOCASE`).limit(8).all();
  const row = rows.find((r) => r.uid === uid) ?? (rows.length === 1 ? rows[0] : undefined);
  return row ? toUser(row) : null;
}

export async function getUser(db: Db, uid: string): Promise<User> {
  const user = await findUser(db, uid);
  if (!user) throw notFound(`no user "${uid}"`);
  return user;
}

const hasSsoIdentity = sql<number>`EXISTS (SELECT 1 FROM identities WHERE identities.user_id = ${users.id})`;

/** Whether the user signs in through single sign-on (a linked identity): such a user can never have a password. */
export async function signsInBySso(db: Db, uid: string): Promise<boolean> {
  const found = await findUser(db, uid);
  if (!found) throw notFound(`no user "${uid}"`);
  const row = await db.select({ sso: hasSsoIdentity }).from(users).where(eq(users.id, found.id)).get();
  return Boolean(row?.sso);
}

/**
 * The stored hash for the password form. A user linked to a single sign-on identity has none, whatever the
 * column holds: such users never sign in by password.
 */
export async function passwordHashOf(db: Db, uid: string): Promise<{ user: User; hash: string | null } | null> {
  const found = await findUser(db, uid);
  if (!found) return null;
  const row = await db.select({ hash: users.passwordHash, sso: hasSsoIdentity }).from(users).where(eq(users.id, found.id)).get();
  return row ? { user: found, hash: row.sso ? null : row.hash } : null;
}

/** Pre-provisioned: no password and no single sign-on identity yet, so single sign-on may take the user over. */
const unclaimed = sql`${users.passwordHash} IS NULL AND NOT EXISTS (SELECT 1 FROM identities WHERE identities.user_id = ${users.id})`;

/** Whether this user is still pre-provisioned (see `unclaimed`). */
export async function isUnclaimed(db: Db, userId: number): Promise<boolean> {
  return Boolean(
    await db
      .select({ id: users.id })
      .from(users)
      .where(and(eq(users.id, userId), unclaimed))
      .get(),
  );
}

/** Up to two pre-provisioned users with exactly this email: the caller links only when there is one. */
export async function unclaimedByEmail(db: Db, email: string): Promise<User[]> {
  const rows = await db
    .select()
    .from(users)
    .where(and(eq(users.email, email), unclaimed))
    .limit(2)
    .all();
  return rows.map(toUser);
}

/** Stores a fresh hash of the same password (new parameters at login): nothing else changes. */
export async function rehashPassword(tx: Tx, userId: number, hash: string): Promise<void> {
  await tx.update(users).set({ passwordHash: hash }).where(eq(users.id, userId));
}

export async function listUsers(db: Db): Promise<User[]> {
  const rows = await db.select().from(users).orderBy(asc(users.uid)).all();
  return rows.map(toUser);
}

// Once svc has an admin it keeps one: a statement that would demote or remove the last admin changes nothing.
// The condition sits inside the same statement, and SQLite runs writers one at a time, so two admins demoting
// each other at once cannot both succeed.
const anotherAdminExists = (uid: string) => sql`(SELECT count(*) FROM users AS other WHERE other.admin = 1 AND other.uid <> ${uid}) > 0`;
const LAST_ADMIN = 'the last admin cannot be removed or lose the admin flag; make another user admin first';

/**
 * Applies a change in one UPDATE, so concurrent changes of different fields both land. A new or removed password
 * ends the user's sessions, except `keepSessionId` (the browser that made the change); tokens stay, as on GitHub.
 */
export async function updateUser(
  tx: Tx,
  uidGiven: string,
  change: UserChange,
  options: { keepSessionId?: string; now?: number } = {},
): Promise<User> {
  const uid = (await findUser(tx, uidGiven))?.uid;
  if (uid === undefined) throw notFound(`no user "${uidGiven}"`);
  const set: Partial<typeof users.$inferInsert> = { updatedAt: options.now ?? Date.now() };
  if (change.email !== undefined) set.email = change.email;
  if (change.name !== undefined) set.name = change.name;
  if (change.labels !== undefined) set.labels = formatLabels(change.labels);
  if (change.admin !== undefined) set.admin = change.admin;
  if (change.passwordHash !== undefined) set.passwordHash = change.passwordHash;
  const keepsAnAdmin = change.admin === false ? or(eq(users.admin, false), anotherAdminExists(uid)) : undefined;
  const rows = await tx
    .update(users)
    .set(set)
    .where(and(eq(users.uid, uid), keepsAnAdmin))
    .returning();
  if (rows.length === 0) throw conflict(LAST_ADMIN, 'admin');
  const user = toUser(rows[0]!);
  if (change.passwordHash !== undefined) {
    const keep = options.keepSessionId === undefined ? sql`1` : ne(sessions.id, storedHash(options.keepSessionId));
    await tx.delete(sessions).where(and(eq(sessions.userId, user.id), keep));
  }
  return user;
}

/** Removes a user; triggers end their sessions and tokens, and the uid stays reserved. */
export async function removeUser(tx: Tx, uidGiven: string): Promise<void> {
  const uid = (await findUser(tx, uidGiven))?.uid;
  if (uid === undefined) throw notFound(`no user "${uidGiven}"`);
  const rows = await tx
    .delete(users)
    .where(and(eq(users.uid, uid), or(eq(users.admin, false), anotherAdminExists(uid))))
    .returning({ id: users.id });
  if (rows.length === 0) throw conflict(LAST_ADMIN, 'uid');
}

export interface SignInSummary {
  /** 'oidc:<issuer>' and/or 'header' for linked single sign-on identities */
  readonly providers: readonly string[];
  readonly activeTokens: number;
}

/** How each user signs in and how many active tokens they hold, for the admin pages. */
export async function signInSummaries(db: Db, now = Date.now()): Promise<Map<number, SignInSummary>> {
  const ids = await db.select({ userId: identities.userId, provider: identities.provider }).from(identities).all();
  const counts = await db
    .select({ userId: tokens.userId, n: sql<number>`count(*)` })
    .from(tokens)
    .where(and(isNull(tokens.revokedAt), or(isNull(tokens.expiresAt), gt(tokens.expiresAt, now))))
    .groupBy(tokens.userId)
    .all();
  const out = new Map<number, { providers: string[]; activeTokens: number }>();
  const entry = (id: number) => {
    let e = out.get(id);
    if (!e) {
      e = { providers: [], activeTokens: 0 };
      out.set(id, e);
    }
    return e;
  };
  for (const i of ids) entry(i.userId).providers.push(i.provider);
  for (const c of counts) entry(c.userId).activeTokens = c.n;
  return out;
}
