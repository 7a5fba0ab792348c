// Single sign-on logins in progress. The row is keyed by SHA-256 of a random id that only the browser's signed
// cookie carries, and taking it deletes it, so a state can be used once.
import { eq, lt } from 'drizzle-orm';
import type { Tx } from '../db/open.ts';
import { oidcFlows } from '../db/schema.ts';
import { randomId, storedHash } from '../domain/secrets.ts';

export const FLOW_TTL_SECONDS = 600;

export interface Flow {
  readonly state: string;
  readonly nonce: string;
  readonly verifier: string;
  readonly next: string;
}

/** Stores a flow; returns the secret id for the browser's cookie. */
export async function startFlow(tx: Tx, flow: Flow, now = Date.now()): Promise<string> {
  const id = randomId(20);
  await tx.delete(oidcFlows).where(lt(oidcFlows.expiresAt, now));
  await tx.insert(oidcFlows).values({ id: storedHash(id), ...flow, expiresAt: now + FLOW_TTL_SECONDS * 1000 });
  return id;
}

/** Takes the flow out (single use); null when unknown, used already, or expired. */
export async function takeFlow(tx: Tx, id: string, now = Date.now()): Promise<Flow | null> {
  const rows = await tx
    .delete(oidcFlows)
    .where(eq(oidcFlows.id, storedHash(id)))
    .returning();
  const row = rows[0];
  if (!row || row.expiresAt <= now) return null;
  return { state: row.state, nonce: row.nonce, verifier: row.verifier, next: row.next };
}
