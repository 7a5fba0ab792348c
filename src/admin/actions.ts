// What administrators can do, once, for the JSON API and the pages alike: validation of the request shape,
// password hashing, the store call, and the audit record. Each change and its audit record commit together in
// one transaction, or neither does. Routes only translate HTTP to these calls.
import type { Database } from '../db/open.ts';
import { createUser, updateUser, removeUser, getUser, checkUid, type NewUser, type User, type UserChange } from '../store/users.ts';
import { revokeAllTokens } from '../store/tokens.ts';
import { endAllSessions } from '../store/sessions.ts';
import { endUserGrants, revokeGrant } from '../store/oauth.ts';
import { putItem, removeItem, checkItemId, type Item, type ItemInput } from '../store/items.ts';
import { registerClient, removeClient, type OauthClient } from '../store/oauth-clients.ts';
import { putItems, type MarkdownItem } from '../store/markdown-dir.ts';
import { recordActorAudit as audit, type Actor } from '../store/audit.ts';
import { hashPassword, passwordProblem } from '../auth/passwords.ts';
import { badRequest } from '../domain/errors.ts';

function optionalString(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw badRequest(`${key}: must be a string`, key);
  return v;
}

function optionalBoolean(body: Record<string, unknown>, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw badRequest(`${key}: must be true or false`, key);
  return v;
}

function optionalLabels(body: Record<string, unknown>): string | unknown[] | undefined {
  const v = body.labels;
  if (v === undefined || typeof v === 'string' || Array.isArray(v)) return v;
  throw badRequest('labels: give an ACL label string or an array of labels', 'labels');
}

async function passwordHashFrom(value: unknown): Promise<string | null> {
  if (value === null) return null;
  if (typeof value !== 'string') throw badRequest('password: must be a string, or null to remove it', 'password');
  const problem = passwordProblem(value);
  if (problem) throw badRequest(`password: ${problem}`, 'password');
  return hashPassword(value);
}

const KNOWN_USER_FIELDS = new Set(['uid', 'email', 'name', 'labels', 'admin', 'password']);

function rejectUnknown(body: Record<string, unknown>, known: Set<string>): void {
  for (const key of Object.keys(body)) if (!known.has(key)) throw badRequest(`${key}: unknown field`, key);
}

/** Body: {uid, email, name?, labels?, admin?, password?}; an empty or missing password means none (single sign-on). */
export async function adminCreateUser(database: Database, actor: Actor, body: Record<string, unknown>): Promise<User> {
  rejectUnknown(body, KNOWN_USER_FIELDS);
  const uid = checkUid(body.uid);
  const email = optionalString(body, 'email');
  if (email === undefined) throw badRequest('email: required', 'email');
  const password = body.password === '' || body.password === undefined ? null : body.password;
  const input = {
    uid,
    email,
    name: optionalString(body, 'name') ?? '',
    labels: optionalLabels(body) ?? '',
    admin: optionalBoolean(body, 'admin') ?? false,
    passwordHash: await passwordHashFrom(password),
  };
  return createUserAs(database, actor, input);
}

/** Creates a user as given (the admin API after checking its body, the CLI after reading the password). */
export function createUserAs(database: Database, actor: Actor, input: NewUser): Promise<User> {
  return database.write(async (tx) => {
    const user = await createUser(tx, input);
    await audit(tx, actor, 'user.create', user.uid, {
      email: user.email,
      labels: user.labels,
      admin: user.admin,
      password: user.hasPassword ? 'set' : 'none',
    });
    return user;
  });
}

/**
 * Body: any of {email, name, labels, admin, password}; password null removes it. A new or removed password ends
 * the user's sessions but `keepSessionId`, the browser session making the change (when it is their own).
 */
export async function adminUpdateUser(
  database: Database,
  actor: Actor,
  uid: string,
  body: Record<string, unknown>,
  keepSessionId?: string,
): Promise<User> {
  rejectUnknown(body, new Set([...KNOWN_USER_FIELDS].filter((k) => k !== 'uid')));
  const change: UserChange = {};
  const email = optionalString(body, 'email');
  const name = optionalString(body, 'name');
  const labels = optionalLabels(body);
  const admin = optionalBoolean(body, 'admin');
  if (email !== undefined) change.email = email;
  if (name !== undefined) change.name = name;
  if (labels !== undefined) change.labels = labels;
  if (admin !== undefined) change.admin = admin;
  if (body.password !== undefined) change.passwordHash = await passwordHashFrom(body.password);
  if (Object.keys(change).length === 0) return getUser(database.db, uid);
  return updateUserAs(database, actor, uid, change, keepSessionId);
}

