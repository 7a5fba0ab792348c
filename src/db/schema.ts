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
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.provider, t.subject] }), index('identities_user').on(t.userId)],
);

// Hashes are stored as hex text, not blobs: the libsql binding takes a lone Buffer parameter for a map of
// named parameters and aborts the process (see README "Database").

/** Login sessions. id is the SHA-256 (hex) of the secret session id carried in the cookie. */
export const sessions = sqliteTable(
  'sessions',
  {
    id: text('id').primaryKey(),
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
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
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at'),
    lastUsedAt: integer('last_used_at'),
    revokedAt: integer('revoked_at'),
    /** a label restriction (canonical label string, '' for none of them), or null: the owner's whole access */
    labels: text('labels'),
  },
  (t) => [uniqueIndex('tokens_hash').on(t.hash), index('tokens_user').on(t.userId)],
);

/** Documents. seq is the integer key the FTS5 index points at; id is the public id. */
export const items = sqliteTable('items', {
  seq: integer('seq').primaryKey({ autoIncrement: true }),
  id: text('id').notNull().unique(),
  title: text('title').notNull(),
  text: text('text').notNull(),
  labels: text('labels').notNull().default(''),
  createdAt: integer('created_at').notNull(),
  updatedAt: integer('updated_at').notNull(),
});

/** One row per (item, label): the ACL filter in SQL looks for a label of the item the user lacks. */
export const itemLabels = sqliteTable(
  'item_labels',
  {
    itemSeq: integer('item_seq').notNull().references(() => items.seq, { onDelete: 'cascade' }),
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
