import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { count, sql } from 'drizzle-orm';
import { writeFileSync } from 'node:fs';
import { startTestServer, type TestServer } from './helpers/server.ts';
import {
  startProvider,
  startLyingDiscovery,
  Agent,
  CLIENT_ID,
  CLIENT_SECRET,
  type TestProvider,
  type Account,
} from './helpers/oidc-provider.ts';
import { freePort, DEFAULT_AUTH } from './helpers/workspace.ts';
import { Browser } from './helpers/http.ts';
import { launchChromium } from './helpers/chromium.ts';
import { users, oidcFlows } from '../src/db/schema.ts';
import { getUser, findUser, updateUser } from '../src/store/users.ts';
import { verifySignedId } from '../src/domain/secrets.ts';
import { scrape } from './helpers/metrics.ts';
import { movableClock } from './helpers/clock.ts';
import { FLOW_TTL_SECONDS } from '../src/store/oidc-flows.ts';
import { changeRecord } from './helpers/records.ts';

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const OTHER = {
  client_id: 'other-app',
  client_secret: 'other-app-secret-0123456789',
  redirect_uris: ['http://127.0.0.1:9/other-callback'],
};

function oidcAuth(issuer: string, baseUrl: string, jit: boolean): string {
  return `${DEFAULT_AUTH}oidc
    enabled true
    issuer ${issuer}
    client_id ${CLIENT_ID}
    client_secret_env SVC_OIDC_CLIENT_SECRET
    redirect_url ${baseUrl}/oidc/callback
    jit ${jit}
    default_acl staff
    uid_claim preferred_username
groups
    enabled true
    map
        idp-eng eng
        idp-fin finance
`;
}

async function untilReady(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    // A pooled connection to the server before a restart fails once; like a browser, try again.
    const res = await fetch(`${url}/oidc/login`, { redirect: 'manual' }).catch(() => null);
    if (res?.status === 302) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('svc did not finish OIDC discovery');
}

