// What every route may rely on: the resolved caller, and helpers for answers in the contract's shapes. The helpers
// take any route's context (`Context`), guarded (guards.ts Signed) or not, and read only the request and answer.
import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import type { Config } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import type { Authenticator, Principal, Resolution } from '../auth/core.ts';
import type { ErrorCode } from '../domain/errors.ts';
import type { Logger } from '../log.ts';
import type { RelyingParty } from '../auth/oidc.ts';
import type { Metrics } from '../metrics/events.ts';
import type { UpstreamGateway } from '../upstream/gateway.ts';

export interface Services {
  readonly config: Config;
  /** reads through database.db; every change through database.write */
  readonly database: Database;
  readonly auth: Authenticator;
  readonly log: Logger;
  /** the OpenID Connect relying party, when oidc is enabled */
  readonly oidc?: RelyingParty | null;
  /** counts for /metrics; a no-op when metrics_listen is off */
  readonly metrics: Metrics;
  /** the gateway to the upstream MCP servers, whose tools /mcp offers; null (or absent) without [upstream] sections */
  readonly gateway?: UpstreamGateway | null;
  /** aborted when svc begins to stop: what a route holds open (a stream of change notifications) ends then */
  readonly stopping?: AbortSignal;
}

export interface Env {
  Variables: {
    resolution: Resolution;
    /** random per page, for its Content-Security-Policy (made on first use: see nonceOf) */
    nonce?: string;
    /** a source a page's form may lead to beyond 'self' (the consent page's redirect back to its app) */
    formTarget?: string;
    /** the TCP peer: what the header channel trusts, never a forwarded-for header */
    peer: string;
    /** the client behind trusted_proxies (X-Forwarded-For), else the peer: for throttling, the audit trail, the log */
    client: string;
  };
}

export type Ctx = Context<Env>;

export const STATUS: Record<ErrorCode, 400 | 401 | 403 | 404 | 409 | 413 | 429 | 503> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  too_many_requests: 429,
  unavailable: 503,
};

export function apiError(c: Context, code: ErrorCode, message: string, headers: Record<string, string> = {}): Response {
  return c.json({ error: code, message }, STATUS[code], headers);
}

export function principalOf(c: Context): Principal | null {
  const r = c.get('resolution') as Resolution | undefined;
  return r?.kind === 'principal' ? r.principal : null;
}

/** Browser navigations ask for HTML first; API clients and fetch() ask for JSON or anything. */
export function wantsHtml(c: Context): boolean {
  const accept = c.req.header('accept') ?? '';
  return /text\/html/.test(accept) && !/^application\/json/.test(accept);
}

/** The page's CSP nonce, made when a page first asks: API responses never need one. */
export function nonceOf(c: Context): string {
  let nonce = c.get('nonce') as string | undefined;
  if (nonce === undefined) {
    nonce = randomBytes(16).toString('base64');
    c.set('nonce', nonce);
  }
  return nonce;
}
