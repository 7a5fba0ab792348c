// /admin/api/tools: upstream tools as JSON for admins on any channel (a bearer token needs the `admin` scope):
// GET the list (a page at a time), GET one, PATCH {labels?, state?} (CONTRACT §6.1).
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { requireAdmin } from '../guards.ts';
import { CHANGE, READ, policyFor } from '../policy.ts';
import { jsonBody } from '../forms.ts';
import { changeToolAs } from '../../admin/tools.ts';
import { toolChangeRequest } from '../../requests/tools.ts';
import { getTool, listToolsPage, type UpstreamTool } from '../../store/upstream-tools.ts';
import { nextPageHeader, pageRequest } from '../paging.ts';
import { toolLabels } from '../../upstream/access.ts';
import { toolJson, visibleJson } from '../../wire/json.ts';

export function adminToolApiRoutes(services: Services): Hono<Env> {
  const { database, config } = services;
  const app = new Hono<Env>();
  const policy = policyFor(services);
  // An upstream's hidden characters are written as \u escapes: a raw answer shows them (the value parses the same).
  const json = (value: unknown, headers: Record<string, string> = {}) =>
    new Response(visibleJson(value), { headers: { 'content-type': 'application/json', ...headers } });
  const tool = (t: UpstreamTool) => toolJson(t, toolLabels(t, config.upstreams));

  // A page at a time (?page=N, 50 tools; ?upstream=NAME: that upstream's), the next named in a Link header.
  app.get('/admin/api/tools', policy(READ), requireAdmin(), async (c) => {
    const request = pageRequest(c);
    const upstream = c.req.query('upstream');
    const page = await listToolsPage(database.db, request, upstream === undefined ? {} : { upstream });
    return json(page.rows.map(tool), nextPageHeader(c, config.server.baseUrl, 'page', request.page, page.more));
  });
  app.get('/admin/api/tools/:upstream/:tool', policy(READ), requireAdmin(), async (c) =>
    json(tool(await getTool(database.db, c.req.param('upstream'), c.req.param('tool')))),
  );
  app.patch('/admin/api/tools/:upstream/:tool', policy(CHANGE), requireAdmin(), async (c) => {
    const change = toolChangeRequest(await jsonBody(c));
    return json(tool(await changeToolAs(database, c.var.actor, c.req.param('upstream'), c.req.param('tool'), change)));
  });
  return app;
}