async function whoami(agent: Agent, svcUrl: string): Promise<{ uid: string; via: string; labels: string[] }> {
  const res = await agent.send(`${svcUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).result.structuredContent;
}

describe('OIDC single sign-on against oidc-provider', () => {
  let s: TestServer;
  let idp: TestProvider;
  // svc judges the sign-in flows' expiry by this clock.
  const clock = movableClock();
  before(async () => {
    const idpPort = await freePort();
    const issuer = `http://127.0.0.1:${idpPort}`;
    s = await startTestServer({
      env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
      auth: ({ baseUrl }) => oidcAuth(issuer, baseUrl, true),
      clock: clock.now,
    });
    idp = await startProvider({ port: idpPort, redirectUris: [`${s.url}/oidc/callback`], extraClients: [OTHER] });
    await untilReady(s.url);
  });
  after(async () => {
    await s?.stop();
    await idp?.stop();
  });

  const userCount = async () => (await s.database.db.select({ n: count() }).from(users).get())!.n;
  const flowCount = async () => (await s.database.db.select({ n: count() }).from(oidcFlows).get())!.n;

  test('the login page offers single sign-on', async () => {
    const html = await (await fetch(`${s.url}/login?next=%2Fauth%2Ftokens`)).text();
    assert.match(html, /href="\/oidc\/login\?next=%2Fauth%2Ftokens"/);
  });

  test('/oidc/login sends the browser to the provider with code flow, PKCE S256, state and nonce', async () => {
    const res = await fetch(`${s.url}/oidc/login`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    const to = new URL(res.headers.get('location')!);
    assert.equal(to.origin, idp.issuer);
    const q = to.searchParams;
    assert.equal(q.get('response_type'), 'code');
    assert.equal(q.get('client_id'), CLIENT_ID);
    assert.equal(q.get('redirect_uri'), `${s.url}/oidc/callback`);
    assert.equal(q.get('code_challenge_method'), 'S256');
    assert.match(q.get('code_challenge')!, /^[A-Za-z0-9_-]{43}$/);
    assert.ok(q.get('state')!.length >= 22 && q.get('nonce')!.length >= 22);
    const cookie = res.headers.get('set-cookie')!;
    assert.match(cookie, /^svc_session_oidc=.*HttpOnly/);
    assert.match(cookie, /Path=\/oidc/);
    assert.match(cookie, /SameSite=Lax/);
  });

  test('the flow cookie is signed with its own key: it never verifies as a session, nor a session as a flow', async () => {
    const start = await fetch(`${s.url}/oidc/login`, { redirect: 'manual' });
    const flow = /^svc_session_oidc=([^;]+)/.exec(start.headers.get('set-cookie')!)![1]!;
    // The signature itself does not verify under the session key (it did when both used the session secret).
    assert.equal(verifySignedId(decodeURIComponent(flow), s.config.auth.session!.secret), null);
    assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: { cookie: `svc_session=${flow}` } })).status, 401);
    await s.addUser({ uid: 'keyed', email: 'keyed@example.com', password: 'keyed password 1' });
    const b = new Browser(s.url);
    assert.equal((await b.login('keyed', 'keyed password 1')).status, 303);
    const session = b.cookies.get('svc_session')!;
    const state = new URL(start.headers.get('location')!).searchParams.get('state')!;
    const callback = await fetch(`${s.url}/oidc/callback?code=x&state=${state}`, {
      headers: { cookie: `svc_session_oidc=${session}` },
      redirect: 'manual',
    });
    assert.equal(callback.status, 400);
  });

  test('first login with jit: user created with default_acl + mapped groups; session; / and /mcp as that user', async () => {
    idp.accounts.set('sub-ann', { email: 'Ann.Lee@example.com', name: 'Ann Lee', groups: ['idp-eng', 'idp-unmapped'] });
    const agent = new Agent();
    const { res } = await agent.signIn(s.url, 'sub-ann', { next: '/auth/tokens' });
    assert.equal(res.status, 303);
    assert.equal(res.headers.get('location'), `${s.url}/auth/tokens`);
    assert.ok(agent.cookie('127.0.0.1', 'svc_session'));
    const ann = await getUser(s.database.db, 'ann.lee');
    assert.deepEqual(ann.labels, ['eng', 'staff']);
    assert.equal(ann.email, 'Ann.Lee@example.com');
    assert.equal(ann.name, 'Ann Lee');
    assert.equal(ann.hasPassword, false);
    assert.equal(ann.admin, false);
    assert.equal((await agent.get(`${s.url}/`)).status, 200);
    const who = await whoami(agent, s.url);
    assert.deepEqual([who.uid, who.via], ['ann.lee', 'session']);
  });

  test('later logins refresh email and name, create no duplicate, and never change labels', async () => {
    await s.database.write((tx) => updateUser(tx, 'ann.lee', changeRecord({ labels: 'eng, staff, granted-by-admin' })));
    idp.accounts.set('sub-ann', { email: 'ann@new.example.com', name: 'Ann New', groups: ['idp-fin'] });
    const before = await userCount();
    const { res } = await new Agent().signIn(s.url, 'sub-ann');
    assert.equal(res.status, 303);
    assert.equal(await userCount(), before);
    const ann = await getUser(s.database.db, 'ann.lee');
    assert.equal(ann.email, 'ann@new.example.com');
    assert.equal(ann.name, 'Ann New');
    assert.deepEqual(ann.labels, ['eng', 'granted-by-admin', 'staff']);
  });

  test('a display name from the provider is cleaned like a client name: no bidi overrides, invisible, control or C1 characters', async () => {
    const dirty = 'Ann\u202E exe.\u200Bgnp\u2066 \u0085New\u00A0\u00ADLee\u0007\u2028x\u{E0041}';
    for (const [sub, email] of [
      ['sub-ann', 'ann@new.example.com'],
      ['sub-fresh', 'fresh@example.com'],
    ]) {
      idp.accounts.set(sub!, { email: email!, name: dirty });
      const { res } = await new Agent().signIn(s.url, sub!);
      assert.equal(res.status, 303, `${sub} signs in`);
    }
    // A name cut at its limit never keeps half of an emoji (which the user record would refuse, failing the sign-in).
    idp.accounts.set('sub-long', { email: 'long@example.com', name: `${'a'.repeat(199)}\u{1F600}` });
    assert.equal((await new Agent().signIn(s.url, 'sub-long')).res.status, 303);
    assert.equal((await getUser(s.database.db, 'long')).name, 'a'.repeat(199));
    // The returning user's name refreshed, and the new one's made, both from the same dirty claim.
    for (const uid of ['ann.lee', 'fresh']) {
      const name = (await getUser(s.database.db, uid)).name;
      assert.equal(name, 'Ann exe.gnp New Leex', uid);
      assert.doesNotMatch(name, /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u00A0]/u);
    }
  });

  test("a provider user with an existing user's email and username gets a suffixed uid, never that user", async () => {
    await s.addUser({ uid: 'bob', email: 'bob@example.com', password: 'bob password 1', labels: 'secret' });
    idp.accounts.set('sub-impostor', { email: 'bob@example.com', preferred_username: 'bob', name: 'Not Bob' });
    const agent = new Agent();
    const { res } = await agent.signIn(s.url, 'sub-impostor');
    assert.equal(res.status, 303);
    const who = await whoami(agent, s.url);
    assert.equal(who.uid, 'bob-2');
    assert.deepEqual(who.labels, ['staff']);
    const bob = await getUser(s.database.db, 'bob');
    assert.deepEqual([bob.name, bob.labels], ['', ['secret']], 'the real bob is untouched');
  });

  test('users from single sign-on cannot use the password form', async () => {
    assert.equal((await new Browser(s.url).login('ann.lee', 'anything at all')).status, 401);
  });

  test('a missing email claim is refused with a clear message; nothing created', async () => {
    idp.accounts.set('sub-noemail', { name: 'No Email', preferred_username: 'noemail' });
    const before = await userCount();
    const agent = new Agent();
    const { res } = await agent.signIn(s.url, 'sub-noemail');
    assert.equal(res.status, 403);
    assert.match(await res.text(), /no usable email address/);
    assert.equal(agent.cookie('127.0.0.1', 'svc_session'), undefined);
    assert.equal(await userCount(), before);
  });

  test('callback with a missing, wrong, expired or replayed state: 400, no session', async () => {
    idp.accounts.set('sub-state', { email: 'state@example.com' });
    const flowsBefore = await flowCount();
    const agent = new Agent();
    const good = await agent.signIn(s.url, 'sub-state');
    assert.equal(good.res.status, 303);
    const session = agent.cookie('127.0.0.1', 'svc_session');

    const replay = await agent.get(good.callbackUrl);
    assert.equal(replay.status, 400, 'replayed state');
    assert.match(await replay.text(), /start again/);

    const noCookie = await fetch(good.callbackUrl, { redirect: 'manual' });
    assert.equal(noCookie.status, 400, 'no flow cookie');

    const fresh = new Agent();
    const started = await fresh.get(`${s.url}/oidc/login`);
    const state = new URL(started.headers.get('location')!).searchParams.get('state')!;
    const code = new URL(good.callbackUrl).searchParams.get('code')!;
    const wrong = await fresh.get(`${s.url}/oidc/callback?code=${code}&state=not-${state}&iss=${encodeURIComponent(idp.issuer)}`);
    assert.equal(wrong.status, 400, 'wrong state');
    const missing = await fresh.get(`${s.url}/oidc/callback?code=${code}`);
    assert.equal(missing.status, 400, 'missing state (the wrong one used the flow up, too)');

    const expiring = new Agent();
    const e = await expiring.get(`${s.url}/oidc/login`);
    const eState = new URL(e.headers.get('location')!).searchParams.get('state')!;
    clock.advance(FLOW_TTL_SECONDS * 1000);
    const expired = await expiring.get(`${s.url}/oidc/callback?code=${code}&state=${eState}&iss=${encodeURIComponent(idp.issuer)}`);
    assert.equal(expired.status, 400, 'expired');
    // Not the provider refusing the used code ("Sign-in failed"): svc never got that far.
    assert.match(await expired.text(), /Sign-in expired/);
    for (const a of [fresh, expiring]) assert.equal(a.cookie('127.0.0.1', 'svc_session'), undefined);
    assert.equal(agent.cookie('127.0.0.1', 'svc_session'), session, 'the replay did not issue another session');
    assert.equal(await flowCount(), flowsBefore, 'every flow this test started was used up');
  });

  test('a replayed code with a fresh, valid state is refused by the provider: 400, no session', async () => {
    idp.accounts.set('sub-code', { email: 'code@example.com' });
    const first = await new Agent().signIn(s.url, 'sub-code');
    assert.equal(first.res.status, 303);
    const code = new URL(first.callbackUrl).searchParams.get('code')!;
    const thief = new Agent();
    const started = await thief.get(`${s.url}/oidc/login`);
    const state = new URL(started.headers.get('location')!).searchParams.get('state')!;
    const res = await thief.get(`${s.url}/oidc/callback?code=${code}&state=${state}&iss=${encodeURIComponent(idp.issuer)}`);
    assert.equal(res.status, 400);
    assert.match(await res.text(), /refused the sign-in|could not be verified/);
    assert.equal(thief.cookie('127.0.0.1', 'svc_session'), undefined);
  });

  test('a provider error response (access_denied): 400 with a clear page, no session', async () => {
    const agent = new Agent();
    const started = await agent.get(`${s.url}/oidc/login`);
    const state = new URL(started.headers.get('location')!).searchParams.get('state')!;
    const res = await agent.get(
      `${s.url}/oidc/callback?error=access_denied&error_description=the+user+said+no&state=${state}&iss=${encodeURIComponent(idp.issuer)}`,
    );
    assert.equal(res.status, 400);
    assert.match(await res.text(), /did not sign you in \(access_denied/);
    assert.equal(agent.cookie('127.0.0.1', 'svc_session'), undefined);
  });

  test('an ID token for another audience is refused: 400, no session, no user', async () => {
    idp.accounts.set('sub-aud', { email: 'aud@example.com', preferred_username: 'aud-victim' });
    const agent = new Agent();
    const { res } = await agent.signIn(s.url, 'sub-aud', {
      beforeProvider: async (url) => {
        const nonce = url.searchParams.get('nonce')!;
        idp.substituteNextIdToken(
          await idp.obtainIdToken({
            clientId: OTHER.client_id,
            clientSecret: OTHER.client_secret,
            redirectUri: OTHER.redirect_uris[0]!,
            nonce,
            login: 'sub-aud',
          }),
        );
      },
    });
    assert.equal(res.status, 400);
    const page = await res.text();
    assert.match(page, /could not be verified \(.*&quot;aud&quot; \(audience\) claim value/);
    assert.equal(agent.cookie('127.0.0.1', 'svc_session'), undefined);
    assert.equal(await findUser(s.database.db, 'aud-victim'), null);
  });

  test('an ID token with another nonce is refused: 400, no session', async () => {
    idp.accounts.set('sub-nonce', { email: 'nonce@example.com', preferred_username: 'nonce-victim' });
    const agent = new Agent();
    const { res } = await agent.signIn(s.url, 'sub-nonce', {
      beforeProvider: async () => {
        idp.substituteNextIdToken(
          await idp.obtainIdToken({
            clientId: CLIENT_ID,
            clientSecret: CLIENT_SECRET,
            redirectUri: `${s.url}/oidc/callback`,
            nonce: 'not-the-nonce-svc-sent',
            login: 'sub-nonce',
          }),
        );
      },
    });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /could not be verified \(.*ID Token &quot;nonce&quot; claim value/);
    assert.equal(agent.cookie('127.0.0.1', 'svc_session'), undefined);
    assert.equal(await findUser(s.database.db, 'nonce-victim'), null);
  });

  test("in headless Chromium: the single sign-on button, the provider's pages, back at the token page", async () => {
    idp.accounts.set('sub-dora', { email: 'dora@example.com', name: 'Dora', preferred_username: 'dora' });
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(`${s.url}/`);
      await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
      await page.locator('input[name="login"]').fill('sub-dora');
      await page.locator('input[name="password"]').fill('any');
      await page.locator('button[type="submit"]').click();
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.getByRole('heading', { name: 'Personal access tokens' }).waitFor();
      assert.equal(new URL(page.url()).origin, s.url);
      assert.match(await page.content(), /dora/);
    } finally {
      await browser.close();
    }
  });

  test('jit false: unknown users get 403 (ask an admin); pre-provisioned users are linked, then matched by subject', async () => {
    writeFileSync(
      s.ws.configPath,
      `[server]\nlisten = 127.0.0.1:${s.ws.port}\nbase_url = ${s.url}\ndatabase = ${s.ws.dbUrl}\n[auth]\n${oidcAuth(idp.issuer, s.url, false)}`,
    );
    await s.restart();
    await untilReady(s.url);
    idp.accounts.set('sub-stranger', { email: 'stranger@example.com', preferred_username: 'stranger' });
    const before = await userCount();
    const stranger = await new Agent().signIn(s.url, 'sub-stranger');
    assert.equal(stranger.res.status, 403);
    assert.match(await stranger.res.text(), /ask an administrator/);
    assert.equal(await userCount(), before);

    await s.addUser({ uid: 'carol', email: 'carol.old@example.com', labels: 'finance' });
    idp.accounts.set('sub-carol', { email: 'carol@example.com', preferred_username: 'carol', name: 'Carol', groups: ['idp-eng'] });
    const agent = new Agent();
    assert.equal((await agent.signIn(s.url, 'sub-carol')).res.status, 303);
    const carol = await getUser(s.database.db, 'carol');
    assert.deepEqual(carol.labels, ['finance'], "linking gives no group labels and keeps the admin's ACL");
    assert.equal(carol.email, 'carol@example.com');
    // Once linked, the subject decides: a new preferred_username changes nothing.
    idp.accounts.set('sub-carol', { email: 'carol@example.com', preferred_username: 'carol-renamed' });
    const again = new Agent();
    assert.equal((await again.signIn(s.url, 'sub-carol')).res.status, 303);
    assert.equal((await whoami(again, s.url)).uid, 'carol');
    assert.equal(await userCount(), before + 1);
  });
});

