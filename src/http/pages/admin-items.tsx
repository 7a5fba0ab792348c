// Administration pages for documents: the list (search, label filter, paging, how many users can read each, the
// add-or-replace form), one document's page with "Who can see this?", and the confirmation before removal.
import { Layout, formatTime, PageLinks } from './layout.tsx';
import { Notices, Pager, type Frame } from './admin-frame.tsx';
import type { ItemRow, RestrictedTokenReader } from '../../store/item-access.ts';
import type { Item } from '../../store/items.ts';
import type { Page } from '../../store/paging.ts';

/** A document as a form gives it; labels undefined when the form does not say (a replaced item keeps its own). */
import type { User } from '../../store/users.ts';
import type { FormItem } from '../../requests/items.ts';

export const itemPath = (action: 'view' | 'labels' | 'remove', id: string) =>
  `/admin/items/${action}/${id.split('/').map(encodeURIComponent).join('/')}`;

const Labels = (p: { labels: readonly string[] }) =>
  p.labels.length ? p.labels.map((l) => <code class="label">{l}</code>) : <span class="muted">none: every user</span>;

export interface ItemsPageProps extends Frame {
  items: readonly ItemRow[];
  total: number;
  query: string;
  label: string;
  page: number;
  pages: number;
  form?: Record<string, string> | undefined;
}

