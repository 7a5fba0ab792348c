// User records. Input is validated here, once, for every caller (CLI, admin API, single sign-on).
import { eq, sql, asc, and, isNull, gt, or, ne } from 'drizzle-orm';
import type { Db, Tx } from '../db/open.ts';
import { users, identities, tokens, sessions } from '../db/schema.ts';
import { storedHash } from '../domain/secrets.ts';
import { parseLabels, formatLabels, storedLabels, LabelError, type LabelSet } from '../domain/labels.ts';
import { uidProblem, emailProblem } from '../domain/uid.ts';
import { hasUnseen } from '../domain/display-text.ts';
import { AppError, badRequest, conflict, notFound } from '../domain/errors.ts';

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

export interface NewUser {
  uid: string;
  email: string;
  name?: string;
  labels?: string | readonly unknown[];
  admin?: boolean;
  passwordHash?: string | null;
}

export interface UserChange {
  email?: string;
  name?: string;
  labels?: string | readonly unknown[];
  admin?: boolean;
  /** a PHC string, or null to remove the password */
  passwordHash?: string | null;
}

export const NAME_MAX = 200;

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

export function checkLabels(input: string | readonly unknown[] | undefined, field = 'labels'): LabelSet {
  if (input !== undefined && typeof input !== 'string' && !Array.isArray(input)) {
    throw badRequest('labels: give an ACL label string or an array of labels', field);
  }
  try {
    return parseLabels(input);
  } catch (e) {
    if (e instanceof LabelError) throw badRequest(`${field}: ${e.message}`, field);
    throw e;
  }
}

function checkEmail(email: unknown): string {
  if (typeof email !== 'string') throw badRequest('email: required', 'email');
  const trimmed = email.trim();
  const problem = emailProblem(trimmed);
  if (problem) throw badRequest(`email: ${problem}`, 'email');
  return trimmed;
}

function checkName(name: unknown): string {
  if (typeof name !== 'string') throw badRequest('name: must be text', 'name');
  const trimmed = name.trim();
  if (trimmed.length > NAME_MAX || hasUnseen(trimmed)) {
    throw badRequest(`name: at most ${NAME_MAX} characters, no control, invisible or bidirectional-formatting characters`, 'name');
  }
  return trimmed;
}

export function checkUid(uid: unknown): string {
  if (typeof uid !== 'string') throw badRequest('uid: required', 'uid');
  const problem = uidProblem(uid);
  if (problem) throw badRequest(`uid: ${problem}`, 'uid');
  return uid;
}

/** Creates a user; a uid that exists or existed once is a conflict. */
export async function createUser(tx: Tx, input: NewUser, now = Date.now()): Promise<User> {
  const uid = checkUid(input.uid);
  const values = {
    uid,
    email: checkEmail(input.email),
    name: checkName(input.name ?? ''),
    labels: formatLabels(checkLabels(input.labels)),
    admin: input.admin ?? false,
    passwordHash: input.passwordHash ?? null,
    createdAt: now,
    updatedAt: now,
  };
  try {
    const rows = await tx.insert(users).values(values).returning();
    return toUser(rows[0]!);
  } catch (e) {
    if (isUidTaken(e)) throw conflict(`uid: "${uid}" is taken or was used before (uids are never reused)`, 'uid');
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

function isUidTaken(e: unknown): boolean {
  const text = String((e as { message?: unknown })?.message ?? '') + String((e as { cause?: { message?: unknown } })?.cause?.message ?? '');
  return /svc: uid reserved|UNIQUE constraint failed: (users\.uid|uids\.uid)/.test(text);
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
  if (change.email !== undefined) set.email = checkEmail(change.email);
  if (change.name !== undefined) set.name = checkName(change.name);
  if (change.labels !== undefined) set.labels = formatLabels(checkLabels(change.labels));
  if (change.admin !== undefined) set.admin = change.admin;
  if (change.passwordHash !== undefined) set.passwordHash = change.passwordHash;
  if (typeof change.passwordHash === 'string') {
    const target = await tx.select({ sso: hasSsoIdentity }).from(users).where(eq(users.uid, uid)).get();
    if (target?.sso) throw badRequest('password: this user signs in with single sign-on and cannot have a password', 'password');
  }
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
