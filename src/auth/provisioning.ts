// Who a single sign-on arrival (oidc or header) is, by the rules of CONTRACT §4, in one place for both:
// returning users are matched on (provider, subject) only, never on email; a pre-provisioned user (no
// password, no identity yet) is linked when the derived uid equals theirs; with jit an unknown user is created
// with default_acl plus mapped group labels; name and email are refreshed on every arrival; the ACL and the
// admin flag are never changed here.
import { eq } from 'drizzle-orm';
import type { Db } from '../db/open.ts';
import { users } from '../db/schema.ts';
import type { GroupsConfig } from '../config/load.ts';
import { parseLabels, type LabelSet } from '../domain/labels.ts';
import { deriveUid, uidCandidates, emailProblem } from '../domain/uid.ts';
import { createUserWithFreeUid, findUser, updateUser, NAME_MAX, type User } from '../store/users.ts';
import { userBySubject, linkIdentity, hasIdentity } from '../store/identities.ts';

export interface Arrival {
  /** 'header' or 'oidc:<issuer>' */
  readonly provider: string;
  readonly subject: string;
  readonly email: string | null;
  /** null: the provider said nothing about the name, keep what is stored */
  readonly name: string | null;
  /** the provider's idea of a username (oidc uid_claim, or the header's user value) */
  readonly uidHint: string | null;
  readonly groups: readonly string[];
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

async function refresh(db: Db, user: User, arrival: Arrival): Promise<User> {
  const change: { email?: string; name?: string } = {};
  if (arrival.email !== null && arrival.email !== user.email && emailProblem(arrival.email) === null) change.email = arrival.email;
  const name = arrival.name?.trim().slice(0, NAME_MAX);
  if (name !== undefined && name !== user.name) change.name = name;
  return Object.keys(change).length === 0 ? user : updateUser(db, user.uid, change);
}

// Concurrent first requests of one new user (a browser loading a page through the proxy) are serialised here;
// across instances the identity's primary key decides, see below.
const inFlight = new Map<string, Promise<Provisioned>>();

export function provision(db: Db, arrival: Arrival, policy: Policy): Promise<Provisioned> {
  const key = `${arrival.provider}\n${arrival.subject}`;
  const pending = inFlight.get(key);
  if (pending) return pending.catch(() => undefined).then(() => provisionOnce(db, arrival, policy));
  const run = provisionOnce(db, arrival, policy).finally(() => inFlight.delete(key));
  inFlight.set(key, run);
  return run;
}

async function provisionOnce(db: Db, arrival: Arrival, policy: Policy): Promise<Provisioned> {
  const known = await userBySubject(db, arrival.provider, arrival.subject);
  if (known) return { ok: true, user: await refresh(db, known, arrival), created: false, linked: false };

  const email = arrival.email?.trim() ?? '';
  if (emailProblem(email) !== null) {
    return { ok: false, reason: 'bad_email', message: 'the identity provider sent no usable email address for this account; ask an administrator' };
  }
  const base = deriveUid(arrival.uidHint ?? undefined, email);

  const candidate = await findUser(db, base);
  if (candidate && !candidate.hasPassword && !(await hasIdentity(db, candidate.id))) {
    if (await linkIdentity(db, arrival.provider, arrival.subject, candidate.id)) {
      return { ok: true, user: await refresh(db, candidate, arrival), created: false, linked: true };
    }
    return provisionOnce(db, arrival, policy); // linked by a concurrent arrival
  }

  if (!policy.jit) {
    return { ok: false, reason: 'unknown_user', message: 'this account is not set up in svc yet; ask an administrator to add you' };
  }
  const labels = parseLabels([...policy.defaultAcl, ...labelsForGroups(arrival.groups, policy.groups)]);
  const created = await createUserWithFreeUid(db, uidCandidates(base), {
    email,
    name: arrival.name?.trim().slice(0, NAME_MAX) ?? '',
    labels: [...labels],
  });
  if (await linkIdentity(db, arrival.provider, arrival.subject, created.id)) return { ok: true, user: created, created: true, linked: true };
  // Another instance provisioned the same subject at the same moment: drop our copy (it has no sessions or
  // tokens yet; its uid stays reserved like every uid) and use theirs.
  await db.delete(users).where(eq(users.id, created.id));
  return provisionOnce(db, arrival, policy);
}
