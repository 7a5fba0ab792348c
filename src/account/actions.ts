// What a person does with their own account, once, for the routes and the CLI alike: sign in (by password or
// single sign-on) and out, and mint, restrict and revoke their tokens and connected apps. Each change commits
// with its audit record in one transaction, or neither does. Routes only translate HTTP to these calls; what an
// administrator does to other accounts is in admin/actions.ts.
import type { Database } from '../db/open.ts';
import { iso } from '../domain/clock.ts';
import { getUser, passwordHashOf, rehashPassword, type User } from '../store/users.ts';
import { createSession, endSession } from '../store/sessions.ts';
import { startFlow, takeFlow, type Flow } from '../store/oidc-flows.ts';
import { reserveAttempt, releaseAttempt, ACCOUNT_LIMIT, ADDRESS_LIMIT } from '../store/throttle.ts';
import {
  createToken,
  personalTokenScopes,
  revokeToken,
  setRestriction,
  type CreatedToken,
  type NewToken,
  type TokenInfo,
} from '../store/tokens.ts';
import { checkHeldByOwner, restrictionDigest } from '../domain/restriction.ts';
import { checkScopesFor } from '../domain/scopes.ts';
import type { LabelSet } from '../domain/labels.ts';
import { revokeGrant } from '../store/oauth.ts';
import { recordAudit, recordActorAudit, type Actor } from '../store/audit.ts';
import { verifyPassword, dummyHash, needsRehash, hashPassword } from '../auth/passwords.ts';
import { PASSWORD_MAX } from '../domain/passwords.ts';
import { provisionIn, type Arrival, type Policy } from '../auth/provisioning.ts';
import { limitAddress } from '../domain/addresses.ts';
import { AppError } from '../domain/errors.ts';

export type PasswordSignIn =
  | { readonly outcome: 'ok'; readonly user: User; readonly sessionId: string }
  | { readonly outcome: 'failed' }
  | { readonly outcome: 'throttled'; readonly retryAfter: number };

/**
 * A password sign-in. The attempt is counted before the password is checked, so parallel guesses cannot all be
 * checked; an unknown user, a user without a password and a wrong password cost and read the same. A refusal is a
 * result here, not a throw: the counted attempt and the failure's audit row must commit (docs/architecture.md).
 */
export async function signInWithPassword(
  database: Database,
  attempt: { readonly username: string; readonly password: string; readonly peer: string; readonly sessionSeconds: number },
): Promise<PasswordSignIn> {
  const { username, password, peer } = attempt;
  const accountKey = `account:${username.toLowerCase()}`;
  const reserved = await database.write((tx) =>
    reserveAttempt(
      tx,
      [
        [accountKey, ACCOUNT_LIMIT],
        [`address:${limitAddress(peer)}`, ADDRESS_LIMIT],
      ],
      database.now(),
    ),
  );
  if (!reserved.ok) return { outcome: 'throttled', retryAfter: reserved.retryAfter };

  const found = password.length <= PASSWORD_MAX ? await passwordHashOf(database.db, username) : null;
  const hash = found?.hash ?? null;
  // Without a stored hash, verify against a dummy so the answer takes as long as a wrong password.
  const matches = (await verifyPassword(hash ?? (await dummyHash()), password)) && hash !== null;
  if (!matches || !found) {
    // The reserved attempt stays: it is the failure.
    await database.write((tx) =>
      recordAudit(tx, { actor: null, via: 'anonymous', action: 'login.failure', target: username.slice(0, 64), peer }),
    );
    return { outcome: 'failed' };
  }
  const rehashed = needsRehash(hash!) ? await hashPassword(password) : null;
  const sessionId = await database.write(async (tx) => {
    await releaseAttempt(tx, reserved.ids, accountKey);
    if (rehashed) await rehashPassword(tx, found.user.id, rehashed);
    const id = await createSession(tx, found.user.id, attempt.sessionSeconds, database.now());
    await recordAudit(tx, {
      actor: found.user.uid,
      via: 'session',
      action: 'login.success',
      target: found.user.uid,
      detail: { method: 'password' },
      peer,
    });
    return id;
  });
  return { outcome: 'ok', user: found.user, sessionId };
}

/** Keeps a single sign-on flow (state, nonce, PKCE verifier) until its callback; the id goes into a signed cookie. */
export function beginSignInFlow(database: Database, flow: Flow): Promise<string> {
  return database.write((tx) => startFlow(tx, flow, database.now()));
}

/** Takes a flow out, so its callback works once; null when expired or used. */
export function takeSignInFlow(database: Database, id: string): Promise<Flow | null> {
  return database.write((tx) => takeFlow(tx, id, database.now()));
}

