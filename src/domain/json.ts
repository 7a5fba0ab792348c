// JSON shapes of the contract (snake_case, ISO 8601 UTC times), shared by the HTTP API and the CLI.
import type { User, SignInSummary } from '../store/users.ts';
import type { Item, ItemSummary } from '../store/items.ts';
import type { AuditEntry } from '../store/audit.ts';

export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export function userJson(u: User, signIn?: SignInSummary) {
  return {
    uid: u.uid,
    email: u.email,
    name: u.name,
    labels: [...u.labels],
    admin: u.admin,
    has_password: u.hasPassword,
    created_at: iso(u.createdAt),
    ...(signIn === undefined
      ? {}
      : { updated_at: iso(u.updatedAt), identities: [...signIn.providers], active_tokens: signIn.activeTokens }),
  };
}

export function itemSummaryJson(i: ItemSummary) {
  return { id: i.id, title: i.title, labels: [...i.labels] };
}

export function itemJson(i: Item) {
  return { id: i.id, title: i.title, text: i.text, labels: [...i.labels], created_at: iso(i.createdAt), updated_at: iso(i.updatedAt) };
}

export function auditEntryJson(e: AuditEntry) {
  return { id: e.id, at: iso(e.at), actor: e.actor, via: e.via, action: e.action, target: e.target, detail: e.detail, peer: e.peer };
}
