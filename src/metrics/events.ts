// What svc counts, as plain calls: the HTTP, auth, MCP and database code report events here without knowing
// whether anyone collects them. With metrics off every call is a no-op. Label values are always drawn from small
// fixed sets; a uid, a token id or a path with ids never becomes a label.

/** How the auth core answered: a channel's verdict, or no credentials at all. */
export type AuthOutcome =
  | 'ok'
  | 'missing'
  | 'malformed'
  | 'invalid'
  | 'expired'
  | 'revoked'
  | 'disabled'
  | 'untrusted_peer'
  | 'bad_secret'
  | 'refused';

export type LoginOutcome = 'ok' | 'failed' | 'throttled' | 'refused';

export interface Metrics {
  request(route: string, method: string, status: number, seconds: number): void;
  auth(channel: string, outcome: AuthOutcome): void;
  login(method: 'password' | 'oidc', outcome: LoginOutcome): void;
  /** one JSON-RPC message on /mcp: its method and, for tools/call, the tool */
  mcp(method: string, tool: string, seconds: number): void;
  /** a write found the database locked and tried again */
  busyRetry(): void;
  /** a write that failed: `busy` after the whole wait, `failed` otherwise */
  databaseError(kind: 'busy' | 'failed'): void;
  /**
   * statements sent to the database (the file or a server): `read` outside a write transaction (on a server, bearer
   * lookups that arrived together are one; on the file, one per distinct token), `write` inside one, its BEGIN and
   * COMMIT included
   */
  databaseStatements(kind: 'read' | 'write', count: number): void;
  /**
   * one request of a caller's to an upstream MCP server (`kind`: tool, prompt, resource or completion): `ok` or the
   * cause of its failure (CONTRACT §6.1, §6.3)
   */
  upstreamCall(upstream: string, outcome: string, seconds: number, kind: UpstreamCallKind): void;
  /** whether svc reached the upstream the last time it tried */
  upstreamUp(upstream: string, up: boolean): void;
}

/** What a request to an upstream was for: svc_upstream_calls_total's `kind`. */
export type UpstreamCallKind = 'tool' | 'prompt' | 'resource' | 'completion';

export const noMetrics: Metrics = {
  request() {},
  auth() {},
  login() {},
  mcp() {},
  busyRetry() {},
  databaseError() {},
  databaseStatements() {},
  upstreamCall() {},
  upstreamUp() {},
};
