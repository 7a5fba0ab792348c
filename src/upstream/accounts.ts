// A person's own accounts at `auth = oauth` upstreams (CONTRACT §6.2): connecting (the browser sent to the upstream's
// authorization server with a single-use state bound to the person and their session, and back), the tokens sealed
// per person and upstream, refreshed once when they expire however many calls need them at that moment, marked
// `reconnect` when the server refuses the refresh, and revoked at the server when the person disconnects or is
// removed. A token is only ever opened to be sent to its own upstream.
import { createHash } from 'node:crypto';
import type { Config, UpstreamConfig } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import { AppError } from '../domain/errors.ts';
import { seal, unseal } from '../domain/sealed.ts';
import { deriveKey, storedHash } from '../domain/secrets.ts';
import type { Logger } from '../log.ts';
import { listUsers } from '../store/users.ts';
import { recordActorAudit, recordAudit, type Actor } from '../store/audit.ts';
import {
  addConnect,
  claimRefresh,
  watchRefresh,
  claimRevocation,
  deleteAccount,
  dropRevocation,
  dueRevocations,
  findAccount,
  listAccounts,
  markReconnect,
  postponeRevocation,
  putAccount,
  refreshedAccount,
  releaseRefresh,
  takeConnect,
  touchAccount,
  type UpstreamAccount,
  type UpstreamRevocation,
} from '../store/upstream-accounts.ts';
import { mayConnect } from './access.ts';
import { OauthClients, OauthSetupError, oauth, type OauthParty } from './oauth.ts';
import { callbackUrl } from './client-document.ts';

const TOKEN_PURPOSE = 'upstream-account-tokens';
const VERIFIER_PURPOSE = 'upstream-connect-verifier';
/** A connection under way is good for this long. */
const CONNECT_MS = 10 * 60_000;
/** An access token this close to its expiry is refreshed before it is sent. */
const REFRESH_EARLY_MS = 60_000;
/**
 * A claim on a refresh lasts the refresh request's timeout and this much more: enough for storing the new tokens,
 * whose write may wait for the database up to 5 s (8 s on a database server whose lock is held), so a claim does not
 * lapse while its instance is still storing what it got.
 */
const REFRESH_CLAIM_SLACK_MS = 10_000;
/** An instance waiting for another's refresh looks at the account this often. */
const REFRESH_WAIT_STEP_MS = 100;
/** The revocation queue is swept this often (and at once after a deletion here): one indexed read. */
const REVOKE_SWEEP_MS = 10_000;
/** An instance trying a queued revocation holds it this long. */
const REVOKE_CLAIM_MS = 5 * 60_000;
/** A failed revocation is tried again after 1 minute, then at doubling intervals, this many times in all (~17 h). */
const REVOKE_FIRST_RETRY_MS = 60_000;
const REVOKE_ATTEMPTS = 10;
/** How long an answer that queued revocations waits for them (revokeSoon). */
const REVOKE_ANSWER_WAIT_MS = 2000;
/** How long Connect waits for the upstream's tools to be listed with the new connection. */
const LISTING_ANSWER_WAIT_MS = 2000;

const stateId = (state: string) => createHash('sha256').update(state).digest('hex');
const where = (userId: number, upstream: string, what: 'access' | 'refresh') => `${userId}/${upstream}/${what}`;

/**
 * Whether `secret` opens the tokens of an account or a queued revocation; false when they were sealed under another
 * session secret (upstream/secret-change.ts). Only the access token is tried: both were sealed with the same key.
 */
export function tokensOpenUnder(secret: Buffer): (row: Pick<UpstreamAccount, 'userId' | 'upstream' | 'accessSealed'>) => boolean {
  const key = deriveKey(secret, TOKEN_PURPOSE);
  return (row) => unseal(key, row.accessSealed, where(row.userId, row.upstream, 'access')) !== null;
}

/** The person a connection is for, and the session they connect from (null through the proxy header). */
export interface Person {
  readonly id: number;
  readonly uid: string;
  readonly sessionId: string | null;
  readonly actor: Actor;
}

/** What a caller's call needs: the person's token for the upstream, or that they connect first. */
export type Bearer = { readonly token: string } | { readonly connect: 'none' | 'reconnect' };

