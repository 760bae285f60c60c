/**
 * A customer's shop beside the dashboard in the browser tests: a page on another origin that embeds
 * the chat window with the snippet, under a strict CSP allowing the service's origin for the loader
 * and the frame only (and the shop's own scripts), with the site's allowed origins set to it.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Frame, Page } from 'playwright-core';
import { freePort } from '../../helpers/spawn';
import { makeSelfSignedCert } from '../../../server/platform/tls';
import { allowOrigins } from '../../window/helpers';
import type { DashboardHarness } from './harness';

export interface Shop {
  origin: string;
  close(): Promise<void>;
}

/** What the shop answers, given the snippet that embeds the window: by default one page, "A shop". */
export type ShopHandler = (req: IncomingMessage, res: ServerResponse, shop: { origin: string; snippet: string }) => void | Promise<void>;

const onePage: ShopHandler = (_req, res, { snippet }) => {
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title>${snippet}</head><body><main><h1>A shop</h1></main></body></html>`);
};

export async function startShop(d: DashboardHarness, handler: ShopHandler = onePage): Promise<Shop> {
  const port = await freePort();
  const origin = `https://localhost:${port}`;
  await allowOrigins(d.h, d.site.id, [origin]);
  const tls = await makeSelfSignedCert();
  const snippet = `<script async src="${d.origin}/window/v1/loader.js" data-site="${d.site.id}"></script>`;
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    res.setHeader('Content-Security-Policy', `default-src 'none'; script-src 'self' ${d.origin}; frame-src ${d.origin}; base-uri 'none'; form-action 'none'`);
    void handler(req, res, { origin, snippet });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    origin,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The window's panel frame of the page, once its input is there. */
export async function panelOf(page: Page, siteId: string): Promise<Frame> {
  await page.locator('#chat-window-root iframe').waitFor({ state: 'attached' });
  for (let i = 0; i < 200; i++) {
    const f = page.frames().find((fr) => fr.url().endsWith(`/sites/${siteId}/panel`));
    if (f) {
      await f.locator('#cw-input').waitFor({ state: 'attached' });
      return f;
    }
    await page.waitForTimeout(50);
  }
  throw new Error('the panel frame did not appear');
}

/** CSP violations recorded in the page and every frame of it (the shop page and the window's panel). */
export async function allViolations(page: Page): Promise<string[]> {
  const all: string[] = [];
  for (const f of page.frames()) all.push(...(await f.evaluate(() => (window as unknown as { __violations?: string[] }).__violations ?? [])));
  return all;
}
