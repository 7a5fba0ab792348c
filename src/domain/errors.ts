// Errors that carry the API error code of CONTRACT §5; the HTTP layer maps the code to a status and the CLI
// prints the message. Messages never contain secrets.

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
  ) {
    super(message);
  }
}

export const badRequest = (message: string, field?: string) => new AppError('bad_request', message, field);
export const notFound = (message: string) => new AppError('not_found', message);
export const conflict = (message: string, field?: string) => new AppError('conflict', message, field);
