// Headless Debian Chromium through playwright-core. Flags keep it off the network: this machine has none,
// and without them Chromium keeps trying to reach update and sync services.
import { chromium, type Browser } from 'playwright-core';
import { requireProgram } from './programs.ts';

export const CHROMIUM = '/usr/bin/chromium';

/** Debian's Chromium, or an error saying to install chromium. */
export function chromiumProgram(): string {
  return requireProgram(CHROMIUM, 'chromium');
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumProgram(),
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
