// Every route svc mounts declares its policy where it is mounted (src/http/policy.ts): how large a body it reads and
// from where a state change may come. This walks the whole application, with every channel and OAuth (enterprise
// included) on, so a route added without a policy fails here.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/load.ts';
import { openDatabase } from '../src/db/open.ts';
import { createApp } from '../src/http/app.ts';
import { createAuthenticator } from '../src/auth/core.ts';
import { silentLogger } from '../src/log.ts';
import { noMetrics } from '../src/metrics/events.ts';
import { POLICY, type RoutePolicy } from '../src/http/policy.ts';
import type { RelyingParty } from '../src/auth/oidc.ts';

const CONFIG = `[server]
listen = 127.0.0.1:8080
base_url = http://127.0.0.1:8080
database = file:svc.db
[auth]
session
    cookie_name svc_session
    ttl 24h
    secret_env S
local
    enabled true
oidc
    enabled true
    issuer https://idp.example.com
    client_id svc
    client_secret_env O
    redirect_url http://127.0.0.1:8080/oidc/callback
header
    enabled true
    user_header X-User
    email_header X-Email
    secret_header X-Secret
    shared_secret_env P
    trusted_proxy 127.0.0.1
token
    enabled true
oauth
    enabled true
    advertise_on_mcp true
    enterprise
        issuer https://idp.example.com
`;

describe('every mounted route', () => {
  test('declares one policy; reads (GET) read no body, and every other method has an Origin rule and a body limit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-routes-'));
    const config = loadConfig(CONFIG, { S: 'x'.repeat(32), O: 'oidc secret', P: 'proxy secret value' }, { mode: 'serve', baseDir: dir });
    const database = await openDatabase(config.server.database, null);
    try {
      // The relying party is only called by the single sign-on handlers, which this never runs.
      const oidc = {} as RelyingParty;
      const app = createApp(
        { config, database, log: silentLogger, metrics: noMetrics, oidc, auth: createAuthenticator([]) },
        () => '127.0.0.1',
      );
      const routes = new Map<string, RoutePolicy[]>();
      for (const r of app.routes) {
        if (r.method === 'ALL') continue; // middleware every request passes (headers, log, caller), not a route
        const key = `${r.method} ${r.path}`;
        const policy = (r.handler as { [POLICY]?: RoutePolicy })[POLICY];
        routes.set(key, [...(routes.get(key) ?? []), ...(policy ? [policy] : [])]);
      }
      assert.ok(routes.size >= 50, `${routes.size} routes walked`);
      for (const [route, policies] of routes) {
        assert.equal(policies.length, 1, `${route} declares ${policies.length} policies`);
        const [policy] = policies as [RoutePolicy];
        if (route.startsWith('GET ')) {
          assert.ok(policy.origin === 'read' || policy.origin === 'mcp', `${route}: a read has no state-change rule (${policy.origin})`);
        } else {
          assert.notEqual(policy.origin, 'read', `${route} changes state: it needs an Origin rule`);
          assert.notEqual(policy.body, 'none', `${route} may have a body: it needs a limit`);
        }
      }
      // The rules that matter most, by name: ambient credentials on every page form and API change; the sign-in form
      // same-origin always; client credentials at the OAuth endpoints; /mcp's own.
      const policyOf = (route: string) => routes.get(route)?.[0];
      assert.deepEqual(policyOf('POST /auth/tokens'), { body: 'form', origin: 'ambient' });
      assert.deepEqual(policyOf('POST /admin/users/:uid'), { body: 'form', origin: 'ambient' });
      assert.deepEqual(policyOf('POST /admin/items'), { body: 'upload', origin: 'ambient' });
      assert.deepEqual(policyOf('POST /login'), { body: 'form', origin: 'always' });
      assert.deepEqual(policyOf('POST /oauth/token'), { body: 'form', origin: 'carried' });
      assert.deepEqual(policyOf('POST /oauth/register'), { body: 'small', origin: 'carried' });
      assert.deepEqual(policyOf('POST /mcp'), { body: 'mcp', origin: 'mcp' });
      assert.deepEqual(policyOf('GET /oauth/mcp'), { body: 'mcp', origin: 'mcp' });
    } finally {
      database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
