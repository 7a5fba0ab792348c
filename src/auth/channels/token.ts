// Bearer tokens: any Authorization header makes this channel answer, with a Principal or a 401.
import type { Database } from '../../db/open.ts';
import { checkToken, LAST_USED_GRANULARITY_MS, stampLastUsed } from '../../store/tokens.ts';
import type { Channel, Rejection } from '../core.ts';

const BEARER = /^Bearer ([^\s,]+)$/i;

/**
 * Stamps last_used_at after the response, without waiting for a lock another process holds: under contention the
 * stamp is dropped (the next use tries again), and it never fails or delays a request. Each token is stamped once
 * per LAST_USED_GRANULARITY_MS by this process: every request whose lookup ran before a stamp committed still reads
 * the old one, and without this each of them (fifty under fifty connections) would send a write transaction of its
 * own, which the stamp's condition then makes a no-op.
 */
class LastUsedStamps {
  /** token id → when this process stamped it, oldest first */
  private readonly at = new Map<string, number>();

  constructor(private readonly database: Database) {}

  /** Stamps the token, unless this process did less than a granule ago. */
  stamp(tokenId: string): void {
    const now = this.database.now();
    const recent = (t: number) => now >= t && now - t < LAST_USED_GRANULARITY_MS;
    const last = this.at.get(tokenId);
    if (last !== undefined && recent(last)) return;
    for (const [id, t] of this.at) {
      if (recent(t)) break;
      this.at.delete(id);
    }
    this.at.delete(tokenId);
    this.at.set(tokenId, now);
    setImmediate(() => {
      // Inside an async function, so a synchronous driver's throw (say, the database closed at shutdown) becomes a
      // rejection here instead of an uncaught exception.
      void (async () => {
        await this.database.write((tx) => stampLastUsed(tx, tokenId, now), { waitMs: 0 });
      })().catch(() => {
        // A missed last-used stamp is harmless; the next use tries again.
        this.at.delete(tokenId);
      });
    });
  }
}

function invalid(outcome: Rejection['outcome'], reason: string, message: string, code: Rejection['code'] = 'invalid_token'): Rejection {
  return { status: 401, code, message, reason, outcome };
}

export function tokenChannel(database: Database, enabled: boolean): Channel {
  const stamps = new LastUsedStamps(database);
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
      if (check.stale) stamps.stamp(check.tokenId);
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
