// Tables. Times are integer milliseconds since the epoch. Label columns hold the canonical string of
// domain/labels.ts. Invariants that must hold for every writer (uid reservation, cascades, FTS sync) are
// triggers in the custom migration next to the generated one, so no code path can forget them.
import { sqliteTable, text, integer, index, uniqueIndex, primaryKey } from 'drizzle-orm/sqlite-core';

export const users = sqliteTable('users', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  uid: text('uid').notNull().unique(),
  email: text('email').notNull(),
  name: text('name').notNull().default(''),
  labels: text('labels').notNull().default(''),
  admin: integer('admin', { mode: 'boolean' }).notNull().default(false),
  passwordHash: text('password_hash'),
  createdAt: integer('created_at').notNull(),
  updatedAt: integer('updated_at').notNull(),
});

/** Every uid ever created; rows are never deleted, so a removed user's uid stays reserved. */
export const uids = sqliteTable('uids', {
  uid: text('uid').primaryKey(),
  reservedAt: integer('reserved_at').notNull(),
});

/** Single sign-on subjects: (provider, subject) -> user. provider is 'oidc:<issuer>' or 'header'. */
export const identities = sqliteTable(
  'identities',
  {
    provider: text('provider').notNull(),
    subject: text('subject').notNull(),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.provider, t.subject] }), index('identities_user').on(t.userId)],
);

// Hashes are stored as hex text, not blobs: the libsql binding takes a lone Buffer parameter for a map of
// named parameters and aborts the process (see docs/database.md "Drivers").

/** Login sessions. id is the SHA-256 (hex) of the secret session id carried in the cookie. */
export const sessions = sqliteTable(
  'sessions',
  {
    id: text('id').primaryKey(),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [index('sessions_user').on(t.userId), index('sessions_expiry').on(t.expiresAt)],
);

/** Personal access tokens. Only the SHA-256 (hex) of the plaintext is kept. */
export const tokens = sqliteTable(
  'tokens',
  {
    id: text('id').primaryKey(),
    hash: text('hash').notNull(),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at'),
    lastUsedAt: integer('last_used_at'),
    revokedAt: integer('revoked_at'),
    /** a label restriction (canonical label string, '' for none of them), or null: the owner's whole access */
    labels: text('labels'),
    /** what the token may do: space-separated scopes (domain/scopes.ts); OAuth access tokens carry exactly `mcp` */
    scopes: text('scopes').notNull().default('mcp'),
    /** OAuth access tokens: the grant and refresh family they were issued under (null for personal tokens) */
    grantId: text('grant_id'),
    familyId: text('family_id'),
  },
  (t) => [uniqueIndex('tokens_hash').on(t.hash), index('tokens_user').on(t.userId), index('tokens_expiry').on(t.expiresAt)],
);

/** Documents. seq is the integer key the search index points at; id is the public id. */
export const items = sqliteTable('items', {
  seq: integer('seq').primaryKey({ autoIncrement: true }),
  id: text('id').notNull().unique(),
  title: text('title').notNull(),
  text: text('text').notNull(),
  labels: text('labels').notNull().default(''),
  createdAt: integer('created_at').notNull(),
  updatedAt: integer('updated_at').notNull(),
});

/**
 * The search index's label sets: one row per distinct `items.labels` value, with how many items carry it and their
 * words in all, so a search's statistics cover only what its caller may see. The postings (`search_postings`, made
 * in the migration, like `search_terms`: both are WITHOUT ROWID tables) are keyed (term, set, item), so a search reads
 * no posting of a label set its caller may not see; `search_terms` counts a word's items per label set.
 */
export const searchSets = sqliteTable('search_sets', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  labels: text('labels').notNull().unique(),
  docs: integer('docs').notNull(),
  length: integer('length').notNull(),
});

/**
 * One row per indexed item: its label set, length in words and the JSON array of the words it was indexed under,
 * which is what the triggers remove when the item changes or goes (an item without a row is not indexed yet).
 */
