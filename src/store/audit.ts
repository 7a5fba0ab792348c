// The audit trail: admin actions, sign-ins, token creation and revocation, refused proxy requests.
import { desc, lt } from 'drizzle-orm';
import type { Db } from '../db/open.ts';
import { audit } from '../db/schema.ts';
import type { Principal } from '../auth/core.ts';

export interface AuditEvent {
  /** uid of whoever acted; null when nobody is signed in (a failed login) */
  actor: string | null;
  /** token, session, header, cli, or anonymous */
  via: string;
  action: string;
  target?: string | null;
  detail?: Record<string, unknown> | null;
  peer?: string | null;
}

export interface AuditEntry extends Required<Omit<AuditEvent, 'detail'>> {
  id: number;
  at: number;
  detail: Record<string, unknown> | null;
}

export async function recordAudit(db: Db, event: AuditEvent, now = Date.now()): Promise<void> {
  await db.insert(audit).values({
    at: now,
    actor: event.actor,
    via: event.via,
    action: event.action,
    target: event.target ?? null,
    detail: event.detail ? JSON.stringify(event.detail) : null,
    peer: event.peer ?? null,
  });
}

/** Who acts in a request: the signed-in caller and the address the request came from. */
export interface Actor {
  readonly principal: Principal;
  readonly peer: string;
}

/** Records an action by a signed-in caller. */
export async function recordActorAudit(db: Db, actor: Actor, action: string, target: string, detail?: Record<string, unknown>): Promise<void> {
  await recordAudit(db, { actor: actor.principal.user.uid, via: actor.principal.via, action, target, detail: detail ?? null, peer: actor.peer });
}

/** Newest first; `before` is the id to continue below (paging). */
export async function listAudit(db: Db, limit: number, before?: number): Promise<AuditEntry[]> {
  const rows = await db
    .select()
    .from(audit)
    .where(before === undefined ? undefined : lt(audit.id, before))
    .orderBy(desc(audit.id))
    .limit(limit)
    .all();
  return rows.map((r) => ({
    id: r.id,
    at: r.at,
    actor: r.actor,
    via: r.via,
    action: r.action,
    target: r.target,
    detail: r.detail === null ? null : (JSON.parse(r.detail) as Record<string, unknown>),
    peer: r.peer,
  }));
}
