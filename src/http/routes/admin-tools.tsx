// /admin/tools for admins signed in by session or through the proxy: the page of what svc reviews of its upstreams
// (tools, prompts and apps), and its approve, label and disable forms, through the same admin action as the JSON API
// and the CLI (CONTRACT §6.1, §6.3). A form names its object's kind in a `kind` field (none: a tool).
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { nonceOf } from '../context.ts';
import { CHANGE, READ } from '../policy.ts';
import type { SignedCtx } from '../guards.ts';
import { adminKit } from './admin-kit.ts';
import { formPost, readBody } from '../forms.ts';
import { ToolsPage, type ConnectedPeople, type ToolView } from '../pages/admin-tools.tsx';
import { listAccounts } from '../../store/upstream-accounts.ts';
import { changeObjectAs } from '../../admin/tools.ts';
import { labelsField } from '../../requests/fields.ts';
import type { ToolChange } from '../../requests/tools.ts';
import { badRequest } from '../../domain/errors.ts';
import { listObjectsPage, REVIEWED_KINDS, type ReviewedKind } from '../../store/upstream-tools.ts';
import type { PageRequest } from '../../store/paging.ts';
import type { UpstreamObject } from '../../store/upstream-tools.ts';
import { pageHref, pageRequest } from '../paging.ts';
import { listUsers } from '../../store/users.ts';
import { offerable } from '../../domain/merged-names.ts';
import { toolLabels, usable } from '../../upstream/access.ts';
import { pagePolicy } from '../middleware.ts';

const DONE: Record<string, string> = { approve: 'Approved.', disable: 'Disabled.', label: 'Labels set.', inherit: 'Labels set.' };
const KIND_NAMES: Record<ReviewedKind, string> = { tool: 'Tool', prompt: 'Prompt', app: 'App' };
/** What the page says after a change: `Prompt approved.`, `Labels set.` */
function doneNotice(done: string | undefined, kind: ReviewedKind | undefined): string | undefined {
  if (done === 'approve' || done === 'disable') return `${KIND_NAMES[kind ?? 'tool']} ${done}d.`;
  return done === undefined ? undefined : DONE[done];
}
/** The kind a query or a form names; none (or another word) is a tool, or, for the page's filter, every kind. */
const kindOf = (value: unknown): ReviewedKind | undefined => REVIEWED_KINDS.find((k) => k === value);
/**
 * The policy an app's preview is served with: a sandbox of its own (an opaque origin, whoever opens it), its inline
 * scripts and styles run and reach nothing (no request, no form, no frame), framed by svc's own page alone.
 */
const PREVIEW_POLICY =
  "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:; media-src data:; form-action 'none'; base-uri 'none'; frame-ancestors 'self'";
/** Users named per tool; the rest are counted. */
const USERS_SHOWN = 20;

/** Why an object is never offered under its name, besides its state: a tool's or a prompt's merged name (an app keeps its URI). */
function notOffered(object: UpstreamObject): string | null {
  if (object.kind === 'app' || offerable(object)) return null;
  const merged = object.kind === 'tool' ? 'NAME__TOOL' : 'NAME__PROMPT';
  return `its name as ${merged} is longer than 128 characters or has characters other than A-Z a-z 0-9 _ - .`;
}

