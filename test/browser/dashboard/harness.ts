/**
 * What every dashboard browser test needs (test/browser/dashboard-*.test.ts): the real service over
 * HTTPS on localhost (the session cookie is `__Host-`, so Secure), a site with an owner and an
 * agent made through the accounts service (as the CLI makes them), Chromium, sign-in through the
 * page, and the checks every page gets: CSP violations and page errors recorded, axe-core with no
 * serious or critical finding, a screenshot in test-artifacts/dashboard/<name>.png.
 */
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import axe from 'axe-core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { Harness } from '../../helpers/harness';
import { launchChromium } from '../../helpers/chromium';
import { freePort } from '../../helpers/spawn';
import { makeSelfSignedCert } from '../../../server/platform/tls';
import { manageHarness, newMember, PASSWORD } from '../../manage/helpers';

export { PASSWORD };
export const ARTIFACTS = path.resolve(__dirname, '../../../test-artifacts/dashboard');

export interface Person {
  id: string;
  email: string;
}

export interface DashboardHarness {
  h: Harness;
  origin: string;
  browser: Browser;
  site: { id: string; key: string };
  owner: Person;
  agent: Person;
  /** Uncaught errors of every page so far. */
  pageErrors: string[];
  /** A fresh browser profile (no cookies) that records CSP violations and page errors. */
  newContext(options?: Parameters<Browser['newContext']>[0]): Promise<BrowserContext>;
  /** Opens a dashboard path in a new profile, signed in as `who` through the sign-in page. */
  signedIn(who: Person, pathBelow?: string, options?: Parameters<Browser['newContext']>[0]): Promise<Page>;
  /** Fills and submits the sign-in form shown on the page (or in the session dialog). */
  signIn(page: Page, email: string, password?: string): Promise<void>;
  close(): Promise<void>;
}

export interface DashboardHarnessOptions {
  /** More service settings (PUBLIC_URL is the harness's own origin). */
  env?: Record<string, string>;
  onEvents?: () => void;
  /** Defaults of every browser profile `newContext` makes. */
  context?: Parameters<Browser['newContext']>[0];
}

export async function dashboardHarness(opts: DashboardHarnessOptions = {}): Promise<DashboardHarness> {
  const port = await freePort();
  const origin = `https://localhost:${port}`;
  const h = await manageHarness({ env: { ...opts.env, PUBLIC_URL: origin }, onEvents: opts.onEvents });
  const tls = await makeSelfSignedCert();
  const server = https.createServer({ cert: tls.cert, key: tls.key }, h.app);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const owner = await newMember(h, h.site.id, 'owner@example.com', 'owner');
  const agent = await newMember(h, h.site.id, 'agent@example.com', 'agent');
  const browser = await launchChromium();
  const pageErrors: string[] = [];
  fs.mkdirSync(ARTIFACTS, { recursive: true });

  const newContext = async (options: Parameters<Browser['newContext']>[0] = {}) => {
    const ctx = await browser.newContext({ ignoreHTTPSErrors: true, ...opts.context, ...options });
    await ctx.addInitScript(() => {
      const w = window as unknown as { __violations: string[]; __modals: string[] };
      w.__violations = [];
      document.addEventListener('securitypolicyviolation', (e) => w.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
      // Every modal dialog opened, by its heading: one that opened and closed again between two looks still counts.
      w.__modals = [];
      const showModal = HTMLDialogElement.prototype.showModal;
      HTMLDialogElement.prototype.showModal = function (this: HTMLDialogElement) {
        w.__modals.push(this.querySelector('h2')?.textContent ?? '');
        return showModal.call(this);
      };
    });
    ctx.on('weberror', (e) => pageErrors.push(String(e.error())));
    return ctx;
  };

  const signIn = async (page: Page, email: string, password = PASSWORD) => {
    const form = page.getByRole('form', { name: 'Sign in' }).last();
    await form.getByLabel('Email').fill(email);
    await form.getByLabel('Password').fill(password);
    await form.getByRole('button', { name: 'Sign in' }).click();
  };

  return {
    h,
    origin,
    browser,
    site: h.site,
    owner: { id: owner.id, email: 'owner@example.com' },
    agent: { id: agent.id, email: 'agent@example.com' },
    pageErrors,
    newContext,
    signIn,
    async signedIn(who, pathBelow = '/', options) {
      const page = await (await newContext(options)).newPage();
      await page.goto(`${origin}/dashboard${pathBelow}`);
      await signIn(page, who.email);
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      return page;
    },
    async close() {
      await browser.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await h.close();
    },
  };
}

/** The CSP violations the page recorded since it loaded. */
export const violations = (page: Page): Promise<string[]> => page.evaluate(() => (window as unknown as { __violations: string[] }).__violations);

/** The headings of every modal dialog the page opened since it loaded (open or closed again since). */
export const modalsOpened = (page: Page): Promise<string[]> => page.evaluate(() => (window as unknown as { __modals: string[] }).__modals);

/**
 * What a person would see go wrong on a page without looking for it: console errors (a failed
 * fetch logs one in Chromium whatever the code does), requests that failed or answered 4xx/5xx, and
 * uncaught errors. Recorded from now on; read it before the page closes (closing aborts its stream).
 */
export function recordProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()} (${m.location().url})`));
  page.on('requestfailed', (r) => problems.push(`failed: ${r.method()} ${new URL(r.url()).pathname} ${r.failure()?.errorText ?? ''}`));
  page.on('response', (r) => r.status() >= 400 && problems.push(`${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`));
  page.on('pageerror', (e) => problems.push(`error: ${e.message}`));
  return problems;
}

/**
 * Proves the recorder hears a violation by causing one on purpose (an inline style attribute, which
 * the dashboard's CSP refuses): a "no violation" check means nothing until this passed.
 */
export async function provokeViolation(page: Page): Promise<string[]> {
  await page.evaluate(() => {
    const probe = document.createElement('div');
    probe.setAttribute('style', 'color: red');
    document.body.append(probe);
    probe.remove();
  });
  await page.waitForFunction(() => (window as unknown as { __violations: string[] }).__violations.length > 0);
  const seen = await violations(page);
  await page.evaluate(() => ((window as unknown as { __violations: string[] }).__violations = []));
  return seen;
}

/** axe-core's serious and critical findings on the page as it is (axe runs through DevTools, which the CSP does not govern). */
export async function seriousAxeFindings(page: Page): Promise<string[]> {
  await page.evaluate(axe.source);
  const found = await page.evaluate(async () => {
    const r = await (window as unknown as { axe: typeof axe }).axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')) }));
  });
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.join(', ')}`);
}

export const screenshot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

/** What every visited page must pass: no CSP violation, no serious or critical axe finding; then its screenshot when named. */
export async function checkPage(page: Page, name?: string) {
  expect(await violations(page)).toEqual([]);
  expect(await seriousAxeFindings(page)).toEqual([]);
  if (name) await screenshot(page, name);
}
