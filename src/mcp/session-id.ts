// MCP session ids. svc serves MCP statelessly (any instance answers any request), but it still hands out a
// session id on initialize so clients can tell their sessions apart. The id carries no authority (the caller's
// credentials are checked on every request); it is bound to the user who opened it by an HMAC, so the same id
// with another user's credentials is refused, nobody can make a valid id for someone else, and no id reveals
// who it belongs to.
import { createHmac } from 'node:crypto';
import { encodeBase32LowerCaseNoPadding } from '@oslojs/encoding';
import type { Config } from '../config/load.ts';
import type { Db } from '../db/open.ts';
import { serverKey } from '../store/server-keys.ts';
import { deriveKey, randomId } from '../domain/secrets.ts';

/**
 * The HMAC key: derived from the session secret for this purpose alone, or, in configurations without sessions,
 * the random key the database made at migration (so every instance on it agrees).
 */
export async function sessionIdKey(config: Config, db: Db): Promise<Buffer> {
  if (config.auth.session) return deriveKey(config.auth.session.secret, 'mcp-session-id');
  const key = await serverKey(db, 'mcp-session-id');
  if (key === null) throw new Error('the database has no MCP session key; run svc migrate');
  return Buffer.from(key, 'hex');
}

function tag(key: Buffer, nonce: string, userId: number): string {
  return encodeBase32LowerCaseNoPadding(createHmac('sha256', key).update(`${nonce}:${userId}`).digest().subarray(0, 15));
}

export function newSessionId(key: Buffer, userId: number): string {
  const nonce = randomId(15);
  return `${nonce}.${tag(key, nonce, userId)}`;
}

export type SessionIdCheck = 'ok' | 'malformed' | 'other_user';

export function checkSessionId(key: Buffer, id: string, userId: number): SessionIdCheck {
  const m = /^([a-z2-7]{24})\.([a-z2-7]{24})$/.exec(id);
  if (!m) return 'malformed';
  // The tag is public once sent, so comparing it in plain time gives nothing away.
  return tag(key, m[1]!, userId) === m[2] ? 'ok' : 'other_user';
}
