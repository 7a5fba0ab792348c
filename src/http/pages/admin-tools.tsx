// /admin/tools: what svc reviews of its upstreams, by upstream and kind (tools, then prompts, then apps), with their
// state, the labels that decide who may use them (their own or their upstream's), who may, what changed in a
// definition (the approved one beside the new one), and the approve, label and disable buttons (CONTRACT §6.1, §6.3).
import { Layout, PageLinks, formatTime } from './layout.tsx';
import { Notices, type Frame } from './admin-frame.tsx';
import type { AppDefinition, ReviewedKind, UpstreamObject } from '../../store/upstream-tools.ts';
import { escapeHidden, splitHidden } from '../../domain/definition-text.ts';

export interface ToolView {
  readonly object: UpstreamObject;
  /** the labels that decide: its own, or its upstream's; null when its upstream is not configured */
  readonly labels: readonly string[] | null;
  /** why an agent is never offered it, besides its state (a merged name too long, say) */
  readonly notOffered: string | null;
  /** uids of users who may use it now (at most a page), and how many in all */
  readonly users: readonly string[];
  readonly userCount: number;
}

/** Per `auth = oauth` upstream, who is connected to it: uid, state and when, never a token. */
export type ConnectedPeople = ReadonlyMap<
  string,
  readonly { uid: string; state: string; connectedAt: number; lastUsedAt: number | null }[]
>;

function Connected(p: { people: NonNullable<ReturnType<ConnectedPeople['get']>> }) {
  return (
    <p class="connected-people">
      Connected accounts:{' '}
      {p.people.length === 0 ? (
        <span class="muted">nobody yet; its tools are listed once someone connects</span>
      ) : (
        p.people.map((a, i) => (
          <>
            {i > 0 && ', '}
            <span data-connected={a.uid}>
              {a.uid} ({a.state === 'connected' ? `since ${formatTime(a.connectedAt)}` : 'must connect again'})
            </span>
          </>
        ))
      )}
    </p>
  );
}

/**
 * Upstream text as a person can read it: isolated from the page's direction, and each character a reader could not
 * see (a control, a zero-width or bidi character, a tag character) shown as its escape, marked.
 */
function Shown(p: { text: string; lines?: boolean }) {
  return (
    <bdi>{splitHidden(p.text, p.lines).map((part) => ('hidden' in part ? <mark class="hidden-char">{part.hidden}</mark> : part.text))}</bdi>
  );
}

function DefinitionText(p: { value: unknown; class: string }) {
  return (
    <pre class={p.class} dir="ltr">
      <Shown text={JSON.stringify(p.value, null, 2)} lines />
    </pre>
  );
}

function Definition(p: { view: ToolView }) {
  const t = p.view.object;
  if (t.state !== 'changed' || t.approvedDefinition === null) return <DefinitionText value={t.definition} class="definition" />;
  return (
    <div class="side-by-side">
      <div>
        <h4>Approved (what agents are told)</h4>
        <DefinitionText value={t.approvedDefinition} class="definition approved" />
      </div>
      <div>
        <h4>Now offered by the upstream</h4>
        <DefinitionText value={t.definition} class="definition offered" />
      </div>
    </div>
  );
}

/** Where an admin previews an app's bytes as the fingerprint `fingerprint` pins them (routes/admin-tools.tsx). */
export const previewHref = (t: Pick<UpstreamObject, 'upstream' | 'name'>, fingerprint: string) =>
  `/admin/tools/${encodeURIComponent(t.upstream)}/${encodeURIComponent(t.name)}/preview?fingerprint=${fingerprint}`;

/**
 * What an app asks of the person's client (its `_meta.ui`, as the upstream serves it now): its CSP, permissions and
 * domain, as upstream text is shown; whether it is served as text or as a base64 blob (decoded as the reference host
 * does in the preview); and its bytes, previewed on request in a sandboxed frame (scripts run without svc's origin,
 * and the preview's own policy lets them reach nothing).
 */
function AppFacts(p: { app: UpstreamObject }) {
  const definition = p.app.definition as AppDefinition;
  const ui = definition.ui ?? {};
  const facts: [string, string, unknown][] = [
    ['csp', 'Content-Security-Policy it asks for', ui.csp],
    ['permissions', 'Permissions it asks for', ui.permissions],
    ['domain', 'Domain', ui.domain],
  ];
  return (
    <div class="app-facts">
      <dl>
        {facts.map(([key, name, value]) => (
          <>
            <dt>{name}</dt>
            <dd data-fact={key}>
              {value === undefined ? <span class="muted">none</span> : <DefinitionText value={value} class="definition" />}
            </dd>
          </>
        ))}
        <dt>Served as</dt>
        <dd data-fact="encoding">
          {definition.encoding === 'blob' ? (
            <>
              a base64 blob. Hosts decode a blob in their own ways: the preview decodes it as the MCP Apps reference host does (atob, each
              byte one character, as Latin-1), and a host that decodes its bytes as UTF-8 shows other text wherever a byte is over 127.
            </>
          ) : (
            'text'
          )}
        </dd>
      </dl>
      <details class="app-preview">
        <summary>Preview its contents (sandboxed)</summary>
        <iframe
          class="app-preview"
          sandbox="allow-scripts"
          loading="lazy"
          referrerpolicy="no-referrer"
          title={`Preview of ${escapeHidden(p.app.name)}`}
          src={previewHref(p.app, p.app.fingerprint)}
        />
      </details>
    </div>
  );
}

/** The kind's form field: a tool's forms have none (what they posted before there were kinds). */
function KindField(p: { kind: ReviewedKind }) {
  return p.kind === 'tool' ? null : <input type="hidden" name="kind" value={p.kind} />;
}

