// The trusted reverse proxy channel. It engages on any request that carries user_header, and such a request is
// honoured only when its TCP peer is trusted_proxy and secret_header matches the shared secret. Anything else
// is refused with 403 and nothing is provisioned: identity headers from anywhere else are forgeries.
import type { Database } from '../../db/open.ts';
import type { HeaderConfig, GroupsConfig } from '../../config/load.ts';
import { addressMatcher } from '../../domain/addresses.ts';
import { provision } from '../provisioning.ts';
import { secretEquals, sha256 } from '../../domain/secrets.ts';
import { countedAuditRecorder } from '../counted-audit.ts';
import type { Logger } from '../../log.ts';
import type { Channel, Rejection } from '../core.ts';

/** The proxy's own addresses (trusted_proxy): only the TCP peer counts, never a forwarded-for header. */
export const trustedPeers = addressMatcher;

/**
 * A check for the proxy secret that takes the same time whatever is sent: both sides are compared as SHA-256
 * digests, so neither the content nor the length shows. The configured secret is hashed once.
 */
export function secretChecker(expected: Buffer): (given: string) => boolean {
  const digest = sha256(expected.toString('utf8'));
  return (given) => secretEquals(sha256(given), digest) && given.length > 0;
}

export function headerChannel(database: Database, header: HeaderConfig, groups: GroupsConfig | null, log: Logger): Channel {
  const trusted = trustedPeers(header.trustedProxies);
  const secretMatches = secretChecker(header.sharedSecret);
  const rejections = countedAuditRecorder(database);
  const refuse = async (outcome: Rejection['outcome'], peer: string, reason: string, message: string): Promise<Rejection> => {
    log.warn('header_rejected', { peer, reason });
    await rejections.record({ via: 'header', action: 'header.rejected', peer, reason });
    return { status: 403, code: 'forbidden', message, reason: `header: ${reason}`, outcome };
  };
  return {
    name: 'header',
    close: () => rejections.flush(),
    async authenticate(request) {
      const subject = request.headers.get(header.userHeader);
      if (subject === null) return null;
      if (!trusted(request.peer))
        return refuse('untrusted_peer', request.peer, 'untrusted peer', 'identity headers are accepted only from the trusted proxy');
      const secret = request.headers.get(header.secretHeader);
      if (secret === null || !secretMatches(secret)) {
        return refuse(
          'bad_secret',
          request.peer,
          secret === null ? 'missing proxy secret' : 'wrong proxy secret',
          'the proxy secret is missing or wrong',
        );
      }
      // Repeated headers arrive joined by commas; an identity must be exactly one value.
      if (subject.trim() === '' || subject.includes(','))
        return refuse('malformed', request.peer, 'malformed identity', 'the identity header must hold one user');
      const email = request.headers.get(header.emailHeader);
      const result = await provision(
        database,
        {
          provider: 'header',
          subject: subject.trim(),
          email: email === null || email.includes(',') ? null : email.trim(),
          // A proxy's email header is what its directory holds, not an address anyone proved to own.
          emailVerified: false,
          name: header.nameHeader ? request.headers.get(header.nameHeader) : null,
          uidClaim: subject.trim(),
          peer: request.peer,
          groups: header.groupsHeader
            ? (request.headers.get(header.groupsHeader) ?? '')
                .split(',')
                .map((g) => g.trim())
                .filter((g) => g !== '')
            : [],
        },
        { jit: header.jit, defaultAcl: header.defaultAcl, groups },
      );
      if (!result.ok) return refuse('refused', request.peer, result.reason, result.message);
      return { user: result.user, via: 'header' };
    },
  };
}
