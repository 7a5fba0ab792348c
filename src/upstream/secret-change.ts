// After the session secret changes (CONTRACT §6.1): what the database holds sealed under a key derived from another
// secret, found by trying to open it with this one (nothing else tells: the secret itself is never stored, nor a value
// made from it). `svc check` reports it; `svc serve` reports it as it starts, makes a new identity signing key in place
// of one it cannot open, and marks the people's upstream accounts it cannot open `reconnect`, so the token page, the
// admin's list and every call say so. svc's own registration at an upstream's authorization server whose client secret
// it cannot open is made again when it is next needed (upstream/oauth.ts), never used as a public client. Queued
// revocations it cannot open stay queued on their schedule: an instance that still has the previous secret, or that
// secret put back, can send them; after that they are given up as any other.
// What is named is a key's id, upstreams and counts: never a secret, never a token.
import type { Database } from '../db/open.ts';
import type { Logger } from '../log.ts';
import { recordAudit } from '../store/audit.ts';
import { currentSigningKey } from '../store/signing-keys.ts';
import { clientsWithSecrets, listAccounts, markReconnect, queuedRevocations, type UpstreamAccount } from '../store/upstream-accounts.ts';
import { tokensOpenUnder } from './accounts.ts';
import { ensureSigningKey, opensSigningKey } from './identity.ts';
import { clientSecretOpensUnder } from './oauth.ts';

/** What this secret cannot open. */
export interface SealedElsewhere {
  /** the id of the key that signs identity assertions, when this secret cannot open it */
  readonly signingKey: string | null;
  /** the people's connected accounts at upstreams whose tokens this secret cannot open */
  readonly accounts: readonly UpstreamAccount[];
  /** per upstream, how many queued revocations this secret cannot open */
  readonly revocations: ReadonlyMap<string, number>;
  /** the upstreams where svc's own registration keeps a client secret this secret cannot open */
  readonly registrations: readonly string[];
}

export async function sealedElsewhere(database: Pick<Database, 'db'>, secret: Buffer): Promise<SealedElsewhere> {
  const opens = tokensOpenUnder(secret);
  const key = await currentSigningKey(database.db);
  const accounts = (await listAccounts(database.db)).filter((a) => a.state === 'connected' && !opens(a));
  const revocations = new Map<string, number>();
  for (const r of await queuedRevocations(database.db)) if (!opens(r)) revocations.set(r.upstream, (revocations.get(r.upstream) ?? 0) + 1);
  const opensClient = clientSecretOpensUnder(secret);
  const registrations = (await clientsWithSecrets(database.db)).filter((c) => !opensClient(c)).map((c) => c.upstream);
  return { signingKey: key === null || opensSigningKey(secret, key) ? null : key.kid, accounts, revocations, registrations };
}

const perUpstream = (counts: ReadonlyMap<string, number>) => [...counts].map(([upstream, n]) => `${upstream} (${n})`).join(', ');

/**
 * What changed and what it affects, in sentences for the operator; null when this secret opens everything. `check`
 * says what svc serve will do; `serve` what it does now (the accounts, the signing key) or later (a registration).
 */
export function secretChangeWarning(found: SealedElsewhere, as: 'check' | 'serve'): string | null {
  if (found.signingKey === null && found.accounts.length === 0 && found.revocations.size === 0 && found.registrations.length === 0)
    return null;
  const will = as === 'check' ? 'svc serve will' : 'svc will';
  const parts = ['the session secret is not the one that sealed what the database holds (it was changed):'];
  if (found.signingKey !== null)
    parts.push(
      `the identity signing key ${found.signingKey} cannot be opened, so upstreams with identity = jwt could not be called; ` +
        `${will} make a new one (the old one stays in the JWKS for 24 hours).`,
    );
  if (found.accounts.length > 0) {
    const counts = new Map<string, number>();
    for (const a of found.accounts) counts.set(a.upstream, (counts.get(a.upstream) ?? 0) + 1);
    parts.push(
      `${found.accounts.length} ${found.accounts.length === 1 ? "person's account" : "people's accounts"} at ${perUpstream(counts)} cannot be opened; ${will} mark them reconnect, ` +
        'and each person connects again on the token page.',
    );
  }
  if (found.revocations.size > 0)
    parts.push(
      `queued revocations at ${perUpstream(found.revocations)} cannot be opened: they stay queued for an instance that still ` +
        'has the previous secret and are given up after their last try (about 17 hours); until then, or for good, those ' +
        'tokens stay valid at the upstream until they expire unless revoked there.',
    );
  if (found.registrations.length > 0) {
    const many = found.registrations.length > 1;
    parts.push(
      `svc's own registration${many ? 's' : ''} at the authorization server${many ? 's' : ''} of ${found.registrations.join(', ')} ` +
        `cannot be opened (the client secret the server issued), so svc cannot ask for tokens there as that client; ${will} ` +
        'register again as a new client when it next needs one (the old client stays registered at the server).',
    );
  }
  if (as === 'check') parts.push('If the secret was changed by mistake, put the previous one back before svc serve starts.');
  return parts.join(' ');
}

/**
 * At start: says what this secret cannot open, makes a new signing key in place of one it cannot open, and marks the
 * accounts it cannot open `reconnect` (audited as a refused refresh is). Every instance may run it at once.
 */
export async function settleSecretChange(database: Database, secret: Buffer, log: Logger): Promise<void> {
  const found = await sealedElsewhere(database, secret);
  const warning = secretChangeWarning(found, 'serve');
  if (warning === null) return;
  log.warn('session_secret_changed', {
    signing_key: found.signingKey,
    accounts: found.accounts.length,
    revocations: [...found.revocations.values()].reduce((a, b) => a + b, 0),
    registrations: found.registrations.length,
    message: warning,
  });
  if (found.signingKey !== null) await ensureSigningKey(database, secret);
  for (const a of found.accounts)
    await database.write(async (tx) => {
      if (!(await markReconnect(tx, a.userId, a.upstream, a.accessSealed))) return;
      await recordAudit(tx, {
        actor: null,
        via: 'upstream',
        action: 'upstream.reconnect',
        target: a.upstream,
        detail: { user_id: a.userId, reason: 'sealed under another session secret' },
      });
    });
}
