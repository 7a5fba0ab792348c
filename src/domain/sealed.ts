// Sealing a secret for the database: AES-256-GCM with a random 96-bit nonce, under a key derived for one purpose
// (domain/secrets.ts deriveKey). The sealed form is base64url of nonce, tag and ciphertext; opening checks the tag.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** `context` (additional authenticated data) binds the sealed text to where it is kept: it opens only there. */
export function seal(key: Buffer, plaintext: string, context?: string): string {
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  if (context !== undefined) cipher.setAAD(Buffer.from(context, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64url');
}

/** The plaintext, or null when the sealed text was made with another key or context, or altered. */
export function unseal(key: Buffer, sealed: string, context?: string): string | null {
  const raw = Buffer.from(sealed, 'base64url');
  if (raw.length < 28) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
    if (context !== undefined) decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}
