// /admin/api: JSON administration for admins on any channel (a bearer token suits automation, with the `admin` scope).
import { Hono } from 'hono';
import type { Env, Services } from '../context.ts';
import { requireAdmin } from '../guards.ts';
import { CHANGE, READ, policyFor } from '../policy.ts';
import { jsonBody } from '../forms.ts';
import { auditEntryJson, userJson, itemJson, itemSummaryJson } from '../../wire/json.ts';
import { listUsers, getUser, signInSummaries } from '../../store/users.ts';
import { listAllItems, getAnyItem } from '../../store/items.ts';
import { listAudit } from '../../store/audit.ts';
import {
  createUserAs,
  updateUserAs,
  adminRemoveUser,
  adminRevokeTokens,
  adminEndSessions,
  putItemAs,
  adminRemoveItem,
} from '../../admin/actions.ts';
import { newUserRequest, userChangeRequest } from '../../requests/users.ts';
import { checkItemId, itemBody } from '../../requests/items.ts';

/** An audit page stops at this many bytes of JSON, however many entries were asked for. */
const AUDIT_PAGE_BYTES = 256 * 1024;

export function adminApiRoutes(services: Services): Hono<Env> {
  const { database, config } = services;
  const db = database.db;
  const app = new Hono<Env>();
  const policy = policyFor(services);

  app.get('/admin/api/users', policy(READ), requireAdmin(), async (c) => {
    const summaries = await signInSummaries(db, database.now());
    const empty = { providers: [], activeTokens: 0 };
    return c.json((await listUsers(db)).map((u) => userJson(u, summaries.get(u.id) ?? empty)));
  });
  app.post('/admin/api/users', policy(CHANGE), requireAdmin(), async (c) =>
    c.json(userJson(await createUserAs(database, c.var.actor, newUserRequest(await jsonBody(c)))), 201),
  );
  app.get('/admin/api/users/:uid', policy(READ), requireAdmin(), async (c) => {
    const user = await getUser(db, c.req.param('uid'));
    return c.json(userJson(user, (await signInSummaries(db, database.now())).get(user.id) ?? { providers: [], activeTokens: 0 }));
  });
  app.patch('/admin/api/users/:uid', policy(CHANGE), requireAdmin(), async (c) =>
    c.json(
      userJson(
        await updateUserAs(database, c.var.actor, c.req.param('uid'), userChangeRequest(await jsonBody(c)), c.var.principal.sessionId),
      ),
    ),
  );
  app.delete('/admin/api/users/:uid', policy(CHANGE), requireAdmin(), async (c) => {
    const disconnected = await adminRemoveUser(database, c.var.actor, c.req.param('uid'));
    if (disconnected.length > 0) await services.gateway?.accounts?.revokeSoon();
    return c.body(null, 204);
  });
  app.post('/admin/api/users/:uid/tokens/revoke', policy(CHANGE), requireAdmin(), async (c) => {
    const { revoked, upstreamAccounts } = await adminRevokeTokens(database, c.var.actor, c.req.param('uid'));
    if (upstreamAccounts.length > 0) await services.gateway?.accounts?.revokeSoon();
    return c.json({ revoked });
  });
  app.post('/admin/api/users/:uid/sessions/end', policy(CHANGE), requireAdmin(), async (c) =>
    c.json({ ended: await adminEndSessions(database, c.var.actor, c.req.param('uid')) }),
  );

  // Item ids are paths and may contain slashes.
  app.get('/admin/api/items', policy(READ), requireAdmin(), async (c) => c.json((await listAllItems(db)).map(itemSummaryJson)));
  app.get('/admin/api/items/:id{.+}', policy(READ), requireAdmin(), async (c) => c.json(itemJson(await getAnyItem(db, c.req.param('id')))));
  app.put('/admin/api/items/:id{.+}', policy(CHANGE), requireAdmin(), async (c) => {
    const id = checkItemId(c.req.param('id'));
    const { item, created } = await putItemAs(database, c.var.actor, id, itemBody(await jsonBody(c)));
    return c.json(itemJson(item), created ? 201 : 200);
  });
  app.delete('/admin/api/items/:id{.+}', policy(CHANGE), requireAdmin(), async (c) => {
    await adminRemoveItem(database, c.var.actor, c.req.param('id'));
    return c.body(null, 204);
  });

  // Newest first, up to `limit` entries and AUDIT_PAGE_BYTES of JSON; the Link header names the next page.
  app.get('/admin/api/audit', policy(READ), requireAdmin(), async (c) => {
    const limit = Math.min(Math.max(Number(c.req.query('limit') ?? 100) || 100, 1), 1000);
    const before = c.req.query('before');
    const entries = await listAudit(db, limit + 1, before === undefined ? undefined : Number(before) || undefined);
    const page: ReturnType<typeof auditEntryJson>[] = [];
    let bytes = 0;
    for (const entry of entries.slice(0, limit)) {
      const json = auditEntryJson(entry);
      bytes += Buffer.byteLength(JSON.stringify(json));
      if (page.length > 0 && bytes > AUDIT_PAGE_BYTES) break;
      page.push(json);
    }
    const next = new URL(c.req.url);
    next.searchParams.set('before', String(page[page.length - 1]?.id ?? 0));
    const more = page.length < entries.length;
    return c.json(page, 200, more ? { Link: `<${config.server.baseUrl}${next.pathname}?${next.searchParams}>; rel="next"` } : {});
  });
  return app;
}