/** One page of objects (50; of one upstream with ?upstream=NAME, of one kind with ?kind=), each with who may use it. */
async function toolViews(
  { database, config }: Services,
  request: PageRequest,
  only: { upstream?: string; kind?: ReviewedKind },
): Promise<{ views: ToolView[]; more: boolean }> {
  const [objects, users] = await Promise.all([listObjectsPage(database.db, request, only), listUsers(database.db)]);
  const views = objects.rows.map((object) => {
    const may = users.filter((u) => usable(object, config, { labels: u.labels, restriction: null })).map((u) => u.uid);
    return {
      object,
      labels: toolLabels(object, config.upstreams),
      notOffered: notOffered(object),
      users: may.slice(0, USERS_SHOWN),
      userCount: may.length,
    };
  });
  return { views, more: objects.more };
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
    notice: doneNotice(c.req.query('done'), kindOf(c.req.query('of'))),
    ...(error ? { error } : {}),
  };
  const request = pageRequest(c);
  const upstream = c.req.query('upstream');
  const kind = kindOf(c.req.query('kind'));
  const { views, more } = await toolViews(services, request, {
    ...(upstream === undefined ? {} : { upstream }),
    ...(kind ? { kind } : {}),
  });
  const paging = { page: request.page, more, link: (n: number) => pageHref(c, 'page', n) };
  const kinds = { shown: kind, link: (k: ReviewedKind | undefined) => kindHref(c.req.url, k) };
  // The page frames its apps' sandboxed previews, served by svc itself.
  c.header('Content-Security-Policy', pagePolicy(frame.nonce, undefined, "'self'"));
  return c.html(<ToolsPage {...frame} views={views} paging={paging} kinds={kinds} connected={await connectedPeople(services)} />, status);
}

/** The page's address showing one kind, or (undefined) every kind, from its first page. */
function kindHref(url: string, kind: ReviewedKind | undefined): string {
  const u = new URL(url);
  u.searchParams.delete('page');
  u.searchParams.delete('done');
  u.searchParams.delete('of');
  if (kind === undefined) u.searchParams.delete('kind');
  else u.searchParams.set('kind', kind);
  const query = u.searchParams.toString();
  return `${u.pathname}${query ? `?${query}` : ''}`;
}

function changeFrom(body: Record<string, unknown>, kind: ReviewedKind): ToolChange {
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
      // An empty field would open it to every user: that takes the API or svc tool label --labels ''.
      if (labels.length === 0) throw badRequest(`labels: give the ${kind}'s own labels, or use its upstream's`, 'labels');
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
  // An app's bytes as the fingerprint the page showed pins them, read from its upstream now, for the page's sandboxed
  // frame: never with svc's origin (the policy's sandbox), whoever opens it, and only into a frame. Opened as a page
  // (a link an upstream sends an admin: it knows its own fingerprint, and a top-level navigation carries the session
  // cookie), its bytes would be a document at svc's address; a browser says what loads it in Sec-Fetch-Dest. HEAD is
  // answered by this route too (without the body), so it is refused the same.
  app.get('/admin/tools/:upstream/:name/preview', policy(READ), adminPage(), async (c) => {
    if (c.req.header('sec-fetch-dest') !== 'iframe')
      return c.text("An app's preview is shown only in its frame on /admin/tools: open the page, and its preview there.", 403);
    const fingerprint = c.req.query('fingerprint') ?? '';
    const preview = services.gateway
      ? await services.gateway.apps.preview(c.req.param('upstream'), c.req.param('name'), fingerprint)
      : null;
    if (preview === null) return c.text('The upstream does not serve this app as the page showed it now: reload the page.', 409);
    return c.body(new Uint8Array(preview.bytes), 200, {
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Security-Policy': PREVIEW_POLICY,
      'X-Frame-Options': 'SAMEORIGIN',
    });
  });
  app.post('/admin/tools/:upstream/:name', policy(CHANGE), adminPage(), async (c) => {
    const body = await readBody(c);
    return formPost(
      async () => {
        if (body.kind !== undefined && kindOf(body.kind) === undefined) throw badRequest('kind: tool, prompt or app', 'kind');
        const kind = kindOf(body.kind) ?? 'tool';
        const ref = { upstream: c.req.param('upstream'), kind, name: c.req.param('name') };
        await changeObjectAs(services.database, c.var.actor, ref, changeFrom(body, kind));
        return c.redirect(`/admin/tools?done=${String(body.action)}${kind === 'tool' ? '' : `&of=${kind}`}`, 303);
      },
      (status, error) => page(services, c, status, error),
      ['bad_request', 'conflict'],
    );
  });
  return app;
}