// CONTRACT §4: a pre-provisioned user is linked only when the provider vouches for the match. Each arrival here
// claims the admin "carol" some other way; her record must not change, under jit on and off.
for (const jit of [true, false]) {
  describe(`pre-provisioned accounts cannot be taken over (jit ${jit})`, () => {
    let s: TestServer;
    let idp: TestProvider;
    before(async () => {
      const idpPort = await freePort();
      s = await startTestServer({
        env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
        auth: ({ baseUrl }) => oidcAuth(`http://127.0.0.1:${idpPort}`, baseUrl, jit),
      });
      idp = await startProvider({ port: idpPort, redirectUris: [`${s.url}/oidc/callback`] });
      await untilReady(s.url);
      await s.addUser({ uid: 'carol', email: 'carol@example.com', name: 'Carol Admin', labels: 'board, finance', admin: true });
      await s.addUser({ uid: 'dana', email: 'dana@example.com', labels: 'finance' });
      await s.addUser({ uid: 'erin', email: 'erin@example.com', labels: 'finance' });
    });
    after(async () => {
      await s?.stop();
      await idp?.stop();
    });
    const record = async (uid: string) => {
      const row = await s.database.db.select().from(users).where(sql`${users.uid} = ${uid}`).get();
      const linked = await s.database.db.all(sql`SELECT provider, subject FROM identities WHERE user_id = ${row!.id}`);
      return { ...row, linked };
    };

    const attempts: [string, Account][] = [
      ["no preferred_username, an attacker's address with her local part", { email: 'carol@attacker.example' }],
      ['an invalid preferred_username', { email: 'carol@attacker.example', preferred_username: 'carol smith!' }],
      ['her local part in capitals', { email: 'Carol@attacker.example' }],
      ['her exact email, unverified', { email: 'carol@example.com', email_verified: false }],
      ['her local part at another domain, verified', { email: 'carol@example.org' }],
      ['her email in other letter case, verified', { email: 'Carol@example.com' }],
      ['a Unicode look-alike of her email and uid', { email: 'c\u0430rol@example.com', preferred_username: 'c\u0430rol' }],
      ['her uid in other letter case', { email: 'someone@attacker.example', preferred_username: 'Carol' }],
      ['a fullwidth look-alike uid', { email: 'someone2@attacker.example', preferred_username: '\uff43arol' }],
    ];
    for (const [name, account] of attempts) {
      test(`${name}: no link, her record unchanged`, async () => {
        const before = await record('carol');
        const sub = `sub-${Math.random().toString(36).slice(2)}`;
        idp.accounts.set(sub, account);
        const agent = new Agent();
        const { res } = await agent.signIn(s.url, sub);
        if (jit) {
          assert.equal(res.status, 303, 'a new user instead');
          const who = await whoami(agent, s.url);
          assert.notEqual(who.uid.toLowerCase(), 'carol');
          assert.equal((who as { admin?: boolean }).admin, false);
        } else {
          assert.equal(res.status, 403);
        }
        assert.deepEqual(await record('carol'), before);
      });
    }

    test('controls: the provider vouching by uid claim, or by her exact verified email, does link', async () => {
      idp.accounts.set('sub-dana', { email: 'dana@elsewhere.example', preferred_username: 'dana' });
      const byUid = new Agent();
      assert.equal((await byUid.signIn(s.url, 'sub-dana')).res.status, 303);
      assert.equal((await whoami(byUid, s.url)).uid, 'dana');
      idp.accounts.set('sub-erin', { email: 'erin@example.com', email_verified: true, preferred_username: 'erin.e' });
      const byEmail = new Agent();
      assert.equal((await byEmail.signIn(s.url, 'sub-erin')).res.status, 303);
      assert.equal((await whoami(byEmail, s.url)).uid, 'erin');
      assert.deepEqual((await record('erin')).linked, [{ provider: `oidc:${idp.issuer}`, subject: 'sub-erin' }]);
      assert.deepEqual((await record('carol')).linked, [], 'nobody took carol');
    });
  });
}

