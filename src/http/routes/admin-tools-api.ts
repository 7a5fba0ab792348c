// /admin/api/tools, /admin/api/prompts and /admin/api/apps: what svc reviews of its upstreams, as JSON for admins on
// any channel (a bearer token needs the `admin` scope): GET the list (a page at a time), GET one, PATCH {labels?,
// state?, fingerprint?} (CONTRACT §6.1, §6.3). One set of routes, mounted for each kind; an app is named by its
// upstream URI, percent-encoded in the path (/admin/api/apps/everything/ui%3A%2F%2Fwidget%2Fx) or as it is.
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { requireAdmin } from '../guards.ts';
import { CHANGE, READ, policyFor } from '../policy.ts';
import { jsonBody } from '../forms.ts';
import { changeObjectAs } from '../../admin/tools.ts';
import { toolChangeRequest } from '../../requests/tools.ts';
import { getObject, listObjectsPage, type ReviewedKind, type UpstreamObject } from '../../store/upstream-tools.ts';
import { nextPageHeader, pageRequest } from '../paging.ts';
import { toolLabels } from '../../upstream/access.ts';
import { objectJson, visibleJson } from '../../wire/json.ts';

/** The path of each kind's routes, and the name of its object's parameter. */
const PATHS: Record<ReviewedKind, { path: string; param: string }> = {
  tool: { path: '/admin/api/tools', param: 'tool' },
  prompt: { path: '/admin/api/prompts', param: 'prompt' },
  app: { path: '/admin/api/apps', param: 'uri' },
};

export function adminToolApiRoutes(services: Services): Hono<Env> {
  const { database, config } = services;
  const app = new Hono<Env>();
  const policy = policyFor(services);
  // An upstream's hidden characters are written as \u escapes: a raw answer shows them (the value parses the same).
  const json = (value: unknown, headers: Record<string, string> = {}) =>
    new Response(visibleJson(value), { headers: { 'content-type': 'application/json', ...headers } });
  const shown = (t: UpstreamObject) => objectJson(t, toolLabels(t, config.upstreams));

  for (const kind of ['tool', 'prompt', 'app'] as const) {
    const { path, param } = PATHS[kind];
    // An app's URI percent-encoded (ui%3A%2F%2Fwidget%2Fx), or as it is: the rest of the path.
    const one = `${path}/:upstream/:${param}${kind === 'app' ? '{.+}' : ''}`;
    // A page at a time (?page=N, 50 a page; ?upstream=NAME: that upstream's), the next named in a Link header.
    app.get(path, policy(READ), requireAdmin(), async (c) => {
      const request = pageRequest(c);
      const upstream = c.req.query('upstream');
      const page = await listObjectsPage(database.db, request, upstream === undefined ? { kind } : { upstream, kind });
      return json(page.rows.map(shown), nextPageHeader(c, config.server.baseUrl, 'page', request.page, page.more));
    });
    // The route's two parameters, which its path always has.
    const refOf = (c: { req: { param(name: string): string | undefined } }) => ({
      upstream: c.req.param('upstream') ?? '',
      kind,
      name: c.req.param(param) ?? '',
    });
    app.get(one, policy(READ), requireAdmin(), async (c) => {
      const ref = refOf(c);
      return json(shown(await getObject(database.db, ref.upstream, ref.name, kind)));
    });
    app.patch(one, policy(CHANGE), requireAdmin(), async (c) => {
      const change = toolChangeRequest(await jsonBody(c));
      return json(shown(await changeObjectAs(database, c.var.actor, refOf(c), change)));
    });
  }
  return app;
}
