// The token page in a real browser: sign in, mint a token, see it once, use it, revoke it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { launchChromium } from './helpers/chromium.ts';
import { bearer } from './helpers/http.ts';

let s: TestServer;
let browser: Browser;
before(async () => {
  s = await startTestServer();
  await s.addUser({ uid: 'dana', email: 'dana@example.com', password: 'dana password 1' });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await s.stop();
});

test('sign in, create a token, see it once, use it, revoke it', async () => {
  const page = await browser.newPage();
  await page.goto(`${s.url}/`);
  assert.match(page.url(), /\/login\?next=%2F$/, 'anonymous: sent to the login page');

  await page.getByLabel('Username').fill('dana');
  await page.getByLabel('Password').fill('wrong password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  assert.equal(await page.getByRole('alert').textContent(), 'Wrong username or password.');

  await page.getByLabel('Password').fill('dana password 1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Personal access tokens' }).waitFor();
  assert.equal(new URL(page.url()).pathname, '/');

  await page.getByLabel('Name').fill('e2e agent');
  await page.getByLabel('Lifetime').selectOption('30d');
  // MCP is chosen by default; this token may also list and revoke its owner's tokens. Admin is not offered to dana.
  assert.equal(await page.getByRole('checkbox', { name: /^mcp\b/ }).isChecked(), true);
  assert.equal(await page.getByRole('checkbox', { name: /^admin\b/ }).count(), 0);
  await page.getByRole('checkbox', { name: /^api\b/ }).check();
  await page.getByRole('button', { name: 'Create token' }).click();
  assert.match((await page.locator('section.notice.ok').textContent())!, /Scopes: mcp, api\./);
  const token = (await page.locator('#new-token').textContent())!.trim();
  assert.match(token, /^svc_[a-z2-7]{48}$/);
  assert.match((await page.locator('#new-config').textContent())!, /"Authorization": "Bearer svc_/);
  await page.screenshot({ path: `${s.ws.dir}/token-page.png`, fullPage: true });

  // Shown once: a fresh load of the page lists the token but never its value.
  await page.goto(`${s.url}/`);
  assert.equal(await page.locator('#new-token').count(), 0);
  assert.ok(!(await page.content()).includes(token));
  const row = page.locator('tr', { hasText: 'e2e agent' });
  assert.equal((await row.locator('td.state-active').textContent())!.trim(), 'active');

  const api = await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) });
  assert.equal(api.status, 200);
  const [listed] = await api.json();
  assert.equal(listed.name, 'e2e agent');

  await row.getByRole('button', { name: 'Revoke e2e agent' }).click();
  await page.getByRole('heading', { name: 'Personal access tokens' }).waitFor();
  assert.equal((await page.locator('tr', { hasText: 'e2e agent' }).locator('td.state-revoked').textContent())!.trim(), 'revoked');
  assert.equal((await fetch(`${s.url}/auth/tokens`, { headers: bearer(token) })).status, 401);

  await page.getByRole('button', { name: 'Sign out' }).click();
  assert.match(page.url(), /\/login$/);
  await page.goto(`${s.url}/`);
  assert.match(page.url(), /\/login\?next=/);
});
