// /admin/users pages for admins signed in by session or through the proxy. Forms post here; the work is done by
// admin/actions.ts, the same code the JSON API uses.
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { CHANGE, READ } from '../policy.ts';
import { nonceOf } from '../context.ts';
import type { SignedCtx } from '../guards.ts';
import { adminKit, type AdminKit } from './admin-kit.ts';
import { formPost, readBody } from '../forms.ts';
import { UsersPage, UserPage, RemovePage, AuditPage } from '../pages/admin.tsx';
import { listUsers, getUser, signInSummaries, type User } from '../../store/users.ts';
import { listAudit } from '../../store/audit.ts';
import { listVisible } from '../../store/items.ts';
import { searchVisible } from '../../store/search.ts';
import { credentialOf } from '../../auth/core.ts';
import { countVisible } from '../../store/item-access.ts';
import { createUserAs, updateUserAs, adminRemoveUser, adminRevokeTokens, adminEndSessions, adminRevokeGrant } from '../../admin/actions.ts';
import { listGrants } from '../../store/oauth.ts';
import { pageHref, pageRequest } from '../paging.ts';
import { newUserRequest, userChangeRequest } from '../../requests/users.ts';

const PAGE_SIZE = 50;

// Fixed texts for ?done=…, so no request can put words on the page.
const DONE: Record<string, string> = {
  created: 'User created.',
  saved: 'Changes saved.',
  removed: 'User removed; the uid stays reserved.',
  tokens: 'All of this user’s tokens were revoked.',
  sessions: 'All of this user’s sessions were ended.',
  grant: 'The app’s access was revoked.',
};

function frame(c: SignedCtx, extra: { error?: string } = {}) {
  const principal = c.var.principal;
  return {
    nonce: nonceOf(c),
    me: { uid: principal.user.uid, canLogout: principal.via === 'session' },
    notice: DONE[c.req.query('done') ?? ''],
    ...extra,
  };
}

const strings = (body: Record<string, unknown>): Record<string, string> =>
  Object.fromEntries(Object.entries(body).filter((e): e is [string, string] => typeof e[1] === 'string'));

/** The user list, with `extra` for a refused form. */
async function listPage(
  { database }: Services,
  c: SignedCtx,
  status: 200 | 400 | 404 | 409,
  extra: { error?: string; form?: Record<string, string> } = {},
) {
  const db = database.db;
  const query = (c.req.query('q') ?? '').trim().toLowerCase();
  const all = (await listUsers(db)).filter((u) => query === '' || [u.uid, u.email, u.name].some((f) => f.toLowerCase().includes(query)));
  const pages = Math.max(1, Math.ceil(all.length / PAGE_SIZE));
  const page = Math.min(Math.max(1, Number.parseInt(c.req.query('page') ?? '1', 10) || 1), pages);
  return c.html(
    <UsersPage
      {...frame(c, extra.error ? { error: extra.error } : {})}
      users={all.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE)}
      summaries={await signInSummaries(db, database.now())}
      query={c.req.query('q') ?? ''}
      page={page}
      pages={pages}
      total={all.length}
      audit={await listAudit(db, 50)}
      form={extra.form}
    />,
    status,
  );
}

/** One user's page. */
async function userPage(services: Services, c: SignedCtx, user: User, status: 200 | 400 | 409 = 200, error?: string) {
  const { database } = services;
  const db = database.db;
  // The same queries the MCP tools run for this user.
  const access = { labels: user.labels, restriction: null };
  const query = (c.req.query('see') ?? '').trim();
  const items = query
    ? await searchVisible(db, query, access, 50, { user: c.var.principal.user.id, credential: credentialOf(c.var.principal) })
    : (await listVisible(db, access, null, 50)).items;
  const sees = { count: await countVisible(db, access), query, items };
  const appsPage = pageRequest(c, 'apps_page');
  const grants = services.config.auth.oauth
    ? { ...(await listGrants(db, user.id, appsPage)), page: appsPage.page, link: (n: number) => pageHref(c, 'apps_page', n) }
    : null;
  return c.html(
    <UserPage
      {...frame(c, error ? { error } : {})}
      user={user}
      summary={(await signInSummaries(db, database.now())).get(user.id)}
      sees={sees}
      grants={grants}
    />,
    status,
  );
}

const back = (uid: string, done: string) => `/admin/users/${encodeURIComponent(uid)}?done=${done}`;

