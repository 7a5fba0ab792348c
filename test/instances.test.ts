// Several svc instances on one database behave as one (CONTRACT §5): two svc processes share a database file behind
// Debian nginx taking them in turn, and every piece of state a request can leave behind holds across them.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { install, listenedPort, sourceRunner, sqlOn, type Installation } from './helpers/installation.ts';
import { startSqld, type Sqld } from './helpers/sqld.ts';
import { startNginx, type Nginx } from './helpers/nginx.ts';
import { startProvider, Agent, CLIENT_ID, CLIENT_SECRET, type TestProvider } from './helpers/oidc-provider.ts';
import { Browser, bearer } from './helpers/http.ts';
import { DEFAULT_AUTH, freePort } from './helpers/workspace.ts';
import { waitFor } from './helpers/wait.ts';

const PROXY_SECRET = 'proxy-shared-secret-0123456789abcdef';

for (const on of ['file', 'sqld'] as const)
  describe(`two instances on one ${on === 'file' ? 'database file' : 'sqld'} behind nginx`, () => {
    let inst: Installation;
    let sqld: Sqld | null = null;
    let nginx: Nginx;
    let idp: TestProvider;
    const servers: ChildProcess[] = [];
    let front: string;
    let a: string;
    let b: string;

    before(async () => {
      // The proxy's and the provider's addresses are in svc's configuration, so they are chosen first; A and B bind
      // ports of their own and report them, and nginx is configured after.
      const [portN, portIdp] = [await freePort(), await freePort()];
      front = `http://127.0.0.1:${portN}`;
      const issuer = `http://127.0.0.1:${portIdp}`;
      idp = await startProvider({ port: portIdp, redirectUris: [`${front}/oidc/callback`] });
      const auth =
        `${DEFAULT_AUTH}oidc\n    enabled true\n    issuer ${issuer}\n    client_id ${CLIENT_ID}\n    client_secret_env SVC_OIDC_CLIENT_SECRET\n    redirect_url ${front}/oidc/callback\n    jit true\n` +
        `header\n    enabled true\n    user_header X-Authenticated-User\n    email_header X-Authenticated-Email\n    secret_header X-Auth-Secret\n    shared_secret_env SVC_PROXY_SECRET\n    trusted_proxy 127.0.0.1\n    jit true\n`;
      if (on === 'sqld') sqld = await startSqld({ auth: true });
      inst = await install(sourceRunner, {
        auth,
        env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET, SVC_PROXY_SECRET: PROXY_SECRET },
        ...(sqld ? { remote: { url: sqld.url, token: sqld.token } } : {}),
      });
      const tokenLine = sqld ? 'database_token_env = SVC_DATABASE_TOKEN\n' : '';
      const ports: number[] = [];
      for (const name of ['a', 'b']) {
        const config = join(inst.dir, `svc-${name}.ini`);
        writeFileSync(
          config,
          `[server]\nlisten = 127.0.0.1:0\nbase_url = ${front}\ndatabase = ${inst.database}\n${tokenLine}[auth]\n${auth}`,
        );
        const { file, args } = sourceRunner.command(['serve', '--config', config]);
        const child = spawn(file, args, { env: inst.env, stdio: ['ignore', 'pipe', 'pipe'] });
        servers.push(child);
        let log = '';
        child.stdout.on('data', (d) => (log += d));
        child.stderr.on('data', (d) => (log += d));
        await waitFor(`svc ${name} to report its port`, () => listenedPort(log) !== null || child.exitCode !== null);
        ports.push(listenedPort(log) ?? assert.fail(`svc ${name} did not start:\n${log}`));
      }
      const [portA, portB] = ports as [number, number];
      [a, b] = [`http://127.0.0.1:${portA}`, `http://127.0.0.1:${portB}`];
      for (const url of [a, b]) {
        await waitFor(
          `${url} to finish OIDC discovery`,
          () =>
            fetch(`${url}/oidc/login`, { redirect: 'manual' }).then(
              (r) => r.status === 302,
              () => false,
            ),
          { everyMs: 50 },
        );
      }
      nginx = await startNginx({ port: portN, upstreamPort: [portA, portB], secret: PROXY_SECRET, users: { newcomer: 'newcomer-pw' } });
      for (const [uid, pw] of [
        ['paula', 'paula password 1'],
        ['tom', 'tom password 1'],
      ]) {
        assert.equal((await inst.cli(['user', 'add', uid!, '--email', `${uid}@example.com`, '--password-stdin'], `${pw}\n`)).code, 0);
      }
    });
    after(async () => {
      await nginx?.stop();
      for (const s of servers) s.kill('SIGTERM');
      await idp?.stop();
      inst?.remove();
      await sqld?.remove();
    });

    /** A browser at `base` that says it is on the site's public origin, as it would behind the proxy. */
    const browserAt = (base: string) => {
      const browser = new Browser(base);
      const request = browser.request.bind(browser);
      browser.request = (path, init = {}) => request(path, { ...init, origin: init.origin === undefined ? front : init.origin });
      return browser;
    };

    test('a session made on A works on B; logging out on B ends it on A', async () => {
      const onA = browserAt(a);
      assert.equal((await onA.login('paula', 'paula password 1')).status, 303);
      const onB = browserAt(b);
      for (const [k, v] of onA.cookies) onB.cookies.set(k, v);
      assert.equal((await onB.request('/auth/tokens')).status, 200);
      assert.equal((await onB.request('/logout', { method: 'POST', form: {} })).status, 303);
      assert.equal((await onA.request('/auth/tokens')).status, 401);
    });

    test('a token revoked on A is refused by B on the very next request', async () => {
      const token = (await inst.cli(['token', 'create', 'tom', '--name', 'both', '--scopes', 'api'])).stdout.trim();
      for (const url of [a, b]) assert.equal((await fetch(`${url}/auth/tokens`, { headers: bearer(token) })).status, 200);
      const id = ((await (await fetch(`${a}/auth/tokens`, { headers: bearer(token) })).json()) as { id: string }[])[0]!.id;
      assert.equal((await fetch(`${a}/auth/tokens/${id}/revoke`, { method: 'POST', headers: bearer(token) })).status, 200);
      assert.equal((await fetch(`${b}/auth/tokens`, { headers: bearer(token) })).status, 401);
    });

    test('the sign-in throttle counts across both', async () => {
      for (const url of [a, a, a, b, b]) assert.equal((await browserAt(url).login('tom', 'wrong password')).status, 401);
      assert.equal((await browserAt(a).login('tom', 'tom password 1')).status, 429);
      assert.equal((await browserAt(b).login('tom', 'tom password 1')).status, 429);
    });

    test('20 wrong-password sign-ins at once, spread over both: exactly 5 passwords are checked, the rest are 429', async () => {
      assert.equal(
        (await inst.cli(['user', 'add', 'burst', '--email', 'burst@example.com', '--password-stdin'], 'burst password 1\n')).code,
        0,
      );
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => browserAt(i % 2 === 0 ? a : b).login('burst', `guess ${i}`)));
      const statuses = answers.map((r) => r.status).sort();
      assert.deepEqual(
        statuses,
        [...Array(5).fill(401), ...Array(15).fill(429)],
        'the reservation is taken before the check, in one write transaction at a time across both',
      );
      assert.equal((await browserAt(b).login('burst', 'burst password 1')).status, 429, 'even the right password waits');
    });

    test('a single sign-on flow started on A completes on B', async () => {
      idp.accounts.set('sub-olga', { email: 'olga@example.com', preferred_username: 'olga' });
      const agent = new Agent();
      const start = await agent.get(`${a}/oidc/login`);
      assert.equal(start.status, 302);
      // Through the provider's pages until it sends the browser back to the callback (which goes to B, not A).
      let url = start.headers.get('location')!;
      for (let step = 0; step < 20 && new URL(url).pathname !== '/oidc/callback'; step++) {
        const res = await agent.get(url);
        const location = res.headers.get('location');
        if (location) {
          url = new URL(location, url).href;
          continue;
        }
        const html = await res.text();
        url = html.includes('name="login"')
          ? await agent.submit(url, html, { login: 'sub-olga', password: 'any' })
          : await agent.submit(url, html);
      }
      const callback = new URL(url);
      assert.equal(callback.pathname, '/oidc/callback');
      const done = await agent.get(`${b}${callback.pathname}${callback.search}`);
      assert.equal(done.status, 303, await done.text());
      assert.equal((await agent.get(`${a}/auth/tokens`)).status, 200, 'and its session works on A');
    });

    test('an MCP session opened on A is honoured by B, for its user only', async () => {
      const paula = (await inst.cli(['token', 'create', 'paula', '--name', 'mcp'])).stdout.trim();
      const tom = (await inst.cli(['token', 'create', 'tom', '--name', 'mcp'])).stdout.trim();
      const post = (url: string, token: string, body: unknown, session?: string) =>
        fetch(`${url}/mcp`, {
          method: 'POST',
          headers: {
            ...bearer(token),
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...(session ? { 'mcp-session-id': session } : {}),
          },
          body: JSON.stringify(body),
        });
      const init = await post(a, paula, {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      });
      const session = init.headers.get('mcp-session-id')!;
      assert.ok(session);
      assert.equal((await post(b, paula, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session)).status, 200);
      assert.equal((await post(b, tom, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session)).status, 403);
    });

    test('8 concurrent first arrivals through the proxy, spread over both, create one user', async () => {
      const basic = { authorization: `Basic ${Buffer.from('newcomer:newcomer-pw').toString('base64')}` };
      const answers = await Promise.all(Array.from({ length: 8 }, () => fetch(`${front}/auth/tokens`, { headers: basic })));
      assert.deepEqual([...new Set(answers.map((r) => r.status))], [200]);
      assert.equal(await sqlOn(inst, "SELECT count(*) FROM users WHERE email = 'newcomer@example.com';"), '1');
    });

    test('the audit trail has every event once', async () => {
      const count = (action: string, target: string) =>
        sqlOn(inst, `SELECT count(*) FROM audit WHERE action = '${action}' AND target = '${target}';`).then(Number);
      assert.equal(await count('login.success', 'paula'), 1);
      assert.equal(await count('login.success', 'olga'), 1);
      assert.equal(await count('user.provision', 'olga'), 1);
      assert.equal(await count('user.provision', 'newcomer'), 1);
      assert.equal(await count('login.failure', 'tom'), 5);
      assert.equal(Number(await sqlOn(inst, "SELECT count(*) FROM audit WHERE action = 'token.revoke';")), 1);
    });

    // Last: it kills A.
    test('kill -9 of A under writes on both: nothing either acknowledged is lost, and B keeps serving', async () => {
      assert.equal((await inst.cli(['user', 'add', 'kim', '--email', 'kim@example.com', '--password-stdin'], 'kim password 1\n')).code, 0);
      const sessions = await Promise.all(
        [a, a, b, b].map(async (url) => {
          const browser = browserAt(url);
          assert.equal((await browser.login('kim', 'kim password 1')).status, 303);
          return { url, browser };
        }),
      );
      const minted = new Map<string, { id: string; token: string }>();
      const revoked = new Set<string>();
      /** tokens whose revoke was sent but not answered 200 */
      const unanswered = new Set<string>();
      const statusesOnB = new Map<number, number>();
      let onBAfterKill = 0;
      let killed = false;
      let running = true;
      const writers = sessions.map(async ({ url, browser }, w) => {
        for (let i = 0; running; i++) {
          try {
            const r = await browser.request('/auth/tokens', { json: { name: `k${w}-${i}`, scopes: 'api' } });
            if (url === b) statusesOnB.set(r.status, (statusesOnB.get(r.status) ?? 0) + 1);
            if (r.status !== 201) {
              await r.arrayBuffer();
              continue;
            }
            const made = (await r.json()) as { id: string; token: string };
            minted.set(made.id, made);
            if (url === b && killed) onBAfterKill++;
            if (i % 2 === 1) {
              unanswered.add(made.id);
              const rv = await browser.request(`/auth/tokens/${made.id}/revoke`, { method: 'POST', json: {} });
              if (url === b) statusesOnB.set(rv.status, (statusesOnB.get(rv.status) ?? 0) + 1);
              await rv.arrayBuffer();
              if (rv.status === 200) {
                unanswered.delete(made.id);
                revoked.add(made.id);
              }
            }
          } catch {
            // A was killed mid-request: not acknowledged
            if (url === a) return;
          }
        }
      });
      await waitFor('20 tokens minted through the proxy', () => minted.size >= 20, { everyMs: 10 });
      servers[0]!.kill('SIGKILL');
      killed = true;
      await waitFor('10 answers from B after A was killed', () => onBAfterKill >= 10, { everyMs: 10 });
      running = false;
      await Promise.all(writers);
      assert.deepEqual(
        [...statusesOnB.keys()].filter((st) => ![200, 201, 503].includes(st)),
        [],
        `B answered only 2xx or 503: ${JSON.stringify([...statusesOnB])}`,
      );
      for (const { id, token } of minted.values()) {
        // Every acknowledged token is stored. A revoke that was answered 200 took effect; one left unanswered (A was
        // killed with it on its way) or refused may or may not have, and then B must answer as the database says.
        const stored = await sqlOn(inst, `SELECT revoked_at IS NOT NULL FROM tokens WHERE id = '${id}';`);
        assert.ok(stored === '0' || stored === '1', `token ${id}, acknowledged, is stored`);
        if (revoked.has(id)) assert.equal(stored, '1', `token ${id}, revoked with a 200, is stored revoked`);
        else if (!unanswered.has(id)) assert.equal(stored, '0', `token ${id}, never revoked, is stored active`);
        assert.equal(
          (await fetch(`${b}/auth/tokens`, { headers: bearer(token) })).status,
          stored === '1' ? 401 : 200,
          `token ${id} through B`,
        );
      }
    });
  });
