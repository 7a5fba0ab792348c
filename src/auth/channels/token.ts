// Bearer tokens: any Authorization header makes this channel answer, with a Principal or a 401.
import type { Database } from '../../db/open.ts';
import { checkToken, stampLastUsed } from '../../store/tokens.ts';
import type { Channel, Rejection } from '../core.ts';

const BEARER = /^Bearer ([^\s,]+)$/i;

/**
 * Stamps last_used_at after the response, without waiting for a lock another process holds: under contention the
 * stamp is dropped (the next use a minute later writes it), and it never fails or delays a request.
 */
function stampAfterResponse(database: Database, tokenId: string): void {
  const now = database.now();
  setImmediate(() => {
    // Inside an async function, so a synchronous driver's throw (say, the database closed at shutdown) becomes a
    // rejection here instead of an uncaught exception.
    void (async () => {
      await database.write((tx) => stampLastUsed(tx, tokenId, now), { waitMs: 0 });
    })().catch(() => {
      // A missed last-used stamp is harmless; the next use writes it.
    });
  });
}

function invalid(outcome: Rejection['outcome'], reason: string, message: string, code: Rejection['code'] = 'invalid_token'): Rejection {
  return { status: 401, code, message, reason, outcome };
}

export function tokenChannel(database: Database, enabled: boolean): Channel {
  return {
    name: 'token',
    async authenticate(request) {
      const header = request.headers.get('authorization');
      if (header === null) return null;
      // Two Authorization headers arrive joined by a comma, which no token contains.
      const m = BEARER.exec(header.trim());
      if (!m)
        return invalid(
          'malformed',
          'malformed authorization header',
          'send exactly one "Authorization: Bearer <token>" header',
          'unauthorized',
        );
      if (!enabled) return invalid('disabled', 'token channel disabled', 'personal access tokens are disabled on this server');
      const check = await checkToken(database, m[1]!);
      if (!check.ok) {
        const message =
          check.reason === 'expired'
            ? 'the token has expired'
            : check.reason === 'revoked'
              ? 'the token has been revoked'
              : 'the token is not valid';
        return invalid(
          check.reason === 'expired' || check.reason === 'revoked' ? check.reason : 'invalid',
          `token ${check.reason}`,
          message,
        );
      }
      if (check.stale) stampAfterResponse(database, check.tokenId);
      return {
        user: check.user,
        via: 'token',
        tokenId: check.tokenId,
        restriction: check.restriction,
        scopes: check.scopes,
        grantId: check.grantId,
        clientId: check.clientId,
      };
    },
  };
}
