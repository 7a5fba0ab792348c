// User ids: stable, unique and never reused (see db triggers on `uids`).

const UID = /^[A-Za-z0-9._@-]{1,64}$/;

export function isValidUid(uid: string): boolean {
  return UID.test(uid);
}

export function uidProblem(uid: string): string | null {
  return isValidUid(uid) ? null : 'a uid is 1 to 64 characters of A-Z a-z 0-9 . _ @ -';
}

/** Base uid for a single sign-on user: the claim if it is a valid uid, else the email's local part, cleaned. */
export function deriveUid(claim: string | undefined, email: string): string {
  if (claim !== undefined && isValidUid(claim)) return claim;
  const local = email.split('@')[0] ?? '';
  const cleaned = local
    .toLowerCase()
    .replace(/[^a-z0-9._@-]/g, '-')
    .slice(0, 60);
  return cleaned === '' ? 'user' : cleaned;
}

/** Candidates in order: base, base-2, base-3, … (kept within 64 characters). */
export function* uidCandidates(base: string): Generator<string> {
  yield base;
  for (let n = 2; ; n++) {
    const suffix = `-${n}`;
    yield base.slice(0, 64 - suffix.length) + suffix;
  }
}

// Deliberately simple: one @, something on each side, no whitespace or control characters, a dot in the domain.
const EMAIL = /^[^\s@\x00-\x1f]{1,64}@[^\s@\x00-\x1f]+\.[^\s@\x00-\x1f]+$/;

export function emailProblem(email: string): string | null {
  if (email.length > 254 || !EMAIL.test(email)) return 'an email address looks like name@example.com';
  return null;
}
