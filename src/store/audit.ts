// The audit trail: admin actions, sign-ins, token creation and revocation, refused proxy requests.
import { desc, lt } from 'drizzle-orm';
import type { Db } from '../db/open.ts';
import { audit } from '../db/schema.ts';

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