export const searchDocs = sqliteTable(
  'search_docs',
  {
    itemSeq: integer('item_seq')
      .primaryKey()
      .references(() => items.seq, { onDelete: 'cascade' }),
    /** the item's id: a REPLACE by a writer with foreign keys off leaves the old seq's row, found by its id */
    itemId: text('item_id').notNull(),
    setId: integer('set_id').notNull(),
    length: integer('length').notNull(),
    terms: text('terms').notNull(),
  },
  (t) => [index('search_docs_item_id').on(t.itemId)],
);

/** One row per (item, label): the ACL filter in SQL looks for a label of the item the user lacks. */
export const itemLabels = sqliteTable(
  'item_labels',
  {
    itemSeq: integer('item_seq')
      .notNull()
      .references(() => items.seq, { onDelete: 'cascade' }),
    label: text('label').notNull(),
  },
  (t) => [primaryKey({ columns: [t.itemSeq, t.label] })],
);

/** Failed logins, one row each; counted over a sliding window per account and per client address. */
export const loginFailures = sqliteTable(
  'login_failures',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    key: text('key').notNull(),
    at: integer('at').notNull(),
  },
  (t) => [index('login_failures_key_at').on(t.key, t.at)],
);

/** Who did what, when, from where. `detail` is JSON and never holds a secret. */
export const audit = sqliteTable(
  'audit',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    at: integer('at').notNull(),
    actor: text('actor'),
    via: text('via').notNull(),
    action: text('action').notNull(),
    target: text('target'),
    detail: text('detail'),
    peer: text('peer'),
    /** the trace of the request that wrote it, when svc traces (CONTRACT §8): 32 hex digits */
    traceId: text('trace_id'),
  },
  (t) => [index('audit_at').on(t.at)],
);

