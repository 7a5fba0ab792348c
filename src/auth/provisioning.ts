// Who a single sign-on arrival (oidc or header) is, by the rules of CONTRACT §4, in one place for both:
// - returning users are matched on (provider, subject) only, never on email;
// - a pre-provisioned user (no password, no identity yet) is linked only when the provider vouches for the match:
//   the uid claim itself equals their uid, or (oidc) the email claim equals theirs exactly and is verified;
// - a uid derived from an email's local part never links to anyone: it only names a new user under jit;
// - with jit an unknown user is created with default_acl plus mapped group labels;
// - name and email are refreshed on every arrival (the name cleaned of unseen characters); the ACL and the admin
//   flag are never changed here.
// Each decision and its writes run in one write transaction, which SQLite runs alone across every process, so
// concurrent first arrivals of one subject, on any instance, create one user.
import type { Database, Db, Tx } from '../db/open.ts';
import type { GroupsConfig } from '../config/load.ts';
import { parseLabels, type LabelSet } from '../domain/labels.ts';
import { cleanDisplayText, PERSON_NAME_MAX as NAME_MAX } from '../domain/display-text.ts';
import { deriveUid, uidCandidates, emailProblem, isValidUid } from '../domain/uid.ts';
import { createUserWithFreeUid, findUser, isUnclaimed, unclaimedByEmail, updateUser, type User } from '../store/users.ts';
import { userBySubject, linkIdentity } from '../store/identities.ts';
import { recordAudit } from '../store/audit.ts';

export interface Arrival {
  /** 'header' or 'oidc:<issuer>' */
  readonly provider: string;
  readonly subject: string;
  readonly email: string | null;
  /** true only when the provider asserts it verified the email (oidc email_verified: true) */
  readonly emailVerified: boolean;
  /** null: the provider said nothing about the name, keep what is stored */
  readonly name: string | null;
  /** the provider's username for the account (oidc uid_claim, or the header's user value) */
  readonly uidClaim: string | null;
  readonly groups: readonly string[];
  /** the client address, for the audit trail */
  readonly peer: string;
}

export interface Policy {
  readonly jit: boolean;
  readonly defaultAcl: LabelSet;
  readonly groups: GroupsConfig | null;
}

export type Provisioned =
  | { readonly ok: true; readonly user: User; readonly created: boolean; readonly linked: boolean }
  | { readonly ok: false; readonly reason: 'unknown_user' | 'bad_email'; readonly message: string };

export function labelsForGroups(groups: readonly string[], config: GroupsConfig | null): LabelSet {
  if (!config) return [];
  return parseLabels(groups.flatMap((g) => [...(config.map.get(g) ?? [])]));
}

/**
 * The name a provider states, made fit to show as client names are (no bidi overrides, invisible, control or C1
 * characters): a person's name is shown to admins and in mail, and a provider's claim is whatever its user typed.
 */
const shownName = (arrival: Arrival): string | undefined => (arrival.name === null ? undefined : cleanDisplayText(arrival.name, NAME_MAX));

/** The profile change an arrival brings: email and name as the provider states them now. */
function profileChange(user: User, arrival: Arrival): { email?: string; name?: string } {
  const change: { email?: string; name?: string } = {};
  if (arrival.email !== null && arrival.email !== user.email && emailProblem(arrival.email) === null) change.email = arrival.email;
  const name = shownName(arrival);
  if (name !== undefined && name !== user.name) change.name = name;
  return change;
}

const providerKind = (provider: string) => (provider === 'header' ? 'header' : 'oidc');

export async function provision(database: Database, arrival: Arrival, policy: Policy): Promise<Provisioned> {
  // The common case, a returning user whose profile is unchanged, is one read and no write.
  const known = await userBySubject(database.db, arrival.provider, arrival.subject);
  if (known && Object.keys(profileChange(known, arrival)).length === 0) return { ok: true, user: known, created: false, linked: false };
  return database.write((tx) => provisionIn(tx, arrival, policy));
}

/** The same decision inside a caller's write, so that it commits or rolls back with the caller's other changes. */
export async function provisionIn(tx: Tx, arrival: Arrival, policy: Policy): Promise<Provisioned> {
  const known = await userBySubject(tx, arrival.provider, arrival.subject);
  if (known) {
    const change = profileChange(known, arrival);
    const user = Object.keys(change).length === 0 ? known : await updateUser(tx, known.uid, change);
    return { ok: true, user, created: false, linked: false };
  }

  // Compared and kept as sent: an address the provider vouches for is that exact string.
  const email = arrival.email ?? '';
  if (emailProblem(email) !== null) {
    return {
      ok: false,
      reason: 'bad_email',
      message: 'the identity provider sent no usable email address for this account; ask an administrator',
    };
  }
  const audit = (user: User, action: string) =>
    recordAudit(tx, {
      actor: user.uid,
      via: providerKind(arrival.provider),
      action,
      target: user.uid,
      detail: { provider: arrival.provider },
      peer: arrival.peer,
    });

  const vouched = await vouchedUser(tx, arrival, email);
  if (vouched) {
    await linkIdentity(tx, arrival.provider, arrival.subject, vouched.id);
    const change = profileChange(vouched, arrival);
    const user = Object.keys(change).length === 0 ? vouched : await updateUser(tx, vouched.uid, change);
    await audit(user, 'user.link');
    return { ok: true, user, created: false, linked: true };
  }

  if (!policy.jit) {
    return { ok: false, reason: 'unknown_user', message: 'this account is not set up in svc yet; ask an administrator to add you' };
  }
  const labels = parseLabels([...policy.defaultAcl, ...labelsForGroups(arrival.groups, policy.groups)]);
  const created = await createUserWithFreeUid(tx, uidCandidates(deriveUid(arrival.uidClaim ?? undefined, email)), {
    email,
    name: shownName(arrival) ?? '',
    labels,
    admin: false,
    passwordHash: null,
  });
  await linkIdentity(tx, arrival.provider, arrival.subject, created.id);
  await audit(created, 'user.provision');
  return { ok: true, user: created, created: true, linked: true };
}

/**
 * The pre-provisioned user this arrival may take over, only where the provider vouches for it: its uid claim is
 * exactly their uid, or (oidc) its verified email is exactly theirs and no other linkable user's. Only linkable
 * users count: a user with a password or an identity (a JIT user made from an unverified email claim, say) has
 * the address too, but can neither be linked by it nor stop the user it belongs to from being linked.
 */
async function vouchedUser(db: Db, arrival: Arrival, email: string): Promise<User | null> {
  if (arrival.uidClaim !== null && isValidUid(arrival.uidClaim)) {
    const byUid = await findUser(db, arrival.uidClaim);
    if (byUid && byUid.uid === arrival.uidClaim) {
      if (await isUnclaimed(db, byUid.id)) return byUid;
    }
  }
  if (arrival.emailVerified && arrival.provider !== 'header') {
    const sameEmail = await unclaimedByEmail(db, email);
    if (sameEmail.length === 1) return sameEmail[0]!;
  }
  return null;
}
