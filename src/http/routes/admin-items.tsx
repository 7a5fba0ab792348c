// /admin/items pages for admins signed in by session or through the proxy. Changes go through admin/actions.ts,
// like the JSON API, so each is audited; uploads are read by the same strict front-matter parser as item import.
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { CHANGE, READ, UPLOAD } from '../policy.ts';
import { nonceOf } from '../context.ts';
import type { SignedCtx } from '../guards.ts';
import { adminKit, type AdminKit } from './admin-kit.ts';
import { formPost, readBody } from '../forms.ts';
import { ItemsPage, ItemPage, RemoveItemPage, ReplaceItemPage, itemPath } from '../pages/admin-items.tsx';
import { listItemsWithReaders, readersOf, ITEM_PAGE } from '../../store/item-access.ts';
import { pageHref, pageRequest } from '../paging.ts';
import { getAnyItem, findItem } from '../../store/items.ts';
import { checkItemId, itemFromUpload, itemRequest } from '../../requests/items.ts';
import { putItemAs, adminRemoveItem } from '../../admin/actions.ts';

const DONE: Record<string, string> = { saved: 'Document saved.', labels: 'Labels changed.', removed: 'Document removed.' };

function frame(c: SignedCtx, error?: string) {
  const principal = c.var.principal;
  return {
    nonce: nonceOf(c),
    me: { uid: principal.user.uid, canLogout: principal.via === 'session' },
    notice: DONE[c.req.query('done') ?? ''],
    ...(error ? { error } : {}),
  };
}

/** The list of documents, with `form` refilled after a refused upload. */
async function listPage(
  { database }: Services,
  c: SignedCtx,
  status: 200 | 400 | 404 | 409,
  error?: string,
  form?: Record<string, string>,
) {
  const query = c.req.query('q') ?? '';
  const label = c.req.query('label') ?? '';
  const page = Math.max(1, Number.parseInt(c.req.query('page') ?? '1', 10) || 1);
  const { items, total } = await listItemsWithReaders(database.db, { query, label, page });
  return c.html(
    <ItemsPage
      {...frame(c, error)}
      items={items}
      total={total}
      query={query}
      label={label}
      page={page}
      pages={Math.max(1, Math.ceil(total / ITEM_PAGE))}
      form={form}
    />,
    status,
  );
}

/** One document's page, with who can read it. */
async function itemPage({ database }: Services, c: SignedCtx, id: string, status: 200 | 400 | 409 = 200, error?: string) {
  const db = database.db;
  const item = await getAnyItem(db, id);
  const pages = { users: pageRequest(c, 'readers_page'), tokens: pageRequest(c, 'tokens_page') };
  const readers = (await readersOf(db, id, pages, database.now()))!;
  return c.html(
    <ItemPage
      {...frame(c, error)}
      item={item}
      readers={{ ...readers.users, page: pages.users.page, link: (n) => `${pageHref(c, 'readers_page', n)}#readers` }}
      restrictedTokens={{ ...readers.restrictedTokens, page: pages.tokens.page, link: (n) => `${pageHref(c, 'tokens_page', n)}#readers` }}
    />,
    status,
  );
}

/** /admin/items: the list, and uploading a document (asking first before replacing one). */
function listRoutes(app: Hono<Env>, { services, policy, adminPage }: AdminKit): void {
  const { database } = services;
  const db = database.db;
  app.get('/admin/items', policy(READ), adminPage(), (c) => listPage(services, c, 200));

  app.post('/admin/items', policy(UPLOAD), adminPage(), async (c) => {
    const body = await c.req.parseBody();
    const form = Object.fromEntries(
      ['id', 'title', 'labels', 'text'].map((k) => [k, typeof body[k] === 'string' ? (body[k] as string) : '']),
    );
    return formPost(
      async () => {
        const item = await itemFromUpload(body);
        // Replacing asks first, saying what happens to the labels, so nobody declassifies a document unawares.
        const existing = body.confirm === 'replace' ? null : await findItem(db, checkItemId(item.id));
        if (existing) return c.html(<ReplaceItemPage {...frame(c)} existing={existing} item={item} />);
        const request = itemRequest({ title: item.title, text: item.text, ...(item.labels === undefined ? {} : { labels: item.labels }) });
        await putItemAs(database, c.var.actor, checkItemId(item.id), request);
        return c.redirect(`${itemPath('view', item.id)}?done=saved`, 303);
      },
      (status, error) => listPage(services, c, status, error, form),
      ['bad_request'],
    );
  });
}

/** /admin/items/view and /admin/items/labels: one document, and changing its labels. */
function itemRoutes(app: Hono<Env>, { services, policy, adminPage }: AdminKit): void {
  const { database } = services;
  const db = database.db;
  app.get('/admin/items/view/:id{.+}', policy(READ), adminPage(), (c) => itemPage(services, c, c.req.param('id')));

  app.post('/admin/items/labels/:id{.+}', policy(CHANGE), adminPage(), async (c) => {
    const id = c.req.param('id');
    const body = await readBody(c);
    const item = await getAnyItem(db, id);
    return formPost(
      async () => {
        const request = itemRequest({ title: item.title, text: item.text, labels: typeof body.labels === 'string' ? body.labels : '' });
        await putItemAs(database, c.var.actor, id, request);
        return c.redirect(`${itemPath('view', id)}?done=labels`, 303);
      },
      (status, error) => itemPage(services, c, id, status, error),
      ['bad_request'],
    );
  });
}

/** /admin/items/remove: the confirmation, and the removal. */
function removeRoutes(app: Hono<Env>, { services, policy, adminPage }: AdminKit): void {
  const { database } = services;
  app.get('/admin/items/remove/:id{.+}', policy(READ), adminPage(), async (c) =>
    c.html(<RemoveItemPage {...frame(c)} item={await getAnyItem(database.db, c.req.param('id'))} />),
  );

  app.post('/admin/items/remove/:id{.+}', policy(CHANGE), adminPage(), async (c) => {
    await adminRemoveItem(database, c.var.actor, c.req.param('id'));
    return c.redirect('/admin/items?done=removed', 303);
  });
}

export function adminItemRoutes(services: Services): Hono<Env> {
  const app = new Hono<Env>();
  const kit = adminKit(services);
  listRoutes(app, kit);
  itemRoutes(app, kit);
  removeRoutes(app, kit);
  return app;
}
