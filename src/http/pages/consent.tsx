// The consent page of the OAuth authorization endpoint, and its error page (shown instead of redirecting when the
// client or redirect URI cannot be trusted). Plain forms; the page cannot be framed (frame-ancestors 'none').
import { Layout, AccessChoice } from './layout.tsx';

export interface ConsentProps {
  nonce: string;
  uid: string;
  canLogout: boolean;
  clientName: string;
  /** dynamically registered: the name is the client's own claim */
  unverified: boolean;
  /** metadata-document clients: the host that publishes the document */
  clientHost: string | null;
  redirect: string;
  scope: string;
  request: string;
  /** the user's labels, offered as a restriction of what the app can read */
  labels: readonly string[];
  /** the standing grant's restriction, preselected so that asking again never widens it; null: none */
  restriction?: readonly string[] | null;
  /** the user allowed this app before */
  known?: boolean;
}

export function ConsentPage(p: ConsentProps) {
  return (
    <Layout title="Allow access?" nonce={p.nonce} signedIn={{ uid: p.uid, admin: false, canLogout: p.canLogout }}>
      <h1>
        Allow “{p.clientName}” to use svc as {p.uid}?
      </h1>
      {p.unverified && (
        <p class="notice error" role="alert">
          This app registered itself: svc cannot vouch for its name. Allow it only if you just asked for it.
        </p>
      )}
      {p.clientHost && (
        <p class="muted">
          Published by <strong>{p.clientHost}</strong>.
        </p>
      )}
      {p.known && (
        <p class="muted">
          You allowed this app before
          {p.restriction
            ? `, for documents labelled ${p.restriction.length === 0 ? '(none: unlabelled only)' : p.restriction.join(', ')}`
            : ''}
          ; your answer now replaces that.
        </p>
      )}
      <p>
        It will read the documents you can read, through MCP ({p.scope}), until you revoke it on your token page. After you answer, your
        browser goes to <strong>{p.redirect}</strong>.
      </p>
      <div class="row">
        <form method="post" action="/oauth/authorize" class="stack">
          <input type="hidden" name="request" value={p.request} />
          <AccessChoice labels={p.labels} who="the app" restriction={p.restriction ?? null} />
          <button type="submit" name="decision" value="approve">
            Allow
          </button>
        </form>
        <form method="post" action="/oauth/authorize" class="inline">
          <input type="hidden" name="request" value={p.request} />
          <button type="submit" name="decision" value="deny" class="secondary">
            Deny
          </button>
        </form>
      </div>
    </Layout>
  );
}

export function OauthErrorPage(p: { nonce: string; message: string }) {
  return (
    <Layout title="Cannot connect" nonce={p.nonce}>
      <h1>This app cannot connect</h1>
      <p class="notice error" role="alert">
        {p.message}
      </p>
      <p class="muted">Nothing was shared. The app that sent you here may need to be set up again.</p>
    </Layout>
  );
}