describe('the email vouch counts only linkable users, and compares the claim exactly as sent', () => {
  let s: TestServer;
  let idp: TestProvider;
  before(async () => {
    const idpPort = await freePort();
    s = await startTestServer({
      env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
      auth: ({ baseUrl }) => oidcAuth(`http://127.0.0.1:${idpPort}`, baseUrl, true),
    });
    idp = await startProvider({ port: idpPort, redirectUris: [`${s.url}/oidc/callback`] });
    await untilReady(s.url);
    await s.addUser({ uid: 'carol', email: 'carol@corp.test', labels: 'board' });
    await s.addUser({ uid: 'frank', email: 'frank@corp.test', labels: 'finance' });
    await s.addUser({ uid: 'frank.local', email: 'frank@corp.test', password: 'frank password 1' });
    await s.addUser({ uid: 'erin', email: 'erin@corp.test', labels: 'finance' });
  });
  after(async () => {
    await s?.stop();
    await idp?.stop();
  });
  const linkedTo = async (uid: string) => {
    const row = (await findUser(s.database.db, uid))!;
    return (await s.database.db.all<{ subject: string }>(sql`SELECT subject FROM identities WHERE user_id = ${row.id}`)).map(
      (r) => r.subject,
    );
  };

  test("an unverified claim of carol's address makes a JIT user who keeps it, and carol still links by her verified address", async () => {
    idp.accounts.set('sub-squatter', { email: 'carol@corp.test', email_verified: false });
    const squatter = new Agent();
    assert.equal((await squatter.signIn(s.url, 'sub-squatter')).res.status, 303);
    const made = await whoami(squatter, s.url);
    assert.equal(made.uid, 'carol-2');
    assert.deepEqual(made.labels, ['staff']);
    assert.equal((await findUser(s.database.db, 'carol-2'))?.email, 'carol@corp.test', 'the address is kept');
    assert.deepEqual(await linkedTo('carol'), []);

    idp.accounts.set('sub-carol', { email: 'carol@corp.test', email_verified: true, preferred_username: 'c.smith' });
    const carol = new Agent();
    assert.equal((await carol.signIn(s.url, 'sub-carol')).res.status, 303);
    const who = await whoami(carol, s.url);
    assert.deepEqual([who.uid, who.labels], ['carol', ['board']], 'linked to her account, with her labels');
    assert.deepEqual(await linkedTo('carol'), ['sub-carol']);
    assert.deepEqual(await linkedTo('carol-2'), ['sub-squatter'], 'the JIT user was never linked to carol');
  });

  test('a password user with the same address neither blocks the link nor is linked', async () => {
    idp.accounts.set('sub-frank', { email: 'frank@corp.test', email_verified: true });
    const frank = new Agent();
    assert.equal((await frank.signIn(s.url, 'sub-frank')).res.status, 303);
    assert.equal((await whoami(frank, s.url)).uid, 'frank');
    assert.deepEqual(await linkedTo('frank.local'), []);
  });

  test('the email claim is compared as sent: spaces around a verified address link nobody', async () => {
    idp.accounts.set('sub-spaced', { email: ' erin@corp.test ', email_verified: true });
    const spaced = new Agent();
    const { res } = await spaced.signIn(s.url, 'sub-spaced');
    assert.notEqual(res.status, 303, 'refused: no usable address');
    assert.equal(spaced.cookie('127.0.0.1', 'svc_session'), undefined);
    assert.deepEqual(await linkedTo('erin'), []);
    assert.equal((await findUser(s.database.db, 'erin'))?.email, 'erin@corp.test');
  });
});

