// A person at svc's authorization page in Chromium: signs in by password when asked, then presses Allow on the
// consent page if svc shows one. What the person saw is returned, so a test can say whether consent was asked.
import type { Page } from 'playwright-core';

export interface Person {
  readonly uid: string;
  readonly password: string;
}

export interface Visit {
  /** the sign-in form was shown */
  readonly signedIn: boolean;
  /** the consent heading, when svc asked; null when it sent the browser straight back to the app */
  readonly consent: string | null;
}

/**
 * Opens `authorizationUrl`, signs in if svc asks, allows on the consent page, and waits until the browser has left
 * svc for `callbackOrigin` (the app's loopback callback). Throws with the page's text when svc shows anything else.
 */
export async function allowInChromium(page: Page, authorizationUrl: string, person: Person, callbackOrigin: string): Promise<Visit> {
  const svcOrigin = new URL(authorizationUrl).origin;
  const leftSvc = () => page.waitForURL((u) => u.origin === callbackOrigin, { timeout: 20_000, waitUntil: 'load' });
  await page.goto(authorizationUrl);
  let signedIn = false;
  if (new URL(page.url()).pathname === '/login') {
    await page.getByLabel('Username').fill(person.uid);
    await page.getByLabel('Password').fill(person.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((u) => u.pathname !== '/login', { timeout: 10_000 });
    signedIn = true;
  }
  if (new URL(page.url()).origin !== svcOrigin) return { signedIn, consent: null };
  const heading = page.getByRole('heading', { level: 1 });
  const title = (await heading.textContent({ timeout: 10_000 }))?.trim() ?? '';
  if (!title.startsWith('Allow '))
    throw new Error(
      `svc showed "${title}" instead of a consent page: ${((await page.locator('main, body').first().textContent()) ?? '').slice(0, 500)}`,
    );
  await Promise.all([leftSvc(), page.getByRole('button', { name: 'Allow' }).click()]);
  return { signedIn, consent: title };
}
