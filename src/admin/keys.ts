// svc keys rotate: a new identity-assertion signing key; the one it replaces stays in the JWKS for a day, so
// assertions signed just before still verify.
import type { Database } from '../db/open.ts';
import { recordActorAudit as audit, type Actor } from '../store/audit.ts';
import { addSigningKey } from '../store/signing-keys.ts';

/** How long a retired key stays published. */
export const RETIRED_KEYS_PUBLISHED_MS = 24 * 3600 * 1000;

/** Adds `key` as the one that signs from now on, retiring the others. */
export function rotateSigningKeyAs(
  database: Database,
  actor: Actor,
  key: { kid: string; privateSealed: string; publicJwk: Record<string, unknown> },
): Promise<void> {
  return database.write(async (tx) => {
    await addSigningKey(tx, key, database.now(), true);
    await audit(tx, actor, 'keys.rotate', key.kid);
  });
}