export type ProviderSignIn =
  | { readonly outcome: 'ok'; readonly user: User; readonly sessionId: string }
  | { readonly outcome: 'refused'; readonly message: string };

/**
 * A single sign-on arrival becomes a session: the person found or provisioned, the session and the audit
 * record in one transaction. A refusal is audited and creates no one.
 */
export async function signInWithProvider(
  database: Database,
  arrival: Arrival,
  policy: Policy,
  sessionSeconds: number,
): Promise<ProviderSignIn> {
  const done = await database.write(async (tx) => {
    const found = await provisionIn(tx, arrival, policy);
    if (!found.ok) return found;
    const sessionId = await createSession(tx, found.user.id, sessionSeconds, database.now());
    await recordAudit(tx, {
      actor: found.user.uid,
      via: 'session',
      action: 'login.success',
      target: found.user.uid,
      detail: {
        method: 'oidc',
        ...(found.created ? { provisioned: true } : {}),
        ...(found.linked && !found.created ? { linked: true } : {}),
      },
      peer: arrival.peer,
    });
    return { ok: true as const, user: found.user, sessionId };
  });
  if (done.ok) return { outcome: 'ok', user: done.user, sessionId: done.sessionId };
  const { reason, message } = done;
  const target = (arrival.uidClaim ?? arrival.subject).slice(0, 64);
  await database.write((tx) =>
    recordAudit(tx, {
      actor: null,
      via: 'anonymous',
      action: 'login.failure',
      target,
      detail: { method: 'oidc', reason },
      peer: arrival.peer,
    }),
  );
  return { outcome: 'refused', message };
}

export function signOut(database: Database, sessionId: string): Promise<void> {
  return database.write((tx) => endSession(tx, sessionId));
}

/** Why no personal token is made while [auth] token is off: every request with it would be refused. */
export const TOKENS_OFF =
  'personal access tokens are turned off on this server ([auth] token enabled false): a token made now would be refused';

/**
 * Mints a personal token for the user `ownerUid`, by that user or by an operator on the CLI, only while the token
 * channel accepts tokens (`accepted`). The owner is read in the same transaction, so a user removed meanwhile gets
 * "no user", never a token; its restriction names only labels the owner holds, and `admin` needs an admin owner.
 */
export async function createPersonalToken(
  database: Database,
  actor: Actor,
  ownerUid: string,
  request: NewToken,
  accepted: boolean,
): Promise<CreatedToken> {
  if (!accepted) throw new AppError('forbidden', TOKENS_OFF);
  return database.write(async (tx) => {
    const owner = await getUser(tx, ownerUid);
    if (request.restriction !== null) checkHeldByOwner(request.restriction, owner.labels);
    checkScopesFor(request.scopes, owner, request.restriction !== null);
    const token = await createToken(tx, owner.id, request, await database.tokenEpoch(tx));
    await recordActorAudit(tx, actor, 'token.create', token.id, {
      ...(actor.uid === owner.uid && actor.via !== 'cli' ? {} : { owner: owner.uid }),
      name: token.name,
      expires_at: iso(token.expiresAt),
      restriction: restrictionDigest(token.restriction),
      scopes: token.scopes,
    });
    return token;
  });
}

/**
 * Sets or lifts (null) the restriction of one of the caller's own personal tokens: only labels they hold now, and
 * never on a token with the admin scope (an admin API sees everything: make a new token instead).
 */
export async function restrictOwnToken(
  database: Database,
  actor: Actor,
  owner: User,
  id: string,
  restriction: LabelSet | null,
): Promise<TokenInfo> {
  return database.write(async (tx) => {
    if (restriction !== null) checkHeldByOwner(restriction, (await getUser(tx, owner.uid)).labels);
    const scopes = await personalTokenScopes(tx, owner.id, id);
    if (restriction !== null) checkScopesFor(scopes, { admin: true }, true);
    const changed = await setRestriction(tx, owner.id, id, restriction, database.now());
    await recordActorAudit(tx, actor, 'token.restrict', id, { restriction: restrictionDigest(changed.restriction) });
    return changed;
  });
}

export async function revokeOwnToken(database: Database, actor: Actor, owner: User, id: string): Promise<void> {
  await database.write(async (tx) => {
    await revokeToken(tx, owner.id, id);
    await recordActorAudit(tx, actor, 'token.revoke', id);
  });
}

/** Ends one of the caller's connected apps with its tokens; false when they have no such grant. */
export async function revokeOwnGrant(database: Database, actor: Actor, owner: User, id: string): Promise<boolean> {
  return database.write(async (tx) => {
    if (!(await revokeGrant(tx, owner.id, id))) return false;
    await recordActorAudit(tx, actor, 'oauth.grant_revoke', id);
    return true;
  });
}