/** /admin/audit: the whole audit trail. */
function auditRoutes(app: Hono<Env>, { services, policy, adminPage }: AdminKit): void {
  const db = services.database.db;
  app.get('/admin/audit', policy(READ), adminPage(), async (c) => {
    const before = Number.parseInt(c.req.query('before') ?? '', 10);
    const entries = await listAudit(db, PAGE_SIZE + 1, Number.isSafeInteger(before) && before > 0 ? before : undefined);
    const page = entries.slice(0, PAGE_SIZE);
    const older = entries.length > PAGE_SIZE ? page[page.length - 1]!.id : null;
    return c.html(<AuditPage {...frame(c)} entries={page} newer={c.req.query('before') !== undefined} older={older} />);
  });
}

/** /admin/users: the list, and adding a user. */
function userListRoutes(app: Hono<Env>, { services, policy, adminPage }: AdminKit): void {
  app.get('/admin/users', policy(READ), adminPage(), (c) => listPage(services, c, 200));

  app.post('/admin/users', policy(CHANGE), adminPage(), async (c) => {
    const form = strings(await readBody(c));
    return formPost(
      async () => {
        const request = newUserRequest({
          uid: form.uid ?? '',
          email: form.email ?? '',
          name: form.name ?? '',
          labels: form.labels ?? '',
          admin: form.admin === 'on',
          password: form.password ?? '',
        });
        const user = await createUserAs(services.database, c.var.actor, request);
        return c.redirect(back(user.uid, 'created'), 303);
      },
      (status, error) => listPage(services, c, status, { error, form: { ...form, password: '' } }),
    );
  });
}

/** /admin/users/:uid: one user's page, and changing the user. */
function userRoutes(app: Hono<Env>, { services, policy, adminPage }: AdminKit): void {
  const { database } = services;
  const db = database.db;
  app.get('/admin/users/:uid', policy(READ), adminPage(), async (c) => userPage(services, c, await getUser(db, c.req.param('uid'))));

  app.post('/admin/users/:uid', policy(CHANGE), adminPage(), async (c) => {
    const uid = c.req.param('uid');
    const form = strings(await readBody(c));
    const change: Record<string, unknown> = {
      email: form.email ?? '',
      name: form.name ?? '',
      labels: form.labels ?? '',
      admin: form.admin === 'on',
    };
    if (form.clear_password === 'on') change.password = null;
    else if (form.password) change.password = form.password;
    return formPost(
      async () => {
        await updateUserAs(database, c.var.actor, uid, userChangeRequest(change), c.var.principal.sessionId);
        return c.redirect(back(uid, 'saved'), 303);
      },
      async (status, error) => userPage(services, c, await getUser(db, uid), status, error),
    );
  });
}

/** /admin/users/:uid/…: removing the user, revoking their tokens and grants, ending their sessions. */
function userActionRoutes(app: Hono<Env>, { services, policy, adminPage }: AdminKit): void {
  const { database } = services;
  const db = database.db;
  app.get('/admin/users/:uid/remove', policy(READ), adminPage(), async (c) =>
    c.html(<RemovePage {...frame(c)} user={await getUser(db, c.req.param('uid'))} />),
  );

  app.post('/admin/users/:uid/remove', policy(CHANGE), adminPage(), async (c) => {
    const uid = c.req.param('uid');
    return formPost(
      async () => {
        const disconnected = await adminRemoveUser(database, c.var.actor, uid);
        if (disconnected.length > 0) await services.gateway?.accounts?.revokeSoon();
        return c.redirect('/admin/users?done=removed', 303);
      },
      async (status, error) => c.html(<RemovePage {...frame(c, { error })} user={await getUser(db, uid)} />, status),
      ['conflict'],
    );
  });

  app.post('/admin/users/:uid/revoke-tokens', policy(CHANGE), adminPage(), async (c) => {
    const { upstreamAccounts } = await adminRevokeTokens(database, c.var.actor, c.req.param('uid'));
    if (upstreamAccounts.length > 0) await services.gateway?.accounts?.revokeSoon();
    return c.redirect(back(c.req.param('uid'), 'tokens'), 303);
  });

  app.post('/admin/users/:uid/grants/:grant/revoke', policy(CHANGE), adminPage(), async (c) => {
    const uid = c.req.param('uid');
    if (!(await adminRevokeGrant(database, c.var.actor, uid, c.req.param('grant')))) return c.text('no such grant', 404);
    return c.redirect(back(uid, 'grant'), 303);
  });

  app.post('/admin/users/:uid/end-sessions', policy(CHANGE), adminPage(), async (c) => {
    await adminEndSessions(database, c.var.actor, c.req.param('uid'));
    return c.redirect(back(c.req.param('uid'), 'sessions'), 303);
  });
}

export function adminPageRoutes(services: Services): Hono<Env> {
  const app = new Hono<Env>();
  const kit = adminKit(services);
  auditRoutes(app, kit);
  userListRoutes(app, kit);
  userRoutes(app, kit);
  userActionRoutes(app, kit);
  return app;
}
