// MCP session ids. svc serves MCP statelessly (any instance answers any request), but it still hands out a
// session id on initialize so clients can tell their sessions apart. The id carries no authority (the
// caller's credentials are checked on every request); it is bound to the user who opened it, so the same id
// with another user's credentials is refused.
import { encodeBase32LowerCaseNoPadding } from '@oslojs/encoding';
import { randomId, sha256 } from '../domain/secrets.ts';

function tag(nonce: string, userId: number): string {
  return encodeBase32LowerCaseNoPadding(sha256(`svc-mcp-session:${nonce}:${userId}`).subarray(0, 10));
}

export function newSessionId(userId: number): string {
  const nonce = randomId(15);
  return `${nonce}.${tag(nonce, userId)}`;
}

export type SessionIdCheck = 'ok' | 'malformed' | 'other_user';

export function checkSessionId(id: string, userId: number): SessionIdCheck {
  const m = /^([a-z2-7]{24})\.([a-z2-7]{16})$/.exec(id);
  if (!m) return 'malformed';
  return tag(m[1]!, userId) === m[2] ? 'ok' : 'other_user';
}
