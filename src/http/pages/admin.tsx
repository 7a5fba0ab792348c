// Administration pages: the user list (search, paging, add form, recent activity), one user's page, and the
// confirmation step before removal. Plain forms; no JavaScript needed.
import { Layout, formatTime, PageLinks } from './layout.tsx';
import type { User, SignInSummary } from '../../store/users.ts';
import type { AuditEntry } from '../../store/audit.ts';
import type { GrantListing } from '../../store/oauth.ts';
import type { Page } from '../../store/paging.ts';
import { itemPath } from './admin-items.tsx';
import { Notices, Pager, type Frame } from './admin-frame.tsx';

export function signInText(u: User, s: SignInSummary | undefined): string {
  const ways = [
    ...(u.hasPassword ? ['password'] : []),
    ...(s?.providers ?? []).map((p) => (p === 'header' ? 'proxy header' : p.replace(/^oidc:/, 'SSO '))),
  ];
  return ways.length === 0 ? 'not yet (pre-provisioned)' : ways.join(', ');
}

export interface UsersPageProps extends Frame {
  users: readonly User[];
  summaries: ReadonlyMap<number, SignInSummary>;
  query: string;
  page: number;
  pages: number;
  total: number;
  audit: readonly AuditEntry[];
  form?: Record<string, string> | undefined;
}

