import { raw } from 'hono/html';
import { Layout, formatTime, AccessChoice, PageLinks } from './layout.tsx';
import type { TokenInfo } from '../../store/tokens.ts';
import type { GrantListing } from '../../store/oauth.ts';
import type { Page } from '../../store/paging.ts';
import { mcpClientConfig } from '../../mcp/client-config.ts';
import { SCOPES, SCOPE_MEANING, DEFAULT_SCOPES, type ScopeSet } from '../../domain/scopes.ts';
import { escapeHidden } from '../../domain/definition-text.ts';

export interface TokensProps {
  nonce: string;
  uid: string;
  admin: boolean;
  canLogout: boolean;
  baseUrl: string;
  /** one page of the person's tokens, newest first, and where its neighbours are */
  tokens: Page<TokenInfo> & { page: number; link: (page: number) => string };
  /** one page of the apps connected by OAuth, when it is on */
  grants: (Page<GrantListing> & { page: number; link: (page: number) => string }) | null;
  /** the owner's labels, offered as a token's restriction */
  labels: readonly string[];
  /** whether [auth] token accepts tokens; without it no token is made, and the page says so */
  tokensOn: boolean;
  /** the `auth = oauth` upstreams this person may connect to, and their connection to each; null when there is none */
  services: ConnectedService[] | null;
  created?: { token: string; name: string; expiresAt: number | null; restriction: readonly string[] | null; scopes: ScopeSet } | undefined;
  error?: string | undefined;
}

/** A person's connection to one `auth = oauth` upstream, as the page shows it: never a token. */
export interface ConnectedService {
  readonly upstream: string;
  /** none: not connected; reconnect: the upstream refused to renew it, or svc cannot open it (the session secret changed) */
  readonly state: 'none' | 'connected' | 'reconnect';
  readonly connectedAt: number | null;
  readonly lastUsedAt: number | null;
  readonly scope: string;
}

const LIFETIMES = [
  ['7d', '7 days'],
  ['30d', '30 days'],
  ['90d', '90 days'],
  ['365d', '1 year'],
  ['', 'No expiry'],
] as const;

function when(ms: number | null, never = 'never'): string {
  return ms === null ? never : formatTime(ms);
}

/** What a token may do: its scopes, shortest first. */
function scopesText(scopes: ScopeSet): string {
  return scopes.join(', ');
}

/** The scopes a new token may carry; admin only for an admin, and the server refuses it with a restriction. */
function ScopeChoice(p: { admin: boolean }) {
  return (
    <fieldset class="scopes">
      <legend>It may</legend>
      <input type="hidden" name="scope_choice" value="1" />
      {SCOPES.filter((s) => s !== 'admin' || p.admin).map((s) => (
        <label class="choice">
          <input type="checkbox" name="scopes" value={s} checked={DEFAULT_SCOPES.includes(s)} /> <code>{s}</code>: {SCOPE_MEANING[s]}
          {s === 'admin' && <span class="muted"> (only with "Everything I can see")</span>}
        </label>
      ))}
    </fieldset>
  );
}

/** What a token can read, in words. */
function accessText(labels: readonly string[] | null): string {
  if (labels === null) return 'everything you can see';
  if (labels.length === 0) return 'unlabelled documents only';
  return `only ${labels.join(', ')}`;
}

// Progressive enhancement only: the token is selectable text without it, and the server refuses checked labels
// with "everything" chosen.
const COPY_SCRIPT = `
document.querySelectorAll('input[name="labels"]').forEach(function (box) {
  box.addEventListener('change', function () {
    if (box.checked) document.querySelector('input[name="access"][value="labels"]').checked = true;
  });
});
document.querySelectorAll('[data-copy]').forEach(function (b) {
  b.hidden = false;
  b.addEventListener('click', function () {
    var el = document.getElementById(b.getAttribute('data-copy'));
    navigator.clipboard.writeText(el.textContent).then(function () { b.textContent = 'Copied'; });
  });
});`;

type Created = NonNullable<TokensProps['created']>;

/** The token just made, shown once, with its client configuration. */
function CreatedToken(p: { created: Created; baseUrl: string }) {
  return (
    <section class="notice ok" aria-live="polite">
      <h2>New token “{p.created.name}”</h2>
      <p>
        Copy it now: it is shown only once. Expires: {when(p.created.expiresAt)}. Access: {accessText(p.created.restriction)}. Scopes:{' '}
        {scopesText(p.created.scopes)}.
      </p>
      <div class="secret">
        <code id="new-token">{p.created.token}</code>
        <button type="button" class="secondary" data-copy="new-token" hidden>
          Copy
        </button>
      </div>
      <p>MCP client configuration (Claude Code, VS Code, Cursor and others):</p>
      <pre id="new-config">{mcpClientConfig(p.baseUrl, p.created.token)}</pre>
      <button type="button" class="secondary" data-copy="new-config" hidden>
        Copy configuration
      </button>
    </section>
  );
}

/** The form that makes a token: its name, lifetime, access and scopes. */
function MintForm(p: { labels: readonly string[]; admin: boolean }) {
  return (
    <form method="post" action="/auth/tokens" class="row">
      <label>
        Name
        <input name="name" required maxlength={100} placeholder="laptop agent" />
      </label>
      <label>
        Lifetime
        <select name="ttl">
          {LIFETIMES.map(([value, label]) => (
            <option value={value} selected={value === '90d'}>
              {label}
            </option>
          ))}
        </select>
      </label>
      <AccessChoice labels={p.labels} who="such a token" />
      <ScopeChoice admin={p.admin} />
      <button type="submit">Create token</button>
    </form>
  );
}

