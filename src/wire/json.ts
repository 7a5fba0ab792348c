// The JSON shapes of the contract (snake_case, ISO 8601 UTC times), shared by the HTTP API and the CLI: what goes
// over the wire is written here once, from the records the store returns.
import type { User, SignInSummary } from '../store/users.ts';
import type { Item, ItemSummary } from '../store/items.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { CreatedToken, TokenInfo } from '../store/tokens.ts';
import type { GrantListing } from '../store/oauth.ts';
import type { UpstreamObject } from '../store/upstream-tools.ts';
import type { LabelSet } from '../domain/labels.ts';
import { iso } from '../domain/clock.ts';
import { UNSEEN } from '../domain/definition-text.ts';

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

/**
 * An upstream's tool, prompt or app (`name`: an app's upstream URI); `labels` are the ones that decide (its own, or its
 * upstream's), `own_labels` whether they are its own.
 */
export function objectJson(t: UpstreamObject, labels: LabelSet | null) {
  return {
    upstream: t.upstream,
    kind: t.kind,
    name: t.name,
    state: t.state,
    labels: labels === null ? null : [...labels],
    own_labels: t.labels !== null,
    fingerprint: t.fingerprint,
    approved_fingerprint: t.approvedFingerprint,
    definition: t.definition,
    approved_definition: t.approvedDefinition,
    held: t.held === null ? null : [...t.held],
    updated_at: iso(t.updatedAt),
  };
}

export function auditEntryJson(e: AuditEntry) {
  return {
    id: e.id,
    at: iso(e.at),
    actor: e.actor,
    via: e.via,
    action: e.action,
    target: e.target,
    detail: e.detail,
    peer: e.peer,
    trace_id: e.traceId,
  };
}

export function tokenJson(t: TokenInfo) {
  return {
    id: t.id,
    name: t.name,
    labels: t.restriction === null ? null : [...t.restriction],
    scopes: [...t.scopes],
    created_at: iso(t.createdAt),
    expires_at: iso(t.expiresAt),
    last_used_at: iso(t.lastUsedAt),
    state: t.state,
  };
}

/** A token just made: the one answer that carries its secret. */
export function createdTokenJson(t: CreatedToken) {
  return { id: t.id, token: t.token, name: t.name, expires_at: iso(t.expiresAt), labels: t.restriction, scopes: t.scopes };
}

export function grantJson(g: GrantListing) {
  return {
    id: g.id,
    client_id: g.clientId,
    client_name: g.clientName,
    scope: g.scope,
    created_at: iso(g.createdAt),
    last_used_at: iso(g.lastUsedAt),
  };
}

/**
 * Characters a reader could not see (domain/definition-text.ts, every variation selector among them here), but the
 * newlines JSON.stringify writes between values: it escapes every control character inside a string itself.
 */
const UNSEEN_IN_JSON = new RegExp(`[${UNSEEN}--[\\n]]`, 'gv');

/**
 * JSON text in which every character a reader could not see is written as its \u escape: the same value once parsed,
 * but an upstream's hidden characters show in a terminal or a raw answer (CONTRACT §6.1). They only occur in strings,
 * where an escape is valid JSON.
 */
export function visibleJson(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(UNSEEN_IN_JSON, (c) =>
    [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''),
  );
}
