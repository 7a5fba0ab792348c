// How svc refuses: code throws one of these, and the write it runs in rolls back; the HTTP layer's one error handler
// answers a page or JSON, the CLI prints the message. AppError carries the API error code of CONTRACT §5 (`{error,
// message}`); OauthProtocolError the OAuth endpoints' own (`{error, error_description}`, RFC 6749 §5.2, RFC 7591).
// A refusal is returned as a value only where it must still commit something, and says so where it is. Messages
// never contain secrets.

export type ErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'too_many_requests'
  | 'payload_too_large'
  | 'unavailable';

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly field?: string,
    /** seconds a client should wait before trying again (429, 503): sent as Retry-After */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** A refusal of an OAuth endpoint: `error` is the protocol's code, the message its error_description. */
export class OauthProtocolError extends Error {
  constructor(
    readonly error: string,
    description: string,
    readonly status: 400 | 401 | 429 | 503 = 400,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(description);
  }
}

export const badRequest = (message: string, field?: string) => new AppError('bad_request', message, field);
export const notFound = (message: string) => new AppError('not_found', message);
export const conflict = (message: string, field?: string) => new AppError('conflict', message, field);

/**
 * A call that needs the person to connect their account at an upstream first, told to an MCP client that declared
 * URL elicitation (the MCP layer answers it as the URL elicitation error, -32042); the message names the URL too.
 */
export class ConnectionNeeded extends Error {
  constructor(
    readonly url: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A request passed to an upstream that failed there, or was refused before it left (over `rate`, a connection to
 * make first): the message names the upstream and the cause, never the upstream's own detail, and is the caller's to
 * read. A tool call says this in its `isError` result; every other request as an error answer.
 */
export class UpstreamRefusal extends Error {}