describe('OIDC with a provider that is down or lies about its issuer', () => {
  test('provider down: svc serves the other channels, /oidc/login is 503, svc check says what is wrong; readiness and metrics report it', async () => {
    const deadPort = await freePort();
    const metricsPort = await freePort();
    const s = await startTestServer({
      env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
      auth: ({ baseUrl }) => oidcAuth(`http://127.0.0.1:${deadPort}`, baseUrl, true),
      serverExtra: `metrics_listen = 127.0.0.1:${metricsPort}\n`,
    });
    let idp: Awaited<ReturnType<typeof startProvider>> | null = null;
    try {
      // Ready without the provider: the other channels serve. The state is reported, not required.
      const ready = await fetch(`${s.url}/readyz`);
      assert.equal(ready.status, 200);
      assert.deepEqual(await ready.json(), { status: 'ready', oidc: 'unavailable' });
      await until(
        async () => (await scrape(`http://127.0.0.1:${metricsPort}/metrics`)).value('svc_oidc_discovery_last_error_timestamp_seconds') > 0,
      );
      assert.equal((await scrape(`http://127.0.0.1:${metricsPort}/metrics`)).value('svc_oidc_discovery_ready'), 0);
      await s.addUser({ uid: 'local', email: 'local@example.com', password: 'local password' });
      assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
      const login = await fetch(`${s.url}/oidc/login`, { redirect: 'manual' });
      assert.equal(login.status, 503);
      assert.match(await login.text(), /not available right now/);
      assert.equal((await new Browser(s.url).login('local', 'local password')).status, 303, 'password login still works');
      const check = await s.ws.svc(['check'], { env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET } });
      assert.equal(check.code, 1);
      assert.match(check.stderr, /auth\.oidc\.issuer: discovery at http:\/\/127\.0\.0\.1:\d+ failed/);

      // The provider comes up: discovery's retry finds it.
      idp = await startProvider({ port: deadPort, redirectUris: [`${s.url}/oidc/callback`] });
      await until(async () => ((await (await fetch(`${s.url}/readyz`)).json()) as { oidc?: string }).oidc === 'ready', 20_000);
      assert.equal((await scrape(`http://127.0.0.1:${metricsPort}/metrics`)).value('svc_oidc_discovery_ready'), 1);
    } finally {
      await s.stop();
      await idp?.stop();
    }
  });

  test('an issuer mix-up (ID token from another issuer than configured) is refused: 400, no session', async () => {
    const realPort = await freePort();
    const lyingPort = await freePort();
    const s = await startTestServer({
      env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
      auth: ({ baseUrl }) => oidcAuth(`http://127.0.0.1:${lyingPort}`, baseUrl, true),
    });
    const real = await startProvider({ port: realPort, redirectUris: [`${s.url}/oidc/callback`] });
    const lying = await startLyingDiscovery(lyingPort, real.issuer);
    try {
      await untilReady(s.url);
      real.accounts.set('sub-mix', { email: 'mix@example.com', preferred_username: 'mixup' });
      const agent = new Agent();
      const { res } = await agent.signIn(s.url, 'sub-mix');
      assert.equal(res.status, 400);
      assert.match(await res.text(), /could not be verified \(.*&quot;iss&quot; \(issuer\)/);
      assert.equal(agent.cookie('127.0.0.1', 'svc_session'), undefined);
      assert.equal(await findUser(s.database.db, 'mixup'), null);
    } finally {
      await s.stop();
      await lying.stop();
      await real.stop();
    }
  });

  test('svc check reaches a working provider', async () => {
    const port = await freePort();
    const s = await startTestServer({
      env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET },
      auth: ({ baseUrl }) => oidcAuth(`http://127.0.0.1:${port}`, baseUrl, true),
    });
    const idp = await startProvider({ port, redirectUris: [`${s.url}/oidc/callback`] });
    try {
      const check = await s.ws.svc(['check'], { env: { SVC_OIDC_CLIENT_SECRET: CLIENT_SECRET } });
      assert.equal(check.code, 0, check.stderr);
      assert.match(check.stdout, /identity provider answers/);
    } finally {
      await s.stop();
      await idp.stop();
    }
  });
});
