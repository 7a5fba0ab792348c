// Requests from other sites and cookies that another site or a plain-http page could set: /mcp checks Origin, and
// the session cookie over https is __Host- prefixed.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from './helpers/server.ts';
import { bearer } from './helpers/http.ts';

describe('/mcp checks Origin (DNS rebinding)', () => {
  test("another origin is 403; base_url's origin, allowed_origins and no Origin at all are served", async () => {
    const s = await startTestServer({ serverExtra: 'allowed_origins = https://agent.example.com\n' });
    try {
      const token = await s.tokenFor(await s.addUser({ uid: 'u', email: 'u@example.com' }));
      const call = (origin?: string) =>
        fetch(`${s.url}/mcp`, {
          method: 'POST',
          headers: {
            ...bearer(token),
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...(origin ? { origin } : {}),
          },
          body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}',
        });
      for (const evil of ['http://evil.example', 'http://127.0.0.1.evil.example', 'null', `${s.url}.evil.example`]) {
        const r = await call(evil);
        assert.equal(r.status, 403, evil);
        assert.doesNotMatch(await r.text(), /"uid"/);
      }
      for (const good of [undefined, s.url, 'https://agent.example.com']) assert.equal((await call(good)).status, 200, String(good));
    } finally {
      await s.stop();
    }
  });
});

describe('cookies over https', () => {
  test('the session cookie is __Host- prefixed, Secure, Path=/, without Domain', async () => {
    const s = await startTestServer({ baseUrl: 'https://svc.example.com' });
    try {
      await s.addUser({ uid: 'h', email: 'h@example.com', password: 'h password 12' });
      const res = await fetch(`${s.url}/login`, {
        method: 'POST',
        headers: { origin: 'https://svc.example.com', 'content-type': 'application/x-www-form-urlencoded' },
        body: 'username=h&password=h+password+12',
        redirect: 'manual',
      });
      assert.equal(res.status, 303);
      const cookie = res.headers.getSetCookie().find((c) => c.startsWith('__Host-svc_session='));
      assert.ok(cookie, res.headers.getSetCookie().join(' | '));
      assert.match(cookie, /; Secure/i);
      assert.match(cookie, /; Path=\//i);
      assert.doesNotMatch(cookie, /Domain=/i);
      const value = cookie.split(';')[0]!.split('=').slice(1).join('=');
      assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: { cookie: `__Host-svc_session=${value}` } })).status, 200);
      assert.equal(
        (await fetch(`${s.url}/auth/tokens`, { headers: { cookie: `svc_session=${value}` } })).status,
        401,
        'the unprefixed name is not read',
      );
    } finally {
      await s.stop();
    }
  });
});