/** Single sign-on logins in progress: bound to one browser by a signed cookie, used once, short-lived. */
export const oidcFlows = sqliteTable(
  'oidc_flows',
  {
    id: text('id').primaryKey(),
    state: text('state').notNull(),
    nonce: text('nonce').notNull(),
    verifier: text('verifier').notNull(),
    next: text('next').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [index('oidc_flows_expiry').on(t.expiresAt)],
);

/**
 * Random keys made by the database itself at migration, shared by every svc process on it, for HMACs that must
 * verify on any instance when no configured secret serves (MCP session ids without a session secret).
 */
export const serverKeys = sqliteTable('server_keys', {
  name: text('name').primaryKey(),
  key: text('key').notNull(),
});

/** OAuth clients: registered dynamically (RFC 7591), by a metadata document URL, or by an admin (`svc oauth client`). */
export const oauthClients = sqliteTable(
  'oauth_clients',
  {
    id: text('id').primaryKey(),
    /** 'dynamic', 'metadata' or 'static' */
    kind: text('kind').notNull(),
    name: text('name').notNull(),
    /** JSON array of the registered redirect URIs */
    redirectUris: text('redirect_uris').notNull(),
    /** 'none', 'client_secret_post' or 'client_secret_basic' */
    authMethod: text('auth_method').notNull(),
    /** SHA-256 (hex) of the client secret, for confidential clients */
    secretHash: text('secret_hash'),
    createdAt: integer('created_at').notNull(),
    lastUsedAt: integer('last_used_at'),
    /** metadata documents: when the cached copy must be fetched again */
    refreshAt: integer('refresh_at'),
  },
  // Every registration counts and forgets the never-used ones (last_used_at NULL), oldest first, among clients that
  // were used, which only grow.
  (t) => [index('oauth_clients_unused').on(t.lastUsedAt, t.createdAt)],
);

/** Authorization requests waiting for the user's consent; `id` is the SHA-256 of the secret the consent form carries. */
export const oauthRequests = sqliteTable(
  'oauth_requests',
  {
    id: text('id').primaryKey(),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    clientId: text('client_id').notNull(),
    redirectUri: text('redirect_uri').notNull(),
    scope: text('scope').notNull(),
    state: text('state'),
    codeChallenge: text('code_challenge').notNull(),
    resource: text('resource').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  // A client with a request waiting for consent is never forgotten to make room for another (oauth-clients.ts).
  (t) => [index('oauth_requests_client').on(t.clientId)],
);

/** What a user allowed a client: one grant per user and client, widened when they consent to more. */
export const oauthGrants = sqliteTable(
  'oauth_grants',
  {
    id: text('id').primaryKey(),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    clientId: text('client_id').notNull(),
    scope: text('scope').notNull(),
    /** JSON array of the redirect URIs consented to */
    redirectUris: text('redirect_uris').notNull(),
    /** the label restriction chosen at consent, carried by every token issued under the grant; null: none */
    labels: text('labels'),
    createdAt: integer('created_at').notNull(),
    lastUsedAt: integer('last_used_at'),
    revokedAt: integer('revoked_at'),
  },
  (t) => [uniqueIndex('oauth_grants_user_client').on(t.userId, t.clientId), index('oauth_grants_client').on(t.clientId)],
);

/** Authorization codes: single use, short-lived, bound to client, redirect URI, PKCE challenge and resource. */
export const oauthCodes = sqliteTable(
  'oauth_codes',
  {
    /** SHA-256 (hex) of the code */
    id: text('id').primaryKey(),
    grantId: text('grant_id')
      .notNull()
      .references(() => oauthGrants.id, { onDelete: 'cascade' }),
    clientId: text('client_id').notNull(),
    redirectUri: text('redirect_uri').notNull(),
    codeChallenge: text('code_challenge').notNull(),
    resource: text('resource').notNull(),
    scope: text('scope').notNull(),
    expiresAt: integer('expires_at').notNull(),
    usedAt: integer('used_at'),
    /** the refresh family its use started, revoked if the code is used again */
    familyId: text('family_id'),
  },
  // Whether a grant still has a code waiting to be redeemed (store/oauth.ts, when an app signs itself out).
  (t) => [index('oauth_codes_grant').on(t.grantId)],
);

/** Refresh tokens, rotated at every use; all of one family descend from one code. */
export const oauthRefreshTokens = sqliteTable(
  'oauth_refresh_tokens',
  {
    /** SHA-256 (hex) of the token */
    id: text('id').primaryKey(),
    familyId: text('family_id').notNull(),
    /** the token this one was rotated from (its id); two used successors of one parent mean a forked family */
    parentId: text('parent_id'),
    grantId: text('grant_id')
      .notNull()
      .references(() => oauthGrants.id, { onDelete: 'cascade' }),
    clientId: text('client_id').notNull(),
    resource: text('resource').notNull(),
    scope: text('scope').notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
    /** when it was exchanged for a new one */
    rotatedAt: integer('rotated_at'),
    /** its one use within the grace period after rotation */
    graceUsedAt: integer('grace_used_at'),
    revokedAt: integer('revoked_at'),
  },
  (t) => [
    index('oauth_refresh_family').on(t.familyId),
    index('oauth_refresh_parent').on(t.parentId),
    index('oauth_refresh_grant').on(t.grantId),
  ],
);

/**
 * Mail to users, claimed and sent by whichever svc process gets to it first. `key` makes each notice exist once
 * (a token's expiry warning, one audit event); a claim is a lease, so a process that dies mid-send leaves the
 * notice to another.
 */
export const notices = sqliteTable(
  'notices',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    key: text('key').notNull().unique(),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    /** token_expiring, token_created, grant_made, password_changed */
    kind: text('kind').notNull(),
    /** JSON: what the mail names (a token's or client's name, an expiry time); never a secret */
    detail: text('detail').notNull(),
    createdAt: integer('created_at').notNull(),
    nextAttemptAt: integer('next_attempt_at').notNull(),
    attempts: integer('attempts').notNull().default(0),
    claimedUntil: integer('claimed_until'),
    doneAt: integer('done_at'),
    /** sent, no_email, obsolete (the token is gone), gave_up; null while pending */
    outcome: text('outcome'),
  },
  (t) => [index('notices_due').on(t.doneAt, t.nextAttemptAt)],
);

/** How far the notices have read: the audit trail up to auditId, tokens expiring up to expiryUntil (one row). */
export const noticeCursor = sqliteTable('notice_cursor', {
  id: integer('id').primaryKey(),
  auditId: integer('audit_id').notNull(),
  expiryUntil: integer('expiry_until').notNull(),
});

/**
 * Identity assertions (ID-JAG) already exchanged, kept until they expire so that none is accepted twice, by any
 * instance: the key is the SHA-256 (hex) of the issuer and the assertion's jti.
 */
export const oauthAssertions = sqliteTable(
  'oauth_assertions',
  {
    id: text('id').primaryKey(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [index('oauth_assertions_expiry').on(t.expiresAt)],
);

/**
 * What svc reviews of upstream MCP servers (CONTRACT §6.1, §6.3), one row per (upstream, kind, name): a tool, a
 * prompt or an app (`name`: its upstream `ui://` URI). The definition last discovered and its fingerprint, the
 * definition an admin approved (what agents are told) and its fingerprint, its own labels (null: its upstream's),
 * and its state: pending, approved, changed, disabled or gone. The table kept the name it had when it held tools only.
 */
export const upstreamTools = sqliteTable(
  'upstream_tools',
  {
    upstream: text('upstream').notNull(),
    /** tool, prompt or app (store/upstream-tools.ts, ReviewedKind) */
    kind: text('kind').notNull().default('tool'),
    name: text('name').notNull(),
    definition: text('definition').notNull(),
    fingerprint: text('fingerprint').notNull(),
    approvedDefinition: text('approved_definition'),
    approvedFingerprint: text('approved_fingerprint'),
    labels: text('labels'),
    state: text('state').notNull(),
    /** which server the row was recorded from (UpstreamConfig.server); null: before svc kept it */
    server: text('server'),
    /**
     * why the definition found last is held (never offered, cannot be approved as it is): a JSON array of reasons
     * (hidden characters, its size, a name of dots, a name listed twice); null: nothing holds it
     */
    held: text('held'),
    firstSeenAt: integer('first_seen_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.upstream, t.kind, t.name] })],
);

/**
 * Keys that sign identity assertions for upstreams (CONTRACT §6.1): the private JWK sealed with a key derived from the
 * session secret, the public JWK as published in the JWKS. The newest unretired key signs; a retired one stays
 * published for a day.
 */
export const signingKeys = sqliteTable('signing_keys', {
  kid: text('kid').primaryKey(),
  privateSealed: text('private_sealed').notNull(),
  publicJwk: text('public_jwk').notNull(),
  createdAt: integer('created_at').notNull(),
  retiredAt: integer('retired_at'),
});

/**
 * What svc last found when it listed an upstream's tools: up or down, and when (svc upstream list); and the server
 * (UpstreamConfig.server) it last listed successfully, so `review = auto` approves only that server's first listing
 * (null: none since svc kept it; then the upstream's rows tell whether it was listed).
 */
export const upstreamStatus = sqliteTable('upstream_status', {
  upstream: text('upstream').primaryKey(),
  state: text('state').notNull(),
  checkedAt: integer('checked_at').notNull(),
  listedServer: text('listed_server'),
});

/**
 * svc's own registration at an `auth = oauth` upstream's authorization server (CONTRACT §6.2), when no client is
 * configured: made once by client metadata document or DCR, for the server the upstream is now (`server`), and
 * shared by every instance. A client secret the server issued is sealed with a key derived from the session secret.
 */
export const upstreamClients = sqliteTable('upstream_clients', {
  upstream: text('upstream').primaryKey(),
  server: text('server').notNull(),
  issuer: text('issuer').notNull(),
  clientId: text('client_id').notNull(),
  clientSecretSealed: text('client_secret_sealed'),
  /** cimd or dcr */
  kind: text('kind').notNull(),
  registeredAt: integer('registered_at').notNull(),
});

/**
 * A person's own account at an `auth = oauth` upstream (CONTRACT §6.2): their tokens, sealed with AES-256-GCM under a
 * key derived from the session secret, only ever sent to that upstream. `reconnect` when a refresh was refused.
 */
export const upstreamAccounts = sqliteTable(
  'upstream_accounts',
  {
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    upstream: text('upstream').notNull(),
    /** the server the tokens are for (UpstreamConfig.server): another server's tokens are never sent */
    server: text('server').notNull(),
    issuer: text('issuer').notNull(),
    clientId: text('client_id').notNull(),
    accessSealed: text('access_sealed').notNull(),
    refreshSealed: text('refresh_sealed'),
    expiresAt: integer('expires_at'),
    scope: text('scope').notNull(),
    /** connected or reconnect */
    state: text('state').notNull(),
    connectedAt: integer('connected_at').notNull(),
    lastUsedAt: integer('last_used_at'),
    refreshedAt: integer('refreshed_at'),
    /**
     * while in the future, one instance is refreshing these tokens and the others wait for its result: a server that
     * rotates refresh tokens takes a second use of one as theft and revokes the whole grant
     */
    refreshingUntil: integer('refreshing_until'),
    /**
     * what this connection last listed of the upstream's tools, as JSON {name: fingerprint}, a tool that listing
     * holds (a name listed twice, hidden characters) as null; null: not listed yet. The person is offered only the
     * tools it has, as they were approved, and a tool is `gone` only when no connected person's listing has it
     */
    listedTools: text('listed_tools'),
    /** when svc last listed the upstream with this connection, or tried to (a failed try keeps the earlier listing) */
    listedAt: integer('listed_at'),
  },
  (t) => [primaryKey({ columns: [t.userId, t.upstream] }), index('upstream_accounts_upstream').on(t.upstream)],
);

/**
 * Tokens of accounts that were deleted (Disconnect, connecting again, user removal, "revoke all") and are still to be
 * revoked at their server (RFC 7009), sealed as they were. Queued in the deletion's own transaction, so a deletion by
 * the command line (which does not hold the session secret) is revoked by a running `svc serve`; a failed
 * revocation is tried again later, a few times.
 */
export const upstreamRevocations = sqliteTable(
  'upstream_revocations',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    /** whose tokens they were (the sealed tokens are bound to it); the user may be gone */
    userId: integer('user_id').notNull(),
    upstream: text('upstream').notNull(),
    server: text('server').notNull(),
    issuer: text('issuer').notNull(),
    clientId: text('client_id').notNull(),
    accessSealed: text('access_sealed').notNull(),
    refreshSealed: text('refresh_sealed'),
    queuedAt: integer('queued_at').notNull(),
    attempts: integer('attempts').notNull().default(0),
    /** not tried before this time (also an instance's claim while it tries) */
    nextAt: integer('next_at').notNull(),
  },
  (t) => [index('upstream_revocations_next').on(t.nextAt)],
);

/**
 * A connection under way: the browser was sent to the upstream's authorization server with `state`, whose SHA-256 is
 * the id. Single-use, bound to the person and (when they signed in with one) their session, good for 10 minutes.
 */
export const upstreamConnects = sqliteTable(
  'upstream_connects',
  {
    id: text('id').primaryKey(),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    sessionId: text('session_id'),
    upstream: text('upstream').notNull(),
    verifierSealed: text('verifier_sealed').notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [index('upstream_connects_user').on(t.userId)],
);
