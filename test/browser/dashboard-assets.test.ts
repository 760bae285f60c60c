/**
 * The dashboard's files as built and served (no browser needed): the first load's size budget,
 * content-hashed names cached immutable, the shell's CSP at every client route, and 404 in the
 * envelope for an unknown asset.
 */
import request from 'supertest';
import { gzipSync } from 'node:zlib';
import { createHarness, Harness } from '../helpers/harness';
import { DASHBOARD_CSP, loadDashboardAssets } from '../../server/dashboard/routes';
import { FIRST_LOAD_BUDGET_GZIP } from '../../scripts/build-dashboard';

describe('dashboard assets', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  test('the shell: HTML with the strict CSP at /dashboard/ and at any client route, naming two hashed files', async () => {
    const { manifest } = loadDashboardAssets();
    for (const path of ['/dashboard/', '/dashboard', '/dashboard/sites/ws_01m8b0a7dx1sfc8d00mvh5mkrs/keys', '/dashboard/accept-invitation']) {
      const res = await request(h.app).get(path).expect(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['content-security-policy']).toBe(DASHBOARD_CSP);
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(res.text).toContain(`<script src="/dashboard/assets/${manifest.script}" defer></script>`);
      expect(res.text).toContain(`<link rel="stylesheet" href="/dashboard/assets/${manifest.style}">`);
      expect(res.text).not.toMatch(/<script>|<style|\sstyle=|\son[a-z]+=/i);
    }
    expect(DASHBOARD_CSP).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data: blob:; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    );
    // Not a page: other methods are not answered with the shell.
    expect((await request(h.app).post('/dashboard/').send({})).status).toBe(404);
  });

  test('the assets are named by their content hash and immutable for a year, precompressed', async () => {
    const { manifest } = loadDashboardAssets();
    expect(manifest.script).toMatch(/^[0-9a-f]{20}\.js$/);
    expect(manifest.style).toMatch(/^[0-9a-f]{20}\.css$/);
    for (const [name, type] of [
      [manifest.script, 'application/javascript; charset=utf-8'],
      [manifest.style, 'text/css; charset=utf-8'],
    ]) {
      const res = await request(h.app).get(`/dashboard/assets/${name}`).set('Accept-Encoding', 'gzip').expect(200);
      expect(res.headers['content-type']).toBe(type);
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(res.headers['content-encoding']).toBe('gzip');
      expect(res.headers['cross-origin-resource-policy']).toBe('same-origin');
      expect(res.headers.vary).toBe('Accept-Encoding');
      const again = await request(h.app).get(`/dashboard/assets/${name}`).set('Accept-Encoding', 'gzip').set('If-None-Match', res.headers.etag).expect(304);
      expect(again.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    }
  });

  test('an unknown asset is 404 in the envelope, never the shell', async () => {
    for (const path of [
      '/dashboard/assets/x.js',
      '/dashboard/assets/0000000000000000000a.js',
      '/dashboard/assets/a/b.css',
      '/dashboard/assets/manifest.json',
    ]) {
      const res = await request(h.app).get(path).expect(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body.error.code).toBe('not_found');
      expect(res.headers['cache-control']).toBe('no-store');
    }
  });

  test('the first load (the shell, its script and its stylesheet, gzip) stays under 60 KB', async () => {
    const { manifest, files } = loadDashboardAssets();
    const shell = await request(h.app).get('/dashboard/').expect(200);
    const total =
      gzipSync(Buffer.from(shell.text)).length + files.get(manifest.script)!.coded.gzip!.body.length + files.get(manifest.style)!.coded.gzip!.body.length;
    expect(FIRST_LOAD_BUDGET_GZIP).toBe(60 * 1024);
    expect(total).toBeLessThan(FIRST_LOAD_BUDGET_GZIP);
    // Every file the shell names is one of the two measured: nothing else loads first (the empty
    // `data:` icon is no request; it keeps the browser from asking for /favicon.ico).
    const named = [...shell.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]).filter((url) => url !== 'data:,');
    expect(named.sort()).toEqual([`/dashboard/assets/${manifest.script}`, `/dashboard/assets/${manifest.style}`].sort());
    process.stdout.write(`dashboard first load: ${total} B gzip of ${FIRST_LOAD_BUDGET_GZIP}\n`);
  });
});
