/**
 * The chat window's browser side as served (no browser needed): caching of the loader and of the
 * versioned assets, their precompressed variants, the panel document's CSP and framing rule, and
 * the markdown parser's tree.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import request from 'supertest';
import { createHarness, Harness } from '../helpers/harness';
import { allowOrigins } from '../window/helpers';
import { windowAssets } from '../../server/window/assets';
import { chooseCoding } from '../../server/http/static-assets';
import { parseInline, parseMarkdown, safeHref } from '../../server/window/browser/markdown';

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
    const coded = (name: string, coding: 'br' | 'gzip') => windowAssets().files.get(name)!.coded[coding]!.body.length;
    expect(coded('loader.js', 'gzip')).toBeLessThan(4 * 1024);
    expect(coded('panel.js', 'gzip') + coded('panel.css', 'gzip')).toBeLessThan(12 * 1024);
    for (const name of ['loader.js', 'panel.js', 'panel.css']) expect(coded(name, 'br')).toBeLessThan(coded(name, 'gzip'));
  });

  test('the panel document: no inline code, CSP of its own origin, framed only by allowed origins', async () => {
    const res = await request(h.app).get(`/window/v1/sites/${h.site.id}/panel`).expect(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['x-frame-options']).toBeUndefined();
    expect(res.headers['content-security-policy']).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors http://localhost:5173 https://shop.example",
    );
    expect(res.text).not.toMatch(/<script>|<style|\sstyle=|\son[a-z]+=/i);
    const { version } = windowAssets();
    expect(res.text).toContain(`/window/v1/assets/${version}/panel.js`);

    // A site without allowed origins (or none at all): nobody may frame it.
    const other = await h.newSite('No window');
    const closed = await request(h.app).get(`/window/v1/sites/${other.id}/panel`).expect(200);
    expect(closed.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    const bad = await request(h.app).get('/window/v1/sites/not-a-site/panel').expect(404);
    expect(bad.body.error.code).toBe('not_found');
  });

  test('versioned assets are immutable for a year; another version is 404 in the envelope', async () => {
    const { version } = windowAssets();
    const js = await request(h.app).get(`/window/v1/assets/${version}/panel.js`).expect(200);
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const css = await request(h.app).get(`/window/v1/assets/${version}/panel.css`).expect(200);
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(css.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const stale = await request(h.app).get('/window/v1/assets/0000000000000000/panel.js').expect(404);
    expect(stale.body.error.code).toBe('not_found');
    expect(stale.headers['cache-control']).toBe('no-store');
  });

  /** A raw GET (no client-side decoding), so the bytes and headers on the wire are what is checked. */
  const raw = (path: string, headers: Record<string, string> = {}, method = 'GET') =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const server = http.createServer(h.app).listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        const req = http.request({ host: '127.0.0.1', port, path, method, headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => server.close(() => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) })));
        });
        req.on('error', reject);
        req.end();
      });
    });

  test('loader and panel files: the best precompressed variant the client accepts, each with its length and ETag', async () => {
    const { version } = windowAssets();
    for (const path of ['/window/v1/loader.js', `/window/v1/assets/${version}/panel.js`, `/window/v1/assets/${version}/panel.css`]) {
      const plain = await raw(path);
      expect(plain.status).toBe(200);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(plain.headers.vary).toBe('Accept-Encoding');
      expect(Number(plain.headers['content-length'])).toBe(plain.body.length);

      const br = await raw(path, { 'Accept-Encoding': 'gzip, deflate, br, zstd' });
      expect(br.headers['content-encoding']).toBe('br');
      expect(br.headers.vary).toBe('Accept-Encoding');
      expect(Number(br.headers['content-length'])).toBe(br.body.length);
      expect(br.body.length).toBeLessThan(plain.body.length / 2);
      expect(brotliDecompressSync(br.body).equals(plain.body)).toBe(true);

      const gz = await raw(path, { 'Accept-Encoding': 'gzip' });
      expect(gz.headers['content-encoding']).toBe('gzip');
      expect(Number(gz.headers['content-length'])).toBe(gz.body.length);
      expect(gunzipSync(gz.body).equals(plain.body)).toBe(true);

      // Every variant has its own ETag; revalidating one answers 304 with no body, another's tag does not match.
      expect(new Set([plain.headers.etag, br.headers.etag, gz.headers.etag]).size).toBe(3);
      const again = await raw(path, { 'Accept-Encoding': 'br', 'If-None-Match': br.headers.etag! });
      expect(again.status).toBe(304);
      expect(again.body.length).toBe(0);
      expect(again.headers.etag).toBe(br.headers.etag);
      expect(again.headers.vary).toBe('Accept-Encoding');
      expect((await raw(path, { 'Accept-Encoding': 'gzip', 'If-None-Match': br.headers.etag! })).status).toBe(200);

      const head = await raw(path, { 'Accept-Encoding': 'br' }, 'HEAD');
      expect(head.headers['content-length']).toBe(br.headers['content-length']);
      expect(head.body.length).toBe(0);
    }
    // q-values: a refused coding is never sent; the client's weights decide before size does.
    expect((await raw('/window/v1/loader.js', { 'Accept-Encoding': 'br;q=0, gzip' })).headers['content-encoding']).toBe('gzip');
    expect((await raw('/window/v1/loader.js', { 'Accept-Encoding': 'gzip;q=1, br;q=0.5' })).headers['content-encoding']).toBe('gzip');
    expect((await raw('/window/v1/loader.js', { 'Accept-Encoding': 'identity;q=1, br;q=0.1' })).headers['content-encoding']).toBeUndefined();
  });

  test('choosing a coding (RFC 9110, 12.5.3): weights, q=0, *, identity', () => {
    const both = ['br', 'gzip'] as const;
    expect(chooseCoding(undefined, both)).toBe('identity');
    expect(chooseCoding('', both)).toBe('identity');
    expect(chooseCoding('gzip, deflate, br', both)).toBe('br'); // equal weights: the smaller
    expect(chooseCoding('GZIP, BR', both)).toBe('br');
    expect(chooseCoding('br;q=0, gzip', both)).toBe('gzip');
    expect(chooseCoding('br;q=0.5, gzip;q=0.8', both)).toBe('gzip');
    expect(chooseCoding('br ; q=0.9 , gzip ; q=0.8', both)).toBe('br');
    expect(chooseCoding('x-gzip', both)).toBe('gzip');
    expect(chooseCoding('deflate, zstd', both)).toBe('identity');
    expect(chooseCoding('*', both)).toBe('br');
    expect(chooseCoding('*;q=0', both)).toBe('identity'); // nothing acceptable: sent as is
    expect(chooseCoding('br;q=0, *;q=0.3', both)).toBe('gzip');
    expect(chooseCoding('identity, gzip;q=0.5', both)).toBe('identity');
    expect(chooseCoding('gzip', ['br'])).toBe('identity'); // only what exists
    expect(chooseCoding('br;q=2, gzip', both)).toBe('gzip'); // a malformed weight: that member is ignored
    expect(chooseCoding('br;q=0.0001, gzip;q=0.001', both)).toBe('gzip');
  });

  test('markdown: allow-listed nodes only; raw HTML stays text; only http(s) and mailto links', () => {
    expect(parseMarkdown('<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>')).toEqual([
      { type: 'paragraph', children: [{ type: 'text', value: '<script>alert(1)</script>' }] },
      { type: 'paragraph', children: [{ type: 'text', value: '<img src=x onerror=alert(1)>' }] },
    ]);
    expect(parseInline('[x](javascript:alert(1))')).toEqual([
      { type: 'text', value: 'x' },
      { type: 'text', value: ')' },
    ]);
    expect(parseInline('**a** [b](https://e.example/p?q=1) `c`')).toEqual([
      { type: 'strong', children: [{ type: 'text', value: 'a' }] },
      { type: 'text', value: ' ' },
      { type: 'link', href: 'https://e.example/p?q=1', children: [{ type: 'text', value: 'b' }] },
      { type: 'text', value: ' ' },
      { type: 'code', value: 'c' },
    ]);
    for (const bad of [
      'javascript:alert(1)',
      'JaVaScRiPt:alert(1)',
      'java\tscript:alert(1)',
      ' javascript:x',
      'data:text/html,x',
      'vbscript:x',
      '/relative',
      '//evil.example',
      'file:///etc/passwd',
    ]) {
      expect(safeHref(bad)).toBeNull();
    }
    expect(safeHref('mailto:help@shop.example')).toBe('mailto:help@shop.example');
    expect(parseMarkdown('- one\n- two\n\n1. first\n\n> quoted\n\n```\n<b>code</b>\n```').map((b) => b.type)).toEqual(['list', 'list', 'quote', 'code_block']);
  });
});