/** A request to the upstream found the person not connected (or no longer). */
export class NeedsConnection extends Error {
  constructor(readonly connect: 'none' | 'reconnect') {
    super(connect === 'none' ? 'not connected' : 'the connection must be made again');
  }
}

export class UpstreamAccounts {
  readonly clients: OauthClients;
  private readonly tokenKey: Buffer;
  private readonly verifierKey: Buffer;
  /** refreshes under way in this process, per person and upstream: 20 calls at once make one refresh */
  private readonly refreshing = new Map<string, Promise<Bearer>>();
  /** when this process last stamped an account's last use: at most once a minute each */
  private readonly stamped = new Map<string, number>();
  private sweeping: Promise<void> | null = null;
  private sweepAgain = false;
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: Config,
    private readonly database: Database,
    private readonly log: Logger,
    /**
     * told when a person connected or disconnected: the upstream's tools are listed again, with the new connection's
     * token, and without the listing of the one that ended
     */
    private readonly connected: (upstream: string) => Promise<void>,
  ) {
    this.clients = new OauthClients(config, database, log);
    const secret = config.auth.session!.secret;
    this.tokenKey = deriveKey(secret, TOKEN_PURPOSE);
    this.verifierKey = deriveKey(secret, VERIFIER_PURPOSE);
  }

  upstream(name: string): UpstreamConfig | null {
    return this.config.upstreams.find((u) => u.name === name && u.oauth !== null) ?? null;
  }

  /** Starts a connection: the URL of the upstream's authorization server to send the person's browser to. */
  async startConnect(person: Person, upstream: UpstreamConfig): Promise<string> {
    const party = await this.partyOrRefusal(upstream);
    const state = oauth.generateRandomState();
    const verifier = oauth.generateRandomCodeVerifier();
    const now = this.database.now();
    await this.database.write((tx) =>
      addConnect(tx, {
        id: stateId(state),
        userId: person.id,
        sessionId: person.sessionId === null ? null : storedHash(person.sessionId),
        upstream: upstream.name,
        verifierSealed: seal(this.verifierKey, verifier, stateId(state)),
        createdAt: now,
        expiresAt: now + CONNECT_MS,
      }),
    );
    const url = new URL(party.as.authorization_endpoint!);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', party.client.client_id);
    url.searchParams.set('redirect_uri', callbackUrl(this.config, upstream));
    url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
    url.searchParams.set('code_challenge_method', 'S256');
    url.searchParams.set('state', state);
    url.searchParams.set('resource', resourceOf(upstream));
    const scopes = upstream.oauth!.scopes;
    if (scopes.length > 0) url.searchParams.set('scope', scopes.join(' '));
    return url.href;
  }

  /**
   * The browser came back to the callback. The state is used up whatever happens next; it must be this person's, from
   * this session, for this upstream and not expired, and the server's answer must be a code (not an error) that it
   * exchanges for tokens.
   */
  async finishConnect(person: Person, upstream: UpstreamConfig, callback: URL): Promise<void> {
    const state = callback.searchParams.get('state') ?? '';
    const taken = state === '' ? null : await this.database.write((tx) => takeConnect(tx, stateId(state)));
    const now = this.database.now();
    if (taken === null || taken.expiresAt < now)
      throw new AppError('bad_request', 'this connection was not started here, was used already or took too long; start it again');
    const session = person.sessionId === null ? null : storedHash(person.sessionId);
    if (taken.userId !== person.id || taken.sessionId !== session || taken.upstream !== upstream.name)
      throw new AppError('forbidden', 'this connection was started by someone else; start your own');
    const verifier = unseal(this.verifierKey, taken.verifierSealed, taken.id);
    if (verifier === null) throw new AppError('bad_request', 'this connection cannot be finished; start it again');
    const party = await this.partyOrRefusal(upstream);
    let params: URLSearchParams;
    try {
      params = oauth.validateAuthResponse(party.as, party.client, callback.searchParams, state);
    } catch (e) {
      const said = e instanceof oauth.AuthorizationResponseError ? e.error : 'an answer svc cannot use';
      throw new AppError('bad_request', `${upstream.name} did not connect your account (${said.slice(0, 80)}); try again`);
    }
    const tokens = await this.exchange(party, upstream, params, verifier);
    const replaced = await this.database.write(async (tx) => {
      const before = await putAccount(tx, this.accountRow(person.id, upstream, party, tokens, now));
      await recordActorAudit(tx, person.actor, 'upstream.connect', upstream.name, { scope: tokens.scope ?? '' });
      return before;
    });
    // The person is offered the upstream's tools once svc has listed them with their token: Connect answers when that
    // is done, or after LISTING_ANSWER_WAIT_MS (a slow upstream holds no one's Connect; the listing goes on after).
    const listed = atMost(this.connected(upstream.name), LISTING_ANSWER_WAIT_MS);
    // Connected again: the tokens of the earlier connection are revoked, not left live at the server.
    if (replaced) await this.revokeSoon();
    await listed;
  }

  private async exchange(
    party: OauthParty,
    upstream: UpstreamConfig,
    params: URLSearchParams,
    verifier: string,
  ): Promise<oauth.TokenEndpointResponse> {
    try {
      const response = await oauth.authorizationCodeGrantRequest(
        party.as,
        party.client,
        party.auth,
        params,
        callbackUrl(this.config, upstream),
        verifier,
        { ...party.options(), additionalParameters: { resource: resourceOf(upstream) } },
      );
      return await oauth.processAuthorizationCodeResponse(party.as, party.client, response);
    } catch (e) {
      this.log.warn('upstream_connect_failed', { upstream: upstream.name, error: errorText(e) });
      throw new AppError('bad_request', `${upstream.name} did not give svc a token for your account; try again`);
    }
  }

  private accountRow(userId: number, upstream: UpstreamConfig, party: OauthParty, t: oauth.TokenEndpointResponse, now: number) {
    return {
      userId,
      upstream: upstream.name,
      server: upstream.server,
      issuer: party.as.issuer,
      clientId: party.client.client_id,
      accessSealed: seal(this.tokenKey, t.access_token, where(userId, upstream.name, 'access')),
      refreshSealed: t.refresh_token === undefined ? null : seal(this.tokenKey, t.refresh_token, where(userId, upstream.name, 'refresh')),
      expiresAt: typeof t.expires_in === 'number' ? now + t.expires_in * 1000 : null,
      scope: t.scope ?? upstream.oauth!.scopes.join(' '),
      state: 'connected',
      connectedAt: now,
      lastUsedAt: null,
      refreshingUntil: null,
      refreshedAt: null,
      // A new connection may be another account at the upstream: nothing it lists is known until svc lists with it.
      listedTools: null,
      listedAt: null,
    } satisfies UpstreamAccount;
  }

  private async partyOrRefusal(upstream: UpstreamConfig): Promise<OauthParty> {
    try {
      return await this.clients.party(upstream);
    } catch (e) {
      this.log.warn('upstream_oauth_unavailable', { upstream: upstream.name, error: errorText(e) });
      const why = e instanceof OauthSetupError ? e.message : 'its authorization server cannot be reached just now';
      throw new AppError('unavailable', `cannot connect to ${upstream.name}: ${why}`);
    }
  }

  /**
   * The person's token for a call to the upstream, refreshed first when it is about to expire, or when it is the
   * token the upstream just `refused`.
   */
  async bearer(userId: number, upstream: UpstreamConfig, refused?: string): Promise<Bearer> {
    const account = await findAccount(this.database.db, userId, upstream.name);
    const current = this.tokenOf(account, upstream);
    if ('connect' in current) return current;
    const fresh = account!.expiresAt === null || account!.expiresAt - REFRESH_EARLY_MS > this.database.now();
    if (fresh && current.token !== refused) return current;
    const key = `${userId}/${upstream.name}`;
    let refresh = this.refreshing.get(key);
    if (!refresh) {
      refresh = this.refresh(account!, upstream).finally(() => this.refreshing.delete(key));
      this.refreshing.set(key, refresh);
    }
    return refresh;
  }

  /** The access token an account holds for the upstream as it is configured now, or why the person must connect. */
  private tokenOf(account: UpstreamAccount | null, upstream: UpstreamConfig): Bearer {
    if (account === null || account.server !== upstream.server) return { connect: 'none' };
    if (account.state !== 'connected') return { connect: 'reconnect' };
    const token = unseal(this.tokenKey, account.accessSealed, where(account.userId, upstream.name, 'access'));
    return token === null ? { connect: 'reconnect' } : { token };
  }

  private async refresh(account: UpstreamAccount, upstream: UpstreamConfig): Promise<Bearer> {
    const { userId } = account;
    const refreshToken =
      account.refreshSealed === null ? null : unseal(this.tokenKey, account.refreshSealed, where(userId, upstream.name, 'refresh'));
    if (refreshToken === null) return this.reconnect(account, 'no refresh token');
    const party = await this.clients.party(upstream);
    // Tokens go only to the server and client that issued them.
    if (account.issuer !== party.as.issuer || account.clientId !== party.client.client_id)
      return this.reconnect(account, 'issued by another authorization server or client');
    // One refresh across every instance: a server that rotates refresh tokens revokes the whole grant when one is
    // presented twice, so an instance that finds another refreshing waits for its tokens instead.
    const theirs = await this.claimRefresh(account, upstream);
    if (theirs !== undefined) return theirs;
    const key = { userId, upstream: upstream.name };
    let tokens: oauth.TokenEndpointResponse;
    try {
      const response = await oauth.refreshTokenGrantRequest(party.as, party.client, party.auth, refreshToken, {
        ...party.options(),
        additionalParameters: { resource: resourceOf(upstream) },
      });
      tokens = await oauth.processRefreshTokenResponse(party.as, party.client, response);
    } catch (e) {
      // The server refused the refresh token itself (invalid_grant): the person connects again. Anything else (a
      // rate limit, a fault of the moment, svc's client refused) fails the call without changing the account.
      if (e instanceof oauth.ResponseBodyError && e.error === 'invalid_grant') return this.reconnect(account, e.error);
      await this.database.write((tx) => releaseRefresh(tx, key, account.accessSealed)).catch(() => undefined);
      throw e;
    }
    const now = this.database.now();
    const row = this.accountRow(userId, upstream, party, tokens, now);
    const change = {
      accessSealed: row.accessSealed,
      // A server that does not rotate refresh tokens keeps the one it gave.
      refreshSealed: row.refreshSealed ?? account.refreshSealed,
      expiresAt: row.expiresAt,
      scope: row.scope,
      refreshedAt: now,
    };
    // The person may have connected again meanwhile: then those tokens stand.
    const mine = await this.database.write((tx) => refreshedAccount(tx, key, account.accessSealed, change));
    if (mine) return { token: tokens.access_token };
    // Read once more, not through bearer(), which would wait on this very refresh.
    return this.tokenOf(await findAccount(this.database.db, userId, upstream.name), upstream);
  }

  /**
   * Claims the account's refresh for this instance (undefined), or, when another instance holds the claim, waits
   * until its tokens are stored and returns them (or what the account says now). A claim outlives the refresh
   * request's own timeout, so it lapses only when its instance stopped midway; then this one takes it over.
   */
  private async claimRefresh(account: UpstreamAccount, upstream: UpstreamConfig): Promise<Bearer | undefined> {
    const key = { userId: account.userId, upstream: upstream.name };
    const holdMs = upstream.timeoutMs + REFRESH_CLAIM_SLACK_MS;
    const started = performance.now();
    for (let lapsed = true; ; ) {
      if (lapsed && (await this.database.write((tx) => claimRefresh(tx, key, account.accessSealed, holdMs)))) return undefined;
      // Another instance holds the claim: watch the account with reads until its tokens arrive or its claim lapses.
      const seen = await watchRefresh(this.database.db, key);
      if (seen === null || seen.account.accessSealed !== account.accessSealed || seen.account.state !== 'connected')
        return this.tokenOf(seen?.account ?? null, upstream);
      if (performance.now() - started > 2 * holdMs)
        throw new AppError('unavailable', `another instance is refreshing the connection to ${upstream.name}; try again`);
      lapsed = seen.lapsed;
      if (!lapsed) await new Promise((r) => setTimeout(r, REFRESH_WAIT_STEP_MS));
    }
  }

  private async reconnect(account: UpstreamAccount, why: string): Promise<Bearer> {
    await this.database.write(async (tx) => {
      await markReconnect(tx, account.userId, account.upstream, account.accessSealed);
      await recordAudit(tx, {
        actor: null,
        via: 'upstream',
        action: 'upstream.reconnect',
        target: account.upstream,
        detail: { user_id: account.userId, reason: why.slice(0, 80) },
      });
    });
    return { connect: 'reconnect' };
  }

  /** The person disconnects: their tokens are deleted, then revoked at the server where it offers revocation. */
  async disconnect(person: Person, upstream: UpstreamConfig): Promise<boolean> {
    const gone = await this.database.write(async (tx) => {
      const account = await deleteAccount(tx, person.id, upstream.name, this.database.now());
      if (account) await recordActorAudit(tx, person.actor, 'upstream.disconnect', upstream.name);
      return account;
    });
    if (gone) {
      void this.connected(upstream.name);
      await this.revokeSoon();
    }
    return gone !== null;
  }

  /** Stamps the account's last use after a call, at most once a minute per account and process, best effort. */
  used(userId: number, upstream: UpstreamConfig): void {
    const key = `${userId}/${upstream.name}`;
    const now = this.database.now();
    if (now - (this.stamped.get(key) ?? 0) < 60_000) return;
    this.stamped.set(key, now);
    if (this.stamped.size > 10_000) this.stamped.clear();
    void this.database.write((tx) => touchAccount(tx, userId, upstream.name, now)).catch(() => undefined);
  }

  /** The person's token for each request of a connection to the upstream (BearerSource). */
  source(userId: number, upstream: UpstreamConfig): (refused?: string) => Promise<string> {
    return async (refused) => {
      const b = await this.bearer(userId, upstream, refused);
      if ('token' in b) return b.token;
      throw new NeedsConnection(b.connect);
    };
  }

  /**
   * Revokes the queued tokens of deleted accounts at their servers (RFC 7009): those this process just deleted, and
   * those deleted elsewhere (by the command line, by another instance that could not reach the server). Resolves once
   * every revocation due now was tried; one sweep at a time, and a call made during a sweep gets one more after it.
   */
  revokeQueued(): Promise<void> {
    if (this.sweeping) {
      this.sweepAgain = true;
      return this.sweeping;
    }
    const sweep = async () => {
      try {
        do {
          this.sweepAgain = false;
          await this.sweepOnce();
        } while (this.sweepAgain);
      } catch (e) {
        this.log.warn('upstream_revoke_failed', { error: errorText(e) });
      } finally {
        this.sweeping = null;
      }
    };
    this.sweeping = sweep();
    return this.sweeping;
  }

  /**
   * revokeQueued for an answer to a person or an administrator (Disconnect, connecting again, removing a user):
   * resolves when the revocations due now were tried, or after REVOKE_ANSWER_WAIT_MS, whichever is first. A slow
   * authorization server then holds no one's answer; its revocations go on after it.
   */
  revokeSoon(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, REVOKE_ANSWER_WAIT_MS);
      timer.unref();
      void this.revokeQueued()
        .catch(() => undefined)
        .finally(() => {
          clearTimeout(timer);
          resolve();
        });
    });
  }

  /** Sweeps the revocation queue now and every REVOKE_SWEEP_MS, until stop(). */
  start(): void {
    void this.revokeQueued();
    this.sweepTimer = setInterval(() => void this.revokeQueued(), REVOKE_SWEEP_MS);
    this.sweepTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    await this.sweeping;
  }

  private async sweepOnce(): Promise<void> {
    for (let batch = 0; batch < 20; batch++) {
      const due = await dueRevocations(this.database.db, this.database.now(), 50);
      if (due.length === 0) return;
      for (const row of due) {
        const now = this.database.now();
        // Another instance may be sweeping too: each queued revocation is tried by one of them.
        if (!(await this.database.write((tx) => claimRevocation(tx, row, now + REVOKE_CLAIM_MS)))) continue;
        if (await this.revoke(row)) await this.database.write((tx) => dropRevocation(tx, row.id));
        else if (row.attempts + 1 >= REVOKE_ATTEMPTS) {
          this.log.warn('upstream_revoke_given_up', { upstream: row.upstream, attempts: row.attempts + 1 });
          await this.database.write((tx) => dropRevocation(tx, row.id));
        } else {
          const later = now + REVOKE_FIRST_RETRY_MS * 2 ** row.attempts;
          await this.database.write((tx) => postponeRevocation(tx, row.id, row.attempts + 1, later));
        }
      }
    }
  }

  /**
   * Revokes one deleted account's tokens at its server, the refresh token first. True when done, or when there is
   * nothing more to do (no revocation endpoint, a token the server answered it will not revoke); false to try again
   * later: the server could not be reached or failed, this instance does not know the account's server or client (its
   * upstream was removed or moved, or, during a rollout, is configured differently here), or the tokens were sealed
   * under another session secret (an instance that still has it, or that secret put back, can send them; said once).
   * Tokens are never sent to another server; a row no instance can send is given up after REVOKE_ATTEMPTS.
   */
  private async revoke(account: UpstreamRevocation): Promise<boolean> {
    const upstream = this.upstream(account.upstream);
    const unknownHere = () => {
      this.log.info('upstream_revoke_postponed', { upstream: account.upstream, reason: 'its server or client is not configured here' });
      return false;
    };
    if (!upstream || upstream.server !== account.server) return unknownHere();
    if (unseal(this.tokenKey, account.accessSealed, where(account.userId, account.upstream, 'access')) === null) {
      if (account.attempts === 0)
        this.log.warn('upstream_revoke_postponed', { upstream: account.upstream, reason: 'sealed under another session secret' });
      return false;
    }
    try {
      const party = await this.clients.party(upstream);
      if (account.issuer !== party.as.issuer || account.clientId !== party.client.client_id) return unknownHere();
      if (party.as.revocation_endpoint === undefined) return true;
      for (const [sealed, what] of [
        [account.refreshSealed, 'refresh'],
        [account.accessSealed, 'access'],
      ] as const) {
        const token = sealed === null ? null : unseal(this.tokenKey, sealed, where(account.userId, account.upstream, what));
        if (token === null) continue;
        const response = await oauth.revocationRequest(party.as, party.client, party.auth, token, party.options());
        try {
          await oauth.processRevocationResponse(response);
        } catch (e) {
          // The server answered and will not revoke this token (say, unsupported_token_type for a JWT access token
          // it cannot revoke): asking again would change nothing.
          if (!(e instanceof oauth.ResponseBodyError && e.status < 500)) throw e;
          this.log.info('upstream_revoke_refused', { upstream: account.upstream, token: what, error: errorText(e) });
        }
      }
      return true;
    } catch (e) {
      this.log.warn('upstream_revoke_failed', { upstream: account.upstream, error: errorText(e) });
      return false;
    }
  }

  /**
   * The live connections to the upstream, for listing its tools and for whose listings count: connected at the
   * server configured now, of people who may still use it.
   */
  async liveAccounts(upstream: UpstreamConfig): Promise<UpstreamAccount[]> {
    const users = new Map((await listUsers(this.database.db)).map((u) => [u.id, u]));
    return (await listAccounts(this.database.db, { upstream: upstream.name })).filter((a) => {
      const user = users.get(a.userId);
      // Only someone who may still use the upstream: svc does not act with the account of someone who lost access.
      return (
        a.state === 'connected' &&
        a.server === upstream.server &&
        user !== undefined &&
        mayConnect(upstream, { labels: user.labels, restriction: null })
      );
    });
  }
}

/** Resolves when `work` is done, or after `ms`, whichever is first. */
const atMost = (work: Promise<unknown>, ms: number) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    void work
      .catch(() => undefined)
      .finally(() => {
        clearTimeout(timer);
        resolve();
      });
  });

const resourceOf = (upstream: UpstreamConfig) => (upstream.transport.kind === 'http' ? upstream.transport.url : '');
/** An error for the log: its message, never a token (oauth4webapi's messages name fields, not values). */
const errorText = (e: unknown) =>
  e instanceof oauth.ResponseBodyError
    ? `${e.error}: ${e.error_description ?? ''}`.slice(0, 200)
    : e instanceof Error
      ? e.message.slice(0, 200)
      : 'failed';
