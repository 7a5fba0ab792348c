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

// Session cookies: "<session id>.<HMAC-SHA-256 of the id>"; the database keeps only SHA-256(id).
export function signSessionId(id: string, secret: Buffer): string {
  return `${id}.${encodeBase64urlNoPadding(createHmac('sha256', secret).update(id).digest())}`;
}

/** The session id inside a cookie value whose signature checks out, else null. */
export function verifySessionCookie(value: string, secret: Buffer): string | null {
  const dot = value.indexOf('.');
  if (dot <= 0 || value.length > 200) return null;
  const id = value.slice(0, dot);
  const expected = new TextEncoder().encode(signSessionId(id, secret));
  return constantTimeEqual(expected, new TextEncoder().encode(value)) ? id : null;
}

/** A key for one purpose from a configured secret, so no two uses of the secret can ever verify each other. */
export function deriveKey(secret: Buffer, purpose: string): Buffer {
  return createHmac('sha256', secret).update(`svc key for: ${purpose}`).digest();
}
