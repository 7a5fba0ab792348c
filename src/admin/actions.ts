// What administrators and operators can do, once, for the JSON API, the pages and the CLI alike: password hashing,
// the store calls, and the audit record, from requests checked at the edge (requests/). Each change and its audit
// record commit together in one transaction, or neither does.
import type { Database } from '../db/open.ts';
import { createUser, updateUser, removeUser, getUser, signsInBySso, type User, type UserChange } from '../store/users.ts';
import type { NewUserRequest, UserChangeRequest } from '../requests/users.ts';
import { revokeAllTokens } from '../store/tokens.ts';
import { deleteAccountsOf, type UpstreamAccount } from '../store/upstream-accounts.ts';
import { endAllSessions } from '../store/sessions.ts';
import { endUserGrants, revokeGrant } from '../store/oauth.ts';
import { putItem, putItems, removeItem, type Item, type ItemInput } from '../store/items.ts';
import { registerClient, removeClient, type OauthClient } from '../store/oauth-clients.ts';
import type { MarkdownItem } from '../requests/markdown-dir.ts';
import { recordActorAudit as audit, type Actor } from '../store/audit.ts';
import { hashPassword } from '../auth/passwords.ts';
import { badRequest } from '../domain/errors.ts';

/** Creates a user as asked (the admin API, a page's form, the CLI), its password hashed here. */
export async function createUserAs(database: Database, actor: Actor, request: NewUserRequest): Promise<User> {
  const passwordHash = request.password === null ? null : await hashPassword(request.password);
  return database.write(async (tx) => {
    const user = await createUser(tx, { ...request, passwordHash });
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
 * Changes the fields asked; the audit record names them, and says only whether a password was set. A new or removed
 * password ends the user's sessions but `keepSessionId`, the browser session making the change (when it is their
 * own). A user of single sign-on can never have a password.
 */
export async function updateUserAs(
  database: Database,
  actor: Actor,
  uid: string,
  request: UserChangeRequest,
  keepSessionId?: string,
): Promise<User> {
  const { password, ...fields } = request;
  const change: UserChange = { ...fields };
  if (typeof password === 'string') change.passwordHash = await hashPassword(password);
  else if (password === null) change.passwordHash = null;
  if (Object.keys(change).length === 0) return getUser(database.db, uid);
  return database.write(async (tx) => {
    if (typeof change.passwordHash === 'string' && (await signsInBySso(tx, uid)))
      throw badRequest('password: this user signs in with single sign-on and cannot have a password', 'password');
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

/**
 * Removes the user; returns their accounts at `auth = oauth` upstreams, deleted with them and queued for revocation
 * at the upstreams (a running `svc serve` revokes them; the caller may at once, once this has committed).
 */
export async function adminRemoveUser(database: Database, actor: Actor, uid: string): Promise<UpstreamAccount[]> {
  return database.write(async (tx) => {
    const accounts = await deleteAccountsOf(tx, (await getUser(tx, uid)).id, database.now());
    await removeUser(tx, uid);
    await audit(
      tx,
      actor,
      'user.remove',
      uid,
      accounts.length > 0 ? { upstreams_disconnected: accounts.map((a) => a.upstream) } : undefined,
    );
    return accounts;
  });
}

/** Revokes every token of the user, ends their grants and deletes their upstream accounts (returned; queued for revocation there). */
export async function adminRevokeTokens(
  database: Database,
  actor: Actor,
  uid: string,
): Promise<{ revoked: number; upstreamAccounts: UpstreamAccount[] }> {
  return database.write(async (tx) => {
    const user = await getUser(tx, uid);
    const n = await revokeAllTokens(tx, user.id);
    // The grants too: their refresh families would otherwise go on minting access tokens.
    const grants = await endUserGrants(tx, user.id);
    const accounts = await deleteAccountsOf(tx, user.id, database.now());
    await audit(tx, actor, 'user.revoke_tokens', uid, {
      revoked: n,
      grants_ended: grants,
      ...(accounts.length > 0 ? { upstreams_disconnected: accounts.map((a) => a.upstream) } : {}),
    });
    return { revoked: n, upstreamAccounts: accounts };
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

/** Creates or replaces an item; labels undefined keeps a replaced item's own. */
export function putItemAs(database: Database, actor: Actor, id: string, input: ItemInput): Promise<{ item: Item; created: boolean }> {
  return database.write(async (tx) => {
    const result = await putItem(tx, id, input);
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
