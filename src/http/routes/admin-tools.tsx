// /admin/tools for admins signed in by session or through the proxy: the page, and its approve, label and disable
// forms, through the same admin action as the JSON API and the CLI (CONTRACT §6.1).
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { nonceOf } from '../context.ts';
import { CHANGE, READ } from '../policy.ts';
import type { SignedCtx } from '../guards.ts';
import { adminKit } from './admin-kit.ts';
import { formPost, readBody } from '../forms.ts';
import { ToolsPage, type ConnectedPeople, type ToolView } from '../pages/admin-tools.tsx';
import { listAccounts } from '../../store/upstream-accounts.ts';
import { changeToolAs } from '../../admin/tools.ts';
import { labelsField } from '../../requests/fields.ts';
import type { ToolChange } from '../../requests/tools.ts';
import { badRequest } from '../../domain/errors.ts';
import { listToolsPage } from '../../store/upstream-tools.ts';
import type { PageRequest } from '../../store/paging.ts';
import { pageHref, pageRequest } from '../paging.ts';
import { listUsers } from '../../store/users.ts';
import { offerable } from '../../domain/merged-names.ts';
import { toolLabels, usable } from '../../upstream/access.ts';

const DONE: Record<string, string> = { approve: 'Tool approved.', disable: 'Tool disabled.', label: 'Labels set.', inherit: 'Labels set.' };
/** Users named per tool; the rest are counted. */
const USERS_SHOWN = 20;

/** One page of tools (50; of one upstream with ?upstream=NAME), each with who may use it. */
async function toolViews(
  { database, config }: Services,
  request: PageRequest,
  only: { upstream?: string },
): Promise<{ views: ToolView[]; more: boolean }> {
  const [tools, users] = await Promise.all([listToolsPage(database.db, request, only), listUsers(database.db)]);
  const views = tools.rows.map((tool) => {
    const may = users.filter((u) => usable(tool, config, { labels: u.labels, restriction: null })).map((u) => u.uid);
    return {
      tool,
      labels: toolLabels(tool, config.upstreams),
      notOffered: offerable(tool)
        ? null
        : 'its name as NAME__TOOL is longer than 128 characters or has characters other than A-Z a-z 0-9 _ - .',
      users: may.slice(0, USERS_SHOWN),
      userCount: may.length,
    };
  });
  return { views, more: tools.more };
}

/** Per `auth = oauth` upstream, the people connected to it and how: never a token. */
async function connectedPeople({ database, config }: Services): Promise<ConnectedPeople> {
  const oauth = config.upstreams.filter((u) => u.oauth !== null);
  if (oauth.length === 0) return new Map();
  const [accounts, users] = await Promise.all([listAccounts(database.db), listUsers(database.db)]);
  const uid = new Map(users.map((u) => [u.id, u.uid]));
  return new Map(
    oauth.map((u) => [
      u.name,
      accounts
        .filter((a) => a.upstream === u.name && a.server === u.server)
        .map((a) => ({ uid: uid.get(a.userId) ?? '?', state: a.state, connectedAt: a.connectedAt, lastUsedAt: a.lastUsedAt })),
    ]),
  );
}

async function page(services: Services, c: SignedCtx, status: 200 | 400 | 409 = 200, error?: string) {
  const principal = c.var.principal;
  const frame = {
    nonce: nonceOf(c),
    me: { uid: principal.user.uid, canLogout: principal.via === 'session' },
    notice: DONE[c.req.query('done') ?? ''],
    ...(error ? { error } : {}),
  };
  const request = pageRequest(c);
  const upstream = c.req.query('upstream');
  const { views, more } = await toolViews(services, request, upstream === undefined ? {} : { upstream });
  const paging = { page: request.page, more, link: (n: number) => pageHref(c, 'page', n) };
  return c.html(<ToolsPage {...frame} tools={views} paging={paging} connected={await connectedPeople(services)} />, status);
}

function changeFrom(body: Record<string, unknown>): ToolChange {
  switch (body.action) {
    case 'approve':
      // The definition the page showed: a newer one is refused, and shown for review.
      return typeof body.fingerprint === 'string' ? { state: 'approved', fingerprint: body.fingerprint } : { state: 'approved' };
    case 'disable':
      return { state: 'disabled' };
    case 'inherit':
      return { labels: null };
    case 'label': {
      const labels = labelsField(typeof body.labels === 'string' ? body.labels : '');
      // An empty field would make the tool open to every user: that takes the API or svc tool label --labels ''.
      if (labels.length === 0) throw badRequest("labels: give the tool's own labels, or use its upstream's", 'labels');
      return { labels };
    }
    default:
      throw badRequest('action: approve, disable, label or inherit', 'action');
  }
}

export function adminToolRoutes(services: Services): Hono<Env> {
  const app = new Hono<Env>();
  const { policy, adminPage } = adminKit(services);
  app.get('/admin/tools', policy(READ), adminPage(), (c) => page(services, c));
  app.post('/admin/tools/:upstream/:tool', policy(CHANGE), adminPage(), async (c) => {
    const body = await readBody(c);
    return formPost(
      async () => {
        await changeToolAs(services.database, c.var.actor, c.req.param('upstream'), c.req.param('tool'), changeFrom(body));
        return c.redirect(`/admin/tools?done=${String(body.action)}`, 303);
      },
      (status, error) => page(services, c, status, error),
      ['bad_request', 'conflict'],
    );
  });
  return app;
}
