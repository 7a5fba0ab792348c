// resources/list cursors: opaque to the client, bound to the caller. A cursor carries the id of the last item the
// caller was shown and an HMAC of it with the caller's user id, under a key derived from the MCP session key for
// this use alone; so no cursor reveals anything the caller could not see, and nobody can use another user's.
import { createHmac } from 'node:crypto';
import { encodeBase32LowerCaseNoPadding } from '@oslojs/encoding';
import { deriveKey } from '../domain/secrets.ts';

export function cursorKey(sessionKey: Buffer): Buffer {
  return deriveKey(sessionKey, 'mcp-resources-cursor');
}

function tag(key: Buffer, userId: number, lastId: string): string {
  return encodeBase32LowerCaseNoPadding(createHmac('sha256', key).update(`${userId}\n${lastId}`).digest().subarray(0, 15));
}

export function encodeCursor(key: Buffer, userId: number, lastId: string): string {
  return `${Buffer.from(lastId, 'utf8').toString('base64url')}.${tag(key, userId, lastId)}`;
}

/** The last id a cursor of this caller's carries; null when it is malformed, altered, or another user's. */
export function decodeCursor(key: Buffer, userId: number, cursor: string): string | null {
  const m = /^([A-Za-z0-9_-]{1,4096})\.([a-z2-7]{24})$/.exec(cursor);
  if (!m) return null;
  const lastId = Buffer.from(m[1]!, 'base64url').toString('utf8');
  // The tag is public once sent, so comparing it in plain time gives nothing away.
  return tag(key, userId, lastId) === m[2] ? lastId : null;
}
