/**
 * The chat window's browser side as served (no browser needed): caching of the loader and of the
 * versioned assets, the panel document's CSP and framing rule, and the markdown parser's tree.
 */
import request from 'supertest';
import { createHarness, Harness } from '../helpers/harness';
import { allowOrigins } from '../window/helpers';
import { windowAssets } from '../../server/widget/assets';
import { parseInline, parseMarkdown, safeHref } from '../../server/widget/browser/markdown';
import { sizes } from '../../scripts/build-window';

describe('chat window assets', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
    await allowOrigins(h, h.site.id, ['https://shop.example', 'http://localhost:5173']);
  });
  afterAll(async () => {
    await h?.close();
  });

  test('the loader: JavaScript, cached 5 minutes, loadable by other sites, a few KB', async () => {
    const res = await request(h.app).get('/window/v1/loader.js').expect(200);
    expect(res.headers['content-type']).toBe('application/javascript; charset=utf-8');
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    expect(res.headers['cross-origin-resource-policy']).toBe('cross-origin');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const s = sizes(await windowAssets());
    expect(s['loader.js'].gzip).toBeLessThan(4 * 1024);
    expect(s['panel.js'].gzip + s['panel.css'].gzip).toBeLessThan(12 * 1024);
  });

  test('the panel document: no inline code, CSP of its own origin, framed only by allowed origins', async () => {
    const res = await request(h.app).get(`/window/v1/sites/${h.site.id}/panel`).expect(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['x-frame-options']).toBeUndefined();
    expect(res.headers['content-security-policy']).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors http://localhost:5173 https://shop.example",
    );
    expect(res.text).not.toMatch(/<script>|<style|\sstyle=|\son[a-z]+=/i);
    const { version } = await windowAssets();
    expect(res.text).toContain(`/window/v1/assets/${version}/panel.js`);

    // A site without allowed origins (or none at all): nobody may frame it.
    const other = await h.newSite('No window');
    const closed = await request(h.app).get(`/window/v1/sites/${other.id}/panel`).expect(200);
    expect(closed.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    const bad = await request(h.app).get('/window/v1/sites/not-a-site/panel').expect(404);
    expect(bad.body.error.code).toBe('not_found');
  });

  test('versioned assets are immutable for a year; another version is 404 in the envelope', async () => {
    const { version } = await windowAssets();
    const js = await request(h.app).get(`/window/v1/assets/${version}/panel.js`).expect(200);
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const css = await request(h.app).get(`/window/v1/assets/${version}/panel.css`).expect(200);
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(css.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const stale = await request(h.app).get('/window/v1/assets/0000000000000000/panel.js').expect(404);
    expect(stale.body.error.code).toBe('not_found');
    expect(stale.headers['cache-control']).toBe('no-store');
  });

  test('markdown: allow-listed nodes only; raw HTML stays text; only http(s) and mailto links', () => {
    expect(parseMarkdown('<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>')).toEqual([
      { type: 'paragraph', children: [{ type: 'text', value: '<script>alert(1)</script>' }] },
      { type: 'paragraph', children: [{ type: 'text', value: '<img src=x onerror=alert(1)>' }] },
    ]);
    expect(parseInline('[x](javascript:alert(1))')).toEqual([{ type: 'text', value: 'x' }, { type: 'text', value: ')' }]);
    expect(parseInline('**a** [b](https://e.example/p?q=1) `c`')).toEqual([
      { type: 'strong', children: [{ type: 'text', value: 'a' }] },
      { type: 'text', value: ' ' },
      { type: 'link', href: 'https://e.example/p?q=1', children: [{ type: 'text', value: 'b' }] },
      { type: 'text', value: ' ' },
      { type: 'code', value: 'c' },
    ]);
    for (const bad of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'java\tscript:alert(1)', ' javascript:x', 'data:text/html,x', 'vbscript:x', '/relative', '//evil.example', 'file:///etc/passwd']) {
      expect(safeHref(bad)).toBeNull();
    }
    expect(safeHref('mailto:help@shop.example')).toBe('mailto:help@shop.example');
    expect(parseMarkdown('- one\n- two\n\n1. first\n\n> quoted\n\n```\n<b>code</b>\n```').map((b) => b.type)).toEqual(['list', 'list', 'quote', 'code_block']);
  });
});
