import fs from 'node:fs';
import { chromium, Browser } from 'playwright-core';

/** Debian's Chromium, driven by playwright-core (CHROMIUM_PATH to use another). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Whether the browser tests can run here; in CI a missing browser is an error, not a skip. */
export function chromiumAvailable(testFile: string): boolean {
  const available = fs.existsSync(CHROMIUM);
  if (!available && process.env.CI) throw new Error(`Chromium is required in CI (${CHROMIUM}); .ci/run installs it`);
  if (!available) console.warn(`${testFile} skipped: no Chromium at ${CHROMIUM}`);
  return available;
}

/** Headless, without the sandbox (tests run as root in a container) and without background traffic. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