/** Changes the given fields of a user; the audit record names them, and says only whether a password was set. */
export function updateUserAs(database: Database, actor: Actor, uid: string, change: UserChange, keepSessionId?: string): Promise<User> {
  return database.write(async (tx) => {
    const user = await updateUser(tx, uid, change, keepSessionId === undefined ? {} : { keepSessionId });
    const detail: Record<string, unknown> = {};
    if (change.email !== undefined) detail.email = user.email;
    if (change.name !== undefined) detail.name = user.name;
    if (change.labels !== undefined) detail.labels = user.labels;
    if (change.admin !== undefined) detail.admin = user.admin;
    if (change.passwordHash !== undefined) detail.password = change.passwordHash === null ? 'removed' : 'set';
    await audit(tx, actor, 'user.update', user.uid, detail);
    return user;
  });
}

export async function adminRemoveUser(database: Database, actor: Actor, uid: string): Promise<void> {
  await database.write(async (tx) => {
    await removeUser(tx, uid);
    await audit(tx, actor, 'user.remove', uid);
  });
}

export async function adminRevokeTokens(database: Database, actor: Actor, uid: string): Promise<number> {
  return database.write(async (tx) => {
    const user = await getUser(tx, uid);
    const n = await revokeAllTokens(tx, user.id);
    // The grants too: their refresh families would otherwise go on minting access tokens.
    const grants = await endUserGrants(tx, user.id);
    await audit(tx, actor, 'user.revoke_tokens', uid, { revoked: n, grants_ended: grants });
    return n;
  });
}

export async function adminEndSessions(database: Database, actor: Actor, uid: string): Promise<number> {
  return database.write(async (tx) => {
    const user = await getUser(tx, uid);
    const n = await endAllSessions(tx, user.id);
    await audit(tx, actor, 'user.end_sessions', uid, { ended: n });
    return n;
  });
}

/** Ends one of a user's OAuth grants, with its tokens; false when the user has no such grant. */
export async function adminRevokeGrant(database: Database, actor: Actor, uid: string, grantId: string): Promise<boolean> {
  return database.write(async (tx) => {
    const user = await getUser(tx, uid);
    if (!(await revokeGrant(tx, user.id, grantId))) return false;
    await audit(tx, actor, 'oauth.grant_revoke', uid, { grant: grantId });
    return true;
  });
}

/** Body: {title, text, labels?}; without labels a replaced item keeps its own, `[]` or `""` removes them. */
export async function adminPutItem(
  database: Database,
  actor: Actor,
  id: string,
  body: Record<string, unknown>,
): Promise<{ item: Item; created: boolean }> {
  rejectUnknown(body, new Set(['title', 'text', 'labels']));
  return putItemAs(database, actor, id, { title: body.title, text: body.text, labels: optionalLabels(body) });
}

/** Creates or replaces an item; labels undefined keeps a replaced item's own. */
export function putItemAs(database: Database, actor: Actor, id: string, input: ItemInput): Promise<{ item: Item; created: boolean }> {
  return database.write(async (tx) => {
    const result = await putItem(tx, checkItemId(id), input);
    await audit(tx, actor, result.created ? 'item.create' : 'item.replace', id, { labels: result.item.labels });
    return result;
  });
}

export async function adminRemoveItem(database: Database, actor: Actor, id: string): Promise<void> {
  await database.write(async (tx) => {
    await removeItem(tx, id);
    await audit(tx, actor, 'item.remove', id);
  });
}

/** Creates or replaces the documents read from a folder, in one transaction with one audit record for the folder. */
export function importItemsAs(
  database: Database,
  actor: Actor,
  dir: string,
  docs: readonly MarkdownItem[],
): Promise<{ id: string; created: boolean }[]> {
  return database.write(async (tx) => {
    const done = await putItems(tx, docs);
    await audit(tx, actor, 'item.import', dir, {
      created: done.filter((r) => r.created).length,
      replaced: done.filter((r) => !r.created).length,
    });
    return done;
  });
}

/** An OAuth client an administrator registers ahead, with a fixed id and, when `secret` is given, confidential. */
export function addStaticClient(
  database: Database,
  actor: Actor,
  client: { id?: string; name: string; redirectUris: readonly string[]; secret: string | null },
): Promise<OauthClient> {
  return database.write(async (tx) => {
    const made = await registerClient(tx, {
      ...(client.id ? { id: client.id } : {}),
      kind: 'static',
      name: client.name,
      redirectUris: client.redirectUris,
      authMethod: client.secret ? 'client_secret_basic' : 'none',
      secret: client.secret,
    });
    await audit(tx, actor, 'oauth.client_register', made.id, {
      name: client.name,
      redirect_uris: client.redirectUris,
      confidential: client.secret !== null,
    });
    return made;
  });
}

/** Forgets an OAuth client, its grants ending with their tokens; false when there is no such client. */
export function removeClientAs(database: Database, actor: Actor, id: string): Promise<boolean> {
  return database.write(async (tx) => {
    const gone = await removeClient(tx, id);
    if (gone) await audit(tx, actor, 'oauth.client_remove', id);
    return gone;
  });
}
