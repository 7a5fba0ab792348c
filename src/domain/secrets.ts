// Random secrets and their stored forms. Tokens and session ids carry ≥160 random bits, so one fast SHA-256 is
// the right stored form (no slow hash needed); node's one-shot hash is native and cheap.
import { hash as nodeHash, randomBytes, createHmac } from 'node:crypto';
import { encodeBase32LowerCaseNoPadding, encodeBase64urlNoPadding } from '@oslojs/encoding';
import { constantTimeEqual } from '@oslojs/crypto/subtle';

export function sha256(text: string): Buffer {
  return nodeHash('sha256', text, 'buffer');
}

/** The stored form of a token or session id. */
export function storedHash(secret: string): string {
  return nodeHash('sha256', secret, 'hex');
}

export function randomId(bytes: number): string {
  return encodeBase32LowerCaseNoPadding(randomBytes(bytes));
}

// Personal access tokens: "svc_" + 40 base32 characters (200 random bits) + 8 characters of checksum
// (the first 40 bits of SHA-256 over the random part), so a mistyped or truncated token is refused without
// a database lookup.
const TOKEN = /^svc_([a-z2-7]{40})([a-z2-7]{8})$/;

function checksum(body: string): string {
  return encodeBase32LowerCaseNoPadding(sha256(`svc-token:${body}`).subarray(0, 5));
}

export function mintToken(): string {
  const body = randomId(25);
  return `svc_${body}${checksum(body)}`;
}

export function tokenWellFormed(token: string): boolean {
  const m = TOKEN.exec(token);
  // The checksum is a public function of the body, so comparing it in plain time reveals nothing secret.
  return m !== null && checksum(m[1]!) === m[2];
}

/** A secret compared with one that was given, in time that does not depend on where they differ. */
export function secretEquals(given: string | Uint8Array, expected: string | Uint8Array): boolean {
  const bytes = (v: string | Uint8Array) => (typeof v === 'string' ? new TextEncoder().encode(v) : v);
  return constantTimeEqual(bytes(given), bytes(expected));
}

/** An OAuth client secret: "svcs_" + 240 random bits; svc keeps only its SHA-256. */
export function mintClientSecret(): string {
  return `svcs_${randomId(30)}`;
}

// Signed ids (session cookies, single sign-on flow cookies): "<id>.<HMAC-SHA-256 of the id>"; the database keeps
// only SHA-256(id). Session cookies are signed with the session secret itself, every other kind with a key derived
// from it for that use (deriveKey), so no other kind can verify as a session or as each other.
export function signId(id: string, key: Buffer): string {
  return `${id}.${encodeBase64urlNoPadding(createHmac('sha256', key).update(id).digest())}`;
}

/** The id inside a signed value whose signature checks out under `key`, else null. */
export function verifySignedId(value: string, key: Buffer): string | null {
  const dot = value.indexOf('.');
  if (dot <= 0 || value.length > 200) return null;
  const id = value.slice(0, dot);
  return secretEquals(value, signId(id, key)) ? id : null;
}

/** A key for one purpose from a configured secret, so no two uses of the secret can ever verify each other. */
export function deriveKey(secret: Buffer, purpose: string): Buffer {
  return createHmac('sha256', secret).update(`svc key for: ${purpose}`).digest();
}
