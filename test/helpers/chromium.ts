import fs from 'node:fs';
import { chromium, Browser, type Locator } from 'playwright-core';
import { TEST_DB } from './db';

/** Debian's Chromium, driven by playwright-core (CHROMIUM_PATH to use another). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = fs.existsSync(CHROMIUM);
if (!available && process.env.CI) throw new Error(`Chromium is required in CI (${CHROMIUM}); .ci/run installs it`);

/** describe() for browser tests: the browser path does not depend on the database engine, so they run once, on the SQLite pass. */
export const describeInChromium = available && TEST_DB === 'sqlite' ? describe : describe.skip;

/** Headless, without the sandbox (tests run as root) and without background traffic, which this machine's closed network refuses. */
export const LAUNCH_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function launchChromium(options: { args?: string[]; ignoreDefaultArgs?: string[] } = {}): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: [...LAUNCH_ARGS, ...(options.args ?? [])], ignoreDefaultArgs: options.ignoreDefaultArgs });
}

/**
 * Waits until the element has the focus. The dashboard moves the focus in effects and animation
 * frames, after the element it focuses is visible; reading `document.activeElement` at once races
 * them on a loaded machine. A focus that never arrives still fails, at the locator's time-out.
 */
export async function waitForFocus(target: Locator): Promise<void> {
  const handle = await target.elementHandle();
  await target.page().waitForFunction((el) => el === document.activeElement, handle);
}