/** One of the person's tokens, with a revoke button while it is active. */
function TokenRow(p: { t: TokenInfo }) {
  const t = p.t;
  return (
    <tr data-token-id={t.id}>
      <td>{t.name}</td>
      <td class="token-access">{accessText(t.restriction)}</td>
      <td class="token-scopes">{scopesText(t.scopes)}</td>
      <td>{when(t.createdAt)}</td>
      <td>{when(t.expiresAt)}</td>
      <td>{when(t.lastUsedAt, '—')}</td>
      <td class={`state-${t.state}`}>{t.state}</td>
      <td>
        {t.state === 'active' && (
          <form method="post" action={`/auth/tokens/${t.id}/revoke`} class="inline">
            <button type="submit" class="danger" aria-label={`Revoke ${t.name}`}>
              Revoke
            </button>
          </form>
        )}
      </td>
    </tr>
  );
}

/** The person's tokens, a page at a time. */
function TokenTable(p: { tokens: TokensProps['tokens'] }) {
  return (
    <>
      {p.tokens.rows.length === 0 ? (
        <p class="muted">No tokens yet.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th>Name</th>
                <th>Access</th>
                <th>Scopes</th>
                <th>Created</th>
                <th>Expires</th>
                <th>Last used</th>
                <th>State</th>
                <th>
                  <span class="muted">Action</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {p.tokens.rows.map((t) => (
                <TokenRow t={t} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <PageLinks page={p.tokens.page} more={p.tokens.more} link={p.tokens.link} what="tokens" />
    </>
  );
}

/** The apps connected by OAuth, a page at a time, each with a revoke button. */
function ConnectedApps(p: { grants: NonNullable<TokensProps['grants']> }) {
  return (
    <>
      <h2>Connected apps</h2>
      {p.grants.rows.length === 0 ? (
        <p class="muted">No app is connected. Apps that sign in with OAuth (claude.ai, ChatGPT, Claude Code, VS Code) appear here.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th>App</th>
                <th>Granted</th>
                <th>Last used</th>
                <th>
                  <span class="muted">Action</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {p.grants.rows.map((g) => (
                <tr data-grant-id={g.id}>
                  <td>
                    {g.clientName}
                    {g.clientKind === 'dynamic' && <div class="muted">self-registered</div>}
                  </td>
                  <td>{when(g.createdAt)}</td>
                  <td>{when(g.lastUsedAt, '—')}</td>
                  <td>
                    <form method="post" action={`/auth/grants/${g.id}/revoke`} class="inline">
                      <button type="submit" class="danger" aria-label={`Revoke ${g.clientName}`}>
                        Revoke
                      </button>
                    </form>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <PageLinks page={p.grants.page} more={p.grants.more} link={p.grants.link} what="apps" />
    </>
  );
}

function ConnectedServices(p: { services: readonly ConnectedService[] }) {
  return (
    <>
      <h2>Connected services</h2>
      <p class="muted">Servers that act as you with your own account there. Connect once; your agents' calls then use it.</p>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th>Service</th>
              <th>Connected</th>
              <th>Last used</th>
              <th>Scopes</th>
              <th>
                <span class="muted">Action</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {p.services.map((s) => (
              <tr data-upstream={s.upstream} data-state={s.state}>
                <td>
                  {s.upstream}
                  {s.state === 'reconnect' && <div class="muted">must be connected again</div>}
                </td>
                <td>{s.state === 'none' ? 'not connected' : when(s.connectedAt)}</td>
                <td>{when(s.lastUsedAt, '—')}</td>
                {/* The upstream's authorization server chose these words: isolated, hidden characters as escapes. */}
                <td>{s.scope === '' ? '—' : <bdi>{escapeHidden(s.scope)}</bdi>}</td>
                <td>
                  {s.state !== 'connected' && (
                    <a class="button" href={`/upstreams/${s.upstream}/connect`} aria-label={`Connect ${s.upstream}`}>
                      Connect
                    </a>
                  )}
                  {s.state !== 'none' && (
                    <form method="post" action={`/upstreams/${s.upstream}/disconnect`} class="inline">
                      <button type="submit" class="danger" aria-label={`Disconnect ${s.upstream}`}>
                        Disconnect
                      </button>
                    </form>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

export function TokensPage(p: TokensProps) {
  return (
    <Layout title="Access tokens" nonce={p.nonce} signedIn={{ uid: p.uid, admin: p.admin, canLogout: p.canLogout }}>
      <h1>Personal access tokens</h1>
      <p class="muted">
        A token lets an AI agent or MCP client act as you, with exactly your access, at <code>{p.baseUrl}/mcp</code>.
      </p>
      {p.error && (
        <p class="notice error" role="alert">
          {p.error}
        </p>
      )}
      {p.created && <CreatedToken created={p.created} baseUrl={p.baseUrl} />}
      <h2>Create a token</h2>
      {p.tokensOn ? (
        <MintForm labels={p.labels} admin={p.admin} />
      ) : (
        <p class="muted">Personal access tokens are turned off on this server; ask its administrator.</p>
      )}
      <h2>Your tokens</h2>
      <TokenTable tokens={p.tokens} />
      {p.grants !== null && <ConnectedApps grants={p.grants} />}
      {p.services !== null && p.services.length > 0 && <ConnectedServices services={p.services} />}
      <script nonce={p.nonce}>{raw(COPY_SCRIPT)}</script>
    </Layout>
  );
}
