// The one place that decides who is calling. Each channel looks at a request and answers "not mine" (null),
// a Principal, or a Rejection; channels are tried in a fixed order and the first that answers decides, so
// a request carrying a bad token is refused, never treated as anonymous or as its cookie's user.
import type { User } from '../store/users.ts';
import type { LabelSet } from '../domain/labels.ts';
import { effectiveLabels, type Access } from '../domain/visibility.ts';
import type { Caller } from '../domain/caller.ts';
import type { Scope, ScopeSet } from '../domain/scopes.ts';
import type { AuthOutcome } from '../metrics/events.ts';

export type Via = 'token' | 'session' | 'header';

export interface AuthRequest {
  readonly method: string;
  readonly headers: Headers;
  /** TCP peer address of the connection (never a forwarded-for header) */
  readonly peer: string;
  cookie(name: string): string | undefined;
}

export interface Principal {
  readonly user: User;
  readonly via: Via;
  readonly sessionId?: string;
  readonly tokenId?: string;
  /** a token's label restriction; absent or null: the user's whole access */
  readonly restriction?: LabelSet | null;
  /** a bearer token's scopes: what it may do. Absent for sessions and the header channel (a person, not scoped) */
  readonly scopes?: ScopeSet;
  /** an OAuth access token's grant */
  readonly grantId?: string | null;
  /** an OAuth access token's client (the client_id of its grant) */
  readonly clientId?: string | null;
}

export interface Rejection {
  readonly status: 401 | 403;
  /** invalid_token marks a presented bearer token that is bad, expired or revoked */
  readonly code: 'unauthorized' | 'invalid_token' | 'forbidden';
  readonly message: string;
  /** for the log and audit trail; never contains a secret */
  readonly reason: string;
  /** the reason as one of a few fixed words, for the metrics */
  readonly outcome: Exclude<AuthOutcome, 'ok' | 'missing'>;
}

export interface Channel {
  readonly name: Via;
  authenticate(request: AuthRequest): Promise<Principal | Rejection | null>;
  /** writes what the channel still holds (counted audit rows) before the database closes */
  close?(): Promise<void>;
}

export type Resolution =
  | { readonly kind: 'principal'; readonly principal: Principal }
  | { readonly kind: 'rejected'; readonly rejection: Rejection; readonly channel: Via }
  | { readonly kind: 'anonymous' };

export function isRejection(answer: Principal | Rejection): answer is Rejection {
  return 'status' in answer;
}

export interface Authenticator {
  resolve(request: AuthRequest): Promise<Resolution>;
  close?(): Promise<void>;
}

/** Channels in the order they are tried: bearer token, then header, then session cookie. */
export function createAuthenticator(channels: readonly Channel[]): Authenticator {
  return {
    async resolve(request) {
      for (const channel of channels) {
        const answer = await channel.authenticate(request);
        if (answer === null) continue;
        return isRejection(answer)
          ? { kind: 'rejected', rejection: answer, channel: channel.name }
          : { kind: 'principal', principal: answer };
      }
      return { kind: 'anonymous' };
    },
    async close() {
      await Promise.all(channels.map((c) => c.close?.()));
    },
  };
}

/**
 * Whether this caller may do what `scope` names. Bearer tokens need the scope; `admin` further needs an admin
 * owner (read afresh on this request) and no label restriction. Sessions and the header channel are not scoped,
 * and whether they are admins is checked by the admin guard.
 */
export function permits(principal: Principal, scope: Scope): boolean {
  if (principal.via !== 'token') return true;
  if (!principal.scopes?.includes(scope)) return false;
  return scope !== 'admin' || (principal.user.admin && (principal.restriction ?? null) === null);
}

/** What the caller may read: the user's labels, read afresh on this request, narrowed by a token's restriction. */
export function accessOf(principal: Principal): Access {
  return { labels: principal.user.labels, restriction: principal.restriction ?? null };
}

/** The credential the caller came with (an OAuth grant, a token, a session), for limits counted per credential. */
export function credentialOf(principal: Principal): string {
  if (principal.grantId) return `grant:${principal.grantId}`;
  if (principal.tokenId) return `token:${principal.tokenId}`;
  if (principal.sessionId) return `session:${principal.sessionId}`;
  return principal.via;
}

/** The kind of credential a caller came with, as traces name it (CONTRACT §8): an OAuth access token is `oauth`. */
export function credentialKind(principal: Principal): 'token' | 'oauth' | 'session' | 'header' {
  return principal.via === 'token' && principal.grantId ? 'oauth' : principal.via;
}

/** The caller of one MCP request, named once: who they are, what they read with, their credential and address. */
export function callerOf(principal: Principal, peer: string): Caller {
  const { user } = principal;
  const access = accessOf(principal);
  return {
    userId: user.id,
    uid: user.uid,
    email: user.email,
    name: user.name,
    admin: user.admin,
    access,
    labels: [...effectiveLabels(access)],
    scopes: principal.via === 'token' ? [...(principal.scopes ?? [])] : null,
    via: principal.via,
    tokenId: principal.tokenId ?? null,
    grantId: principal.grantId ?? null,
    clientId: principal.clientId ?? null,
    credential: credentialOf(principal),
    peer,
  };
}