function ToolActions(p: { view: ToolView }) {
  const t = p.view.object;
  const action = `/admin/tools/${encodeURIComponent(t.upstream)}/${encodeURIComponent(t.name)}`;
  return (
    <div class="row">
      {t.state !== 'approved' && t.state !== 'gone' && t.held === null && (
        <form method="post" action={action} class="inline">
          <KindField kind={t.kind} />
          <input type="hidden" name="action" value="approve" />
          <input type="hidden" name="fingerprint" value={t.fingerprint} />
          <button type="submit">Approve</button>
        </form>
      )}
      {t.state !== 'disabled' && (
        <form method="post" action={action} class="inline">
          <KindField kind={t.kind} />
          <input type="hidden" name="action" value="disable" />
          <button type="submit" class="secondary">
            Disable
          </button>
        </form>
      )}
      <form method="post" action={action} class="inline">
        <KindField kind={t.kind} />
        <input type="hidden" name="action" value="label" />
        <label>
          Own labels <input name="labels" value={t.labels === null ? '' : t.labels.join(' ')} />
        </label>
        <button type="submit" class="secondary">
          Set labels
        </button>
      </form>
      {t.labels !== null && (
        <form method="post" action={action} class="inline">
          <KindField kind={t.kind} />
          <input type="hidden" name="action" value="inherit" />
          <button type="submit" class="secondary">
            Use its upstream's labels
          </button>
        </form>
      )}
    </div>
  );
}

function ToolCard(p: { view: ToolView }) {
  const { object: t, labels } = p.view;
  // data-tool="UPSTREAM/NAME" for a tool, data-prompt and data-app for the others.
  const named = { [`data-${t.kind}`]: `${t.upstream}/${t.name}` };
  return (
    <section class={t.kind} {...named} data-kind={t.kind} data-state={t.state}>
      <h3>
        <Shown text={t.name} /> <span class={`state ${t.state}`}>{t.state}</span>
        {t.held !== null && (
          <>
            {' '}
            <span class="state held">held</span>
          </>
        )}
      </h3>
      {t.held !== null && (
        <div class="notice error held-reasons">
          Held: never offered to agents, and it cannot be approved as it is, because
          <ul>
            {t.held.map((r) => (
              <li>
                <Shown text={r} />
              </li>
            ))}
          </ul>
        </div>
      )}
      <p>
        Labels:{' '}
        {labels === null ? (
          <span class="muted">its upstream is not configured</span>
        ) : labels.length ? (
          labels.map((l) => <code class="label">{l}</code>)
        ) : (
          <span class="muted">none: every user</span>
        )}{' '}
        <span class="muted">({t.labels === null ? "its upstream's" : 'its own'})</span>
      </p>
      {p.view.notOffered && <p class="notice error">Never offered to agents: {p.view.notOffered}</p>}
      <p>
        Who may use it:{' '}
        {t.state !== 'approved' ? (
          <span class="muted">nobody until it is approved</span>
        ) : p.view.userCount === 0 ? (
          <span class="muted">nobody</span>
        ) : (
          `${p.view.users.join(', ')}${p.view.userCount > p.view.users.length ? ` and ${p.view.userCount - p.view.users.length} more` : ''}`
        )}
      </p>
      <Definition view={p.view} />
      {t.kind === 'app' && <AppFacts app={t} />}
      <ToolActions view={p.view} />
    </section>
  );
}

const KINDS: readonly { kind: ReviewedKind; plural: string }[] = [
  { kind: 'tool', plural: 'tools' },
  { kind: 'prompt', plural: 'prompts' },
  { kind: 'app', plural: 'apps' },
];

/** Links to all kinds, or one: the page shown now is not a link. */
function KindLinks(p: { kind: ReviewedKind | undefined; link: (kind: ReviewedKind | undefined) => string }) {
  const choices: { kind: ReviewedKind | undefined; text: string }[] = [
    { kind: undefined, text: 'all' },
    ...KINDS.map((k) => ({ kind: k.kind, text: k.plural })),
  ];
  return (
    <nav class="row" aria-label="kinds">
      Show: {choices.map((c) => (c.kind === p.kind ? <strong>{c.text}</strong> : <a href={p.link(c.kind)}>{c.text}</a>))}
    </nav>
  );
}

export function ToolsPage(
  p: Frame & {
    views: readonly ToolView[];
    paging: { page: number; more: boolean; link: (page: number) => string };
    kinds: { shown: ReviewedKind | undefined; link: (kind: ReviewedKind | undefined) => string };
    connected: ConnectedPeople;
  },
) {
  const upstreams = [...new Set([...p.views.map((v) => v.object.upstream), ...p.connected.keys()])];
  return (
    <Layout title="Tools, prompts and apps" nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <h1>Upstream tools, prompts and apps</h1>
      <Notices notice={p.notice} error={p.error} />
      <KindLinks kind={p.kinds.shown} link={p.kinds.link} />
      {upstreams.length === 0 && (
        <p class="muted">Nothing to review yet: svc lists the tools and prompts of each [upstream] section once it serves.</p>
      )}
      {upstreams.map((u) => (
        <>
          <h2>{u}</h2>
          {p.connected.has(u) && <Connected people={p.connected.get(u)!} />}
          {KINDS.map(({ kind, plural }) => {
            const views = p.views.filter((v) => v.object.upstream === u && v.object.kind === kind);
            if (views.length === 0) return null;
            return (
              <>
                {kind !== 'tool' && <h2 class="kind">{`${u}: ${plural}`}</h2>}
                {views.map((v) => (
                  <ToolCard view={v} />
                ))}
              </>
            );
          })}
        </>
      ))}
      <PageLinks {...p.paging} what={p.kinds.shown === undefined ? 'tools, prompts and apps' : `${p.kinds.shown}s`} />
    </Layout>
  );
}