/** The users on this page of the list, with how each signs in. */
function UserTable(p: { users: readonly User[]; summaries: ReadonlyMap<number, SignInSummary> }) {
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th>User</th>
            <th>Email</th>
            <th>Labels</th>
            <th>Admin</th>
            <th>Signs in with</th>
            <th>Active tokens</th>
          </tr>
        </thead>
        <tbody>
          {p.users.map((u) => (
            <tr data-uid={u.uid}>
              <td>
                <a href={`/admin/users/${encodeURIComponent(u.uid)}`}>{u.uid}</a>
                {u.name && <div class="muted">{u.name}</div>}
              </td>
              <td>{u.email}</td>
              <td>{u.labels.length ? u.labels.join(', ') : <span class="muted">none</span>}</td>
              <td>{u.admin ? 'yes' : ''}</td>
              <td>{signInText(u, p.summaries.get(u.id))}</td>
              <td>{p.summaries.get(u.id)?.activeTokens ?? 0}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The form that adds a user, refilled (but for the password) after a refusal. */
function AddUserForm(p: { form?: Record<string, string> | undefined }) {
  return (
    <form method="post" action="/admin/users" class="stack">
      <label>
        uid <input name="uid" required maxlength={64} value={p.form?.uid ?? ''} autocomplete="off" />
      </label>
      <label>
        Email <input name="email" type="email" required value={p.form?.email ?? ''} />
      </label>
      <label>
        Name <input name="name" value={p.form?.name ?? ''} />
      </label>
      <label>
        Labels <input name="labels" value={p.form?.labels ?? ''} placeholder="eng, finance" />
      </label>
      <label>
        Password <input name="password" type="password" autocomplete="new-password" placeholder="empty: single sign-on only" />
      </label>
      <label class="inline">
        <input type="checkbox" name="admin" checked={p.form?.admin === 'on'} /> Administrator
      </label>
      <button type="submit">Add user</button>
    </form>
  );
}

export function UsersPage(p: UsersPageProps) {
  const link = (page: number) => `/admin/users?${new URLSearchParams({ ...(p.query ? { q: p.query } : {}), page: String(page) })}`;
  return (
    <Layout title="Users" nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <h1>Users</h1>
      <Notices notice={p.notice} error={p.error} />
      {/* biome-ignore lint/a11y/useSemanticElements: a search form with role=search works in every browser; <search> does not yet */}
      <form method="get" action="/admin/users" class="row" role="search">
        <label>
          Search
          <input name="q" value={p.query} placeholder="uid, email or name" />
        </label>
        <button type="submit" class="secondary">
          Search
        </button>
      </form>
      <p class="muted">
        {p.total} user(s){p.pages > 1 ? `, page ${p.page} of ${p.pages}` : ''}
      </p>
      <UserTable users={p.users} summaries={p.summaries} />
      <Pager page={p.page} pages={p.pages} link={link} />

      <h2>Add a user</h2>
      <AddUserForm form={p.form} />

      <h2>Recent activity</h2>
      <AuditTable entries={p.audit} />
      <p>
        <a href="/admin/audit">The whole audit trail →</a>
      </p>
    </Layout>
  );
}

function AuditTable(p: { entries: readonly AuditEntry[] }) {
  if (p.entries.length === 0) return <p class="muted">Nothing yet.</p>;
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th>When</th>
            <th>Who</th>
            <th>Action</th>
            <th>Target</th>
            <th>Details</th>
            <th>From</th>
          </tr>
        </thead>
        <tbody>
          {p.entries.map((e) => (
            <tr>
              <td>{formatTime(e.at)}</td>
              <td>
                {e.actor ?? <span class="muted">anonymous</span>} <span class="muted">({e.via})</span>
              </td>
              <td>{e.action}</td>
              <td>{e.target ?? ''}</td>
              <td>
                <code>{e.detail ? JSON.stringify(e.detail) : ''}</code>
              </td>
              <td>{e.peer ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The whole audit trail, newest first, a page at a time (`before` is the id to continue below). */
export function AuditPage(p: Frame & { entries: readonly AuditEntry[]; newer: boolean; older: number | null }) {
  return (
    <Layout title="Audit trail" nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <p>
        <a href="/admin/users">← Users</a>
      </p>
      <h1>Audit trail</h1>
      <p class="muted">
        Newest first. Export it with <code>svc audit list --json</code>.
      </p>
      <AuditTable entries={p.entries} />
      <nav class="row" aria-label="pages">
        {p.newer && <a href="/admin/audit">← Newest</a>}
        {p.older !== null && <a href={`/admin/audit?before=${p.older}`}>Older →</a>}
      </nav>
    </Layout>
  );
}

export interface UserPageProps extends Frame {
  user: User;
  summary: SignInSummary | undefined;
  /** what the user can read: how many documents, and a page of them (matching `query` when given) */
  sees: { count: number; query: string; items: readonly { id: string; title: string }[] };
  /** one page of the apps connected by OAuth, when it is on */
  grants: (Page<GrantListing> & { page: number; link: (page: number) => string }) | null;
}

/** The form that changes a user; a user who signs in by single sign-on gets no password. */
function UserForm(p: { user: User; summary: SignInSummary | undefined; base: string }) {
  const u = p.user;
  return (
    <form method="post" action={p.base} class="stack">
      <label>
        Email <input name="email" type="email" required value={u.email} />
      </label>
      <label>
        Name <input name="name" value={u.name} />
      </label>
      <label>
        Labels <input name="labels" value={u.labels.join(', ')} placeholder="eng, finance" />
      </label>
      <label class="inline">
        <input type="checkbox" name="admin" checked={u.admin} /> Administrator
      </label>
      {(p.summary?.providers.length ?? 0) > 0 ? (
        <p class="muted">Signs in with single sign-on only: no password can be set.</p>
      ) : (
        <>
          <label>
            New password <input name="password" type="password" autocomplete="new-password" placeholder="leave empty to keep" />
          </label>
          {u.hasPassword && (
            <label class="inline">
              <input type="checkbox" name="clear_password" /> Remove the password (single sign-on only)
            </label>
          )}
        </>
      )}
      <button type="submit">Save changes</button>
    </form>
  );
}

/** Revoking tokens, ending sessions, removing the user. */
function UserAccess(p: { base: string }) {
  return (
    <>
      <h2>Access</h2>
      <div class="row">
        <form method="post" action={`${p.base}/revoke-tokens`} class="inline">
          <button type="submit" class="danger">
            Revoke all tokens
          </button>
        </form>
        <form method="post" action={`${p.base}/end-sessions`} class="inline">
          <button type="submit" class="danger">
            End all sessions
          </button>
        </form>
        <a href={`${p.base}/remove`}>Remove user…</a>
      </div>
    </>
  );
}

/** The apps the user connected by OAuth, a page at a time, each with a revoke button. */
function UserGrants(p: { grants: NonNullable<UserPageProps['grants']>; base: string }) {
  return (
    <>
      <h2>Connected apps</h2>
      {p.grants.rows.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <ul class="grants">
          {p.grants.rows.map((g) => (
            <li data-grant-id={g.id}>
              {g.clientName}{' '}
              <span class="muted">
                granted {formatTime(g.createdAt)}
                {g.restriction ? `, only ${g.restriction.join(', ') || 'unlabelled documents'}` : ''}
              </span>{' '}
              <form method="post" action={`${p.base}/grants/${g.id}/revoke`} class="inline">
                <button type="submit" class="danger">
                  Revoke
                </button>
              </form>
            </li>
          ))}
        </ul>
      )}
      <PageLinks page={p.grants.page} more={p.grants.more} link={p.grants.link} what="apps" />
    </>
  );
}

/** What the user can read, searchable. */
function UserSees(p: { sees: UserPageProps['sees']; base: string }) {
  return (
    <>
      <h2 id="sees">What can this user see?</h2>
      <p>{p.sees.count} document(s), through a session or an unrestricted token; a label-restricted token sees a part of them.</p>
      {/* biome-ignore lint/a11y/useSemanticElements: a search form with role=search works in every browser; <search> does not yet */}
      <form method="get" action={`${p.base}#sees`} class="row" role="search">
        <label>
          Search their documents <input name="see" value={p.sees.query} placeholder="words" />
        </label>
        <button type="submit" class="secondary">
          Search
        </button>
      </form>
      {p.sees.items.length === 0 ? (
        <p class="muted">{p.sees.query ? 'Nothing they can see matches.' : 'Nothing.'}</p>
      ) : (
        <ul class="sees">
          {p.sees.items.map((i) => (
            <li data-item={i.id}>
              <a href={itemPath('view', i.id)}>{i.id}</a> <span class="muted">{i.title}</span>
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

export function UserPage(p: UserPageProps) {
  const u = p.user;
  const base = `/admin/users/${encodeURIComponent(u.uid)}`;
  return (
    <Layout title={u.uid} nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <p>
        <a href="/admin/users">← Users</a>
      </p>
      <h1>{u.uid}</h1>
      <Notices notice={p.notice} error={p.error} />
      <p class="muted">
        Signs in with: {signInText(u, p.summary)} · active tokens: {p.summary?.activeTokens ?? 0} · created {formatTime(u.createdAt)}
      </p>
      <UserForm user={u} summary={p.summary} base={base} />
      <UserAccess base={base} />
      {p.grants !== null && <UserGrants grants={p.grants} base={base} />}
      <UserSees sees={p.sees} base={base} />
    </Layout>
  );
}

export function RemovePage(p: Frame & { user: User }) {
  const base = `/admin/users/${encodeURIComponent(p.user.uid)}`;
  return (
    <Layout title={`Remove ${p.user.uid}`} nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <h1>Remove {p.user.uid}?</h1>
      <Notices error={p.error} />
      <p>
        This removes the user, ends their sessions and revokes their tokens at once. The uid <code>{p.user.uid}</code> stays reserved and
        can never be used again.
      </p>
      <div class="row">
        <form method="post" action={`${base}/remove`} class="inline">
          <button type="submit" class="danger">
            Remove {p.user.uid}
          </button>
        </form>
        <a href={base}>Cancel</a>
      </div>
    </Layout>
  );
}
