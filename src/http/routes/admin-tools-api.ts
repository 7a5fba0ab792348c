// /admin/api/tools: upstream tools as JSON for admins on any channel (a bearer token needs the `admin` scope):
// GET the list, GET one, PATCH {labels?, state?} (CONTRACT §6.1).
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { requireAdmin } from '../guards.ts';
import { CHANGE, READ, policyFor } from '../policy.ts';
import { jsonBody } from '../forms.ts';
import { changeToolAs } from '../../admin/tools.ts';
import { toolChangeRequest } from '../../requests/tools.ts';
import { getTool, listTools, type UpstreamTool } from '../../store/upstream-tools.ts';
import { toolLabels } from '../../upstream/access.ts';
import { toolJson } from '../../wire/json.ts';

export function adminToolApiRoutes(services: Services): Hono<Env> {
  const { database, config } = services;
  const app = new Hono<Env>();
  const policy = policyFor(services);
  const json = (t: UpstreamTool) => toolJson(t, toolLabels(t, config.upstreams));

  app.get('/admin/api/tools', policy(READ), requireAdmin(), async (c) => c.json((await listTools(database.db)).map(json)));
  app.get('/admin/api/tools/:upstream/:tool', policy(READ), requireAdmin(), async (c) =>
    c.json(json(await getTool(database.db, c.req.param('upstream'), c.req.param('tool')))),
  );
  app.patch('/admin/api/tools/:upstream/:tool', policy(CHANGE), requireAdmin(), async (c) => {
    const change = toolChangeRequest(await jsonBody(c));
    return c.json(json(await changeToolAs(database, c.var.actor, c.req.param('upstream'), c.req.param('tool'), change)));
  });
  return app;
}