export function ItemsPage(p: ItemsPageProps) {
  const link = (page: number) =>
    `/admin/items?${new URLSearchParams({ ...(p.query ? { q: p.query } : {}), ...(p.label ? { label: p.label } : {}), page: String(page) })}`;
  return (
    <Layout title="Documents" nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <h1>Documents</h1>
      <Notices notice={p.notice} error={p.error} />
      {/* biome-ignore lint/a11y/useSemanticElements: a search form with role=search works in every browser; <search> does not yet */}
      <form method="get" action="/admin/items" class="row" role="search">
        <label>
          Search <input name="q" value={p.query} placeholder="id or title" />
        </label>
        <label>
          Label <input name="label" value={p.label} placeholder="finance" />
        </label>
        <button type="submit" class="secondary">
          Filter
        </button>
      </form>
      <p class="muted">
        {p.total} document(s){p.pages > 1 ? `, page ${p.page} of ${p.pages}` : ''}
      </p>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th>Document</th>
              <th>Labels</th>
              <th>Readers</th>
            </tr>
          </thead>
          <tbody>
            {p.items.map((i) => (
              <tr data-item={i.id}>
                <td>
                  <a href={itemPath('view', i.id)}>{i.id}</a>
                  <div class="muted">{i.title}</div>
                </td>
                <td>
                  <Labels labels={i.labels} />
                </td>
                <td class="readers">{i.readers === 0 ? <span class="warn">nobody</span> : `${i.readers} user(s)`}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <Pager page={p.page} pages={p.pages} link={link} />
      <h2>Add or replace a document</h2>
      <p class="muted">
        Upload a Markdown file, or type the text. A file's front matter (<code>title:</code>, <code>labels:</code>) is read exactly as{' '}
        <code>svc item import</code> reads it; the fields below fill in what it does not say. An existing id is replaced after you confirm.
        Labels left out (empty here and no <code>labels:</code> line in the file) keep a replaced document's labels; a new document without
        labels can be read by every user. To remove a document's labels, give a <code>labels:</code> line with nothing after it, or empty
        the labels on the document's own page.
      </p>
      <form method="post" action="/admin/items" enctype="multipart/form-data" class="stack">
        <label>
          Id <input name="id" value={p.form?.id ?? ''} placeholder="plans/2027 (empty: the file's name)" />
        </label>
        <label>
          Title <input name="title" value={p.form?.title ?? ''} />
        </label>
        <label>
          Labels <input name="labels" value={p.form?.labels ?? ''} placeholder="board, finance (empty: see above)" />
        </label>
        <label>
          Markdown file <input name="file" type="file" accept=".md,text/markdown" />
        </label>
        <label>
          Or the text{' '}
          <textarea name="text" rows={6}>
            {p.form?.text ?? ''}
          </textarea>
        </label>
        <button type="submit">Save document</button>
      </form>
    </Layout>
  );
}

export interface ItemPageProps extends Frame {
  item: Item;
  /** a page of the users who can read it, with how many there are in all */
  readers: Paged<User>;
  /** a page of the active label-restricted tokens that can, with how many there are in all */
  restrictedTokens: Paged<RestrictedTokenReader>;
}

type Paged<T> = Page<T> & { total: number; page: number; link: (page: number) => string };

export function ItemPage(p: ItemPageProps) {
  const i = p.item;
  return (
    <Layout title={i.id} nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <p>
        <a href="/admin/items">← Documents</a>
      </p>
      <h1>{i.title}</h1>
      <Notices notice={p.notice} error={p.error} />
      <p class="muted">
        <code>{i.id}</code> · updated {formatTime(i.updatedAt)} · labels: <Labels labels={i.labels} />
      </p>
      <form method="post" action={itemPath('labels', i.id)} class="row">
        <label>
          Labels <input name="labels" value={i.labels.join(', ')} placeholder="empty: every user can read it" />
        </label>
        <button type="submit">Change labels</button>
      </form>
      <h2 id="readers">Who can see this?</h2>
      {p.readers.total === 0 ? (
        <p class="notice error" role="status">
          Nobody can read this document yet: no user holds {i.labels.length > 1 ? 'all of its labels' : 'its label'}.
        </p>
      ) : (
        <>
          <p>{p.readers.total} user(s), and every token of theirs that is not restricted away from it:</p>
          <ul class="readers">
            {p.readers.rows.map((u) => (
              <li data-uid={u.uid}>
                <a href={`/admin/users/${encodeURIComponent(u.uid)}`}>{u.uid}</a> <span class="muted">{u.labels.join(', ')}</span>
              </li>
            ))}
          </ul>
          <PageLinks page={p.readers.page} more={p.readers.more} link={p.readers.link} what="readers" />
        </>
      )}
      <h3>Label-restricted tokens that can read it</h3>
      {p.restrictedTokens.total === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <>
          <p>{p.restrictedTokens.total} token(s):</p>
          <ul class="restricted">
            {p.restrictedTokens.rows.map((t) => (
              <li>
                “{t.name}” of {t.owner} <span class="muted">(only {t.restriction.join(', ') || 'unlabelled documents'})</span>
              </li>
            ))}
          </ul>
          <PageLinks page={p.restrictedTokens.page} more={p.restrictedTokens.more} link={p.restrictedTokens.link} what="tokens" />
        </>
      )}
      <h2>Text</h2>
      <pre>{i.text.length > 4000 ? `${i.text.slice(0, 4000)}…` : i.text}</pre>
      <p>
        <a href={itemPath('remove', i.id)}>Remove document…</a>
      </p>
    </Layout>
  );
}

export function RemoveItemPage(p: Frame & { item: Item }) {
  return (
    <Layout title={`Remove ${p.item.id}`} nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <h1>Remove {p.item.id}?</h1>
      <p>“{p.item.title}” is removed for everyone at once.</p>
      <div class="row">
        <form method="post" action={itemPath('remove', p.item.id)} class="inline">
          <button type="submit" class="danger">
            Remove {p.item.id}
          </button>
        </form>
        <a href={itemPath('view', p.item.id)}>Cancel</a>
      </div>
    </Layout>
  );
}

/** Before a document is replaced: what happens to its labels, said in words, then the same content sent again. */
export function ReplaceItemPage(p: Frame & { existing: Item; item: FormItem }) {
  const now = p.existing.labels;
  const next = p.item.labels === undefined ? now : p.item.labels.split(',').filter((l) => l !== '');
  const same = next.join(',') === now.join(',');
  return (
    <Layout title={`Replace ${p.existing.id}`} nonce={p.nonce} signedIn={{ uid: p.me.uid, admin: true, canLogout: p.me.canLogout }}>
      <h1>Replace {p.existing.id}?</h1>
      <p>
        “{p.existing.title}” is replaced by “{p.item.title}” ({p.item.text.length} characters) for everyone at once.
      </p>
      <p
        class="labels-outcome"
        data-outcome={p.item.labels === undefined ? 'keep' : next.length === 0 ? 'clear' : same ? 'same' : 'change'}
      >
        {p.item.labels === undefined ? (
          <>
            Labels: none were given, so it <strong>keeps its labels</strong>: <Labels labels={now} />.
          </>
        ) : next.length === 0 ? (
          now.length === 0 ? (
            <>Labels: none, as now: every user can read it.</>
          ) : (
            <strong class="warn">
              Labels: removed (now <Labels labels={now} />
              ). Every signed-in user will be able to read it.
            </strong>
          )
        ) : same ? (
          <>
            Labels: unchanged, <Labels labels={next} />.
          </>
        ) : (
          <>
            Labels: <strong>changed</strong> from <Labels labels={now} /> to <Labels labels={next} />.
          </>
        )}
      </p>
      <div class="row">
        <form method="post" action="/admin/items" enctype="multipart/form-data" class="inline">
          <input type="hidden" name="confirm" value="replace" />
          <input type="hidden" name="id" value={p.item.id} />
          <input type="hidden" name="title" value={p.item.title} />
          <input type="hidden" name="text_b64" value={Buffer.from(p.item.text, 'utf8').toString('base64')} />
          <input type="hidden" name="labels_action" value={p.item.labels === undefined ? 'keep' : 'set'} />
          <input type="hidden" name="labels" value={p.item.labels ?? ''} />
          <button type="submit">Replace {p.existing.id}</button>
        </form>
        <a href={itemPath('view', p.existing.id)}>Cancel</a>
      </div>
    </Layout>
  );
}
