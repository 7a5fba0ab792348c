// The frame of every page: no external assets, styles and scripts carry the response's CSP nonce.
import type { Child } from 'hono/jsx';
import { raw } from 'hono/html';

const STYLE = `
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #5b636e; --bg: #fff; --line: #d7dce2; --accent: #0b5cad; --bad: #b42318; --ok: #067647; --card: #f6f8fa; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ed; --muted: #9aa4af; --bg: #111418; --line: #2f3640; --accent: #6cb2ff; --bad: #ff8a80; --ok: #6fdc9b; --card: #1a1f25; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1rem; align-items: center; justify-content: space-between; padding: .75rem 1rem; border-bottom: 1px solid var(--line); }
header .brand { font-weight: 700; text-decoration: none; color: var(--fg); }
header nav { display: flex; gap: .75rem; align-items: center; flex-wrap: wrap; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.4rem; margin: .5rem 0 1rem; } h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
a { color: var(--accent); }
form.stack { display: grid; gap: .75rem; max-width: 24rem; }
label { display: grid; gap: .25rem; font-weight: 600; }
input, select, button, textarea { font: inherit; padding: .5rem .6rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); }
button { cursor: pointer; background: var(--accent); color: #fff; border-color: var(--accent); font-weight: 600; }
button.secondary { background: transparent; color: var(--accent); }
button.danger { background: transparent; color: var(--bad); border-color: var(--bad); }
.inline { display: inline; }
.row { display: flex; gap: .75rem; flex-wrap: wrap; align-items: end; }
.notice { padding: .75rem 1rem; border-radius: 6px; border: 1px solid var(--line); background: var(--card); margin: 1rem 0; }
.notice.error { border-color: var(--bad); color: var(--bad); }
.notice.ok { border-color: var(--ok); }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .45rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .85rem; color: var(--muted); font-weight: 600; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .9rem; }
pre { background: var(--card); padding: .75rem; border-radius: 6px; overflow-x: auto; border: 1px solid var(--line); }
.secret { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
.secret code { word-break: break-all; background: var(--card); padding: .4rem .5rem; border-radius: 6px; border: 1px solid var(--line); }
.state-active { color: var(--ok); } .state-expired, .state-revoked { color: var(--muted); }
.muted { color: var(--muted); }
code.label { background: var(--card); border: 1px solid var(--line); border-radius: 4px; padding: 0 .3rem; margin-right: .25rem; }
.warn { color: var(--bad); font-weight: 600; }
fieldset.access, fieldset.scopes { border: 1px solid var(--line); border-radius: 6px; padding: .5rem .75rem; display: grid; gap: .35rem; }
fieldset.access legend, fieldset.scopes legend { font-weight: 600; }
label.choice { display: flex; gap: .4rem; align-items: center; font-weight: 400; }
.labels { display: flex; gap: .75rem; flex-wrap: wrap; padding-left: 1.5rem; }
.side-by-side { display: grid; grid-template-columns: 1fr 1fr; gap: .75rem; }
pre.definition { white-space: pre-wrap; overflow-wrap: anywhere; }
mark.hidden-char { background: var(--bad); color: #fff; border-radius: 3px; padding: 0 .2em; font-family: monospace; }
section.tool, section.prompt, section.app { border-top: 1px solid var(--line); padding-top: .5rem; }
iframe.app-preview { width: 100%; height: 24rem; border: 2px dashed var(--bad); background: #fff; }
.state.pending, .state.changed, .state.held { color: var(--bad); } .state.approved { color: var(--ok); } .state.disabled, .state.gone { color: var(--muted); }
.sso { display: inline-block; padding: .5rem .9rem; border: 1px solid var(--accent); border-radius: 6px; text-decoration: none; font-weight: 600; }
`;

/**
 * What a token or a connected app may read: everything the person can see, or only documents with some of their
 * labels (the server reads the choice with restrictionFromForm).
 */
/**
 * The choice between a user's whole access and a label restriction. `restriction` preselects one (a grant asked
 * for again keeps what it has); absent or null: "Everything I can see".
 */
export function AccessChoice(p: { labels: readonly string[]; who: string; restriction?: readonly string[] | null }) {
  const restricted = p.restriction !== undefined && p.restriction !== null;
  return (
    <fieldset class="access">
      <legend>Access</legend>
      <label class="choice">
        <input type="radio" name="access" value="all" checked={!restricted} /> Everything I can see
      </label>
      <label class="choice">
        <input type="radio" name="access" value="labels" checked={restricted} /> Only documents with these labels (and unlabelled ones):
      </label>
      <div class="labels">
        {p.labels.length === 0 ? (
          <span class="muted">You have no labels: {p.who} would read unlabelled documents only.</span>
        ) : (
          p.labels.map((l) => (
            <label class="choice">
              <input type="checkbox" name="labels" value={l} checked={restricted && p.restriction!.includes(l)} /> <code>{l}</code>
            </label>
          ))
        )}
      </div>
    </fieldset>
  );
}

/** A time as pages show it: minutes, UTC. */
/** Links to the neighbours of one page of a list read a page at a time. */
export function PageLinks(p: { page: number; more: boolean; link: (page: number) => string; what: string }) {
  if (p.page <= 1 && !p.more) return null;
  return (
    <nav class="row" aria-label={`pages of ${p.what}`}>
      {p.page > 1 && <a href={p.link(p.page - 1)}>← Newer {p.what}</a>}
      {p.more && <a href={p.link(p.page + 1)}>Older {p.what} →</a>}
    </nav>
  );
}

export function formatTime(ms: number): string {
  return `${new Date(ms).toISOString().replace('T', ' ').slice(0, 16)} UTC`;
}

export interface LayoutProps {
  title: string;
  nonce: string;
  signedIn?: { uid: string; admin: boolean; canLogout: boolean } | undefined;
  children?: Child;
}

export function Layout(props: LayoutProps) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{props.title} · svc</title>
        <style nonce={props.nonce}>{raw(STYLE)}</style>
      </head>
      <body>
        <header>
          <a class="brand" href="/">
            svc
          </a>
          {props.signedIn && (
            <nav aria-label="account">
              {props.signedIn.admin && <a href="/admin/users">Users</a>}
              {props.signedIn.admin && <a href="/admin/items">Documents</a>}
              {props.signedIn.admin && <a href="/admin/tools">Tools</a>}
              <span class="muted">{props.signedIn.uid}</span>
              {props.signedIn.canLogout && (
                <form method="post" action="/logout" class="inline">
                  <button class="secondary" type="submit">
                    Sign out
                  </button>
                </form>
              )}
            </nav>
          )}
        </header>
        <main>{props.children}</main>
      </body>
    </html>
  );
}
