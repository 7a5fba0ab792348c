import { Layout } from './layout.tsx';

export interface LoginProps {
  nonce: string;
  next: string;
  local: boolean;
  oidc: boolean;
  error?: string | undefined;
  username?: string | undefined;
}

export function LoginPage(p: LoginProps) {
  const oidcHref = p.next === '/' ? '/oidc/login' : `/oidc/login?next=${encodeURIComponent(p.next)}`;
  return (
    <Layout title="Sign in" nonce={p.nonce}>
      <h1>Sign in</h1>
      {p.error && (
        <p class="notice error" role="alert">
          {p.error}
        </p>
      )}
      {p.local && (
        <form method="post" action="/login" class="stack">
          <input type="hidden" name="next" value={p.next} />
          <label>
            Username
            <input name="username" autocomplete="username" required value={p.username ?? ''} autofocus />
          </label>
          <label>
            Password
            <input name="password" type="password" autocomplete="current-password" required />
          </label>
          <button type="submit">Sign in</button>
        </form>
      )}
      {p.oidc && (
        <p>
          <a class="sso" href={oidcHref}>
            Sign in with single sign-on
          </a>
        </p>
      )}
      {!p.local && !p.oidc && <p>This server has no sign-in page; use a personal access token or your company's proxy.</p>}
    </Layout>
  );
}

/**
 * Where a sign-in lands when its next page sends the browser on to another site: the browser goes on by itself (the
 * answer's `Refresh`), or by the link.
 */
export function OnwardPage(p: { nonce: string; next: string }) {
  return (
    <Layout title="Signed in" nonce={p.nonce}>
      <h1>Signed in</h1>
      <p>
        <a href={p.next}>Continue</a>
      </p>
    </Layout>
  );
}
