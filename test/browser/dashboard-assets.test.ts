/**
 * The dashboard's files as built and served (no browser needed): the first load's size budget and
 * the docs' figures of it held to what the build measures, content-hashed names cached immutable,
 * the shell's CSP at every client route, and 404 in the envelope for an unknown asset.
 */
import fs from 'node:fs';
import request from 'supertest';
import { gzipSync } from 'node:zlib';
import { createHarness, Harness } from '../helpers/harness';
import { DASHBOARD_CSP, loadDashboardAssets } from '../../server/dashboard/routes';
import { shellHtml } from '../../server/dashboard/shell';
import { DOCS, figuresOf, FIRST_LOAD_BUDGET_GZIP, measureFirstLoad, statedFirstLoad, withFirstLoad } from '../../scripts/build-dashboard';

describe('dashboard assets', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  test('the shell: HTML with the strict CSP at /dashboard/ and at any client route, naming the entry module, its preloads and the stylesheet', async () => {
    const { manifest } = loadDashboardAssets();
    for (const path of ['/dashboard/', '/dashboard', '/dashboard/sites/ws_01m8b0a7dx1sfc8d00mvh5mkrs/keys', '/dashboard/accept-invitation']) {
      const res = await request(h.app).get(path).expect(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['content-security-policy']).toBe(DASHBOARD_CSP);
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(res.text).toContain(`<script type="module" src="/dashboard/assets/${manifest.script}"></script>`);
      for (const name of manifest.preload) expect(res.text).toContain(`<link rel="modulepreload" href="/dashboard/assets/${name}">`);
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
    const scripts = Object.keys(manifest.files).filter((name) => name.endsWith('.js'));
    // The entry, what it preloads, and the pages loaded later: more than the first load's files.
    expect(scripts.length).toBeGreaterThan(1 + manifest.preload.length);
    for (const name of scripts) expect(name).toMatch(/^[A-Z0-9]{8}\.js$/);
    expect(manifest.style).toMatch(/^[0-9a-f]{20}\.css$/);
    for (const [name, type] of [...scripts.map((name) => [name, 'application/javascript; charset=utf-8']), [manifest.style, 'text/css; charset=utf-8']]) {
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

  test('the first load (the shell, the entry and the inbox modules it preloads, the stylesheet, gzip) stays under 60 KB', async () => {
    const { manifest, files } = loadDashboardAssets();
    const shell = await request(h.app).get('/dashboard/').expect(200);
    const firstScripts = [manifest.script, ...manifest.preload];
    const total =
      gzipSync(Buffer.from(shell.text)).length +
      firstScripts.reduce((n, name) => n + files.get(name)!.coded.gzip!.body.length, 0) +
      files.get(manifest.style)!.coded.gzip!.body.length;
    expect(FIRST_LOAD_BUDGET_GZIP).toBe(60 * 1024);
    expect(total).toBeLessThan(FIRST_LOAD_BUDGET_GZIP);
    // Every file the shell names is one of those measured: nothing else loads first (the empty
    // `data:` icon is no request; it keeps the browser from asking for /favicon.ico).
    const named = [...shell.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]).filter((url) => url !== 'data:,');
    expect(named.sort()).toEqual([...firstScripts, manifest.style].map((name) => `/dashboard/assets/${name}`).sort());
    // What the entry imports statically is all preloaded: the browser asks for no module the measure missed.
    for (const name of firstScripts) {
      const code = files.get(name)!.identity.body.toString();
      const staticImports = [...code.matchAll(/(?:^|[;}])import(?:[^'"();]*?from)?\s*"\.\/([A-Z0-9]{8}\.js)"/g)].map((m) => m[1]);
      for (const imported of staticImports) expect({ imported, preloaded: firstScripts.includes(imported) }).toEqual({ imported, preloaded: true });
    }
    process.stdout.write(`dashboard first load: ${total} B gzip of ${FIRST_LOAD_BUDGET_GZIP}\n`);
  });

  /**
   * A figure of docs/dashboard.md passes within 3 % of the build's (or 0.2 KB, for the HTML and
   * the stylesheet, where rounding to 0.1 KB alone is half of that): each change to the dashboard
   * moves the script by tens or hundreds of bytes, and the docs need not be rewritten for each
   * (nor two branches collide on the line), while a reader is never misled by more than a few
   * percent. The drift this replaced (16 KB stated, 46.6 KB served) was 190 %.
   */
  const within = (stated: number, measured: number) => Math.abs(stated - measured) <= Math.max(0.03 * measured, 0.2 * 1024);

  test('the build records the first load it built, and docs/dashboard.md states it within 3 %', async () => {
    const { manifest, files } = loadDashboardAssets();
    const shell = await request(h.app).get('/dashboard/').expect(200);
    expect(shell.text).toBe(shellHtml(manifest));
    const measured = measureFirstLoad(
      shell.text,
      [manifest.script, ...manifest.preload].map((name) => files.get(name)!.identity.body),
      files.get(manifest.style)!.identity.body,
    );
    expect(manifest.firstLoad).toEqual(measured);
    const stated = statedFirstLoad(fs.readFileSync(DOCS, 'utf8'));
    const figures = figuresOf(measured);
    expect(stated).toHaveLength(figures.length);
    const off = figures.flatMap((m, i) => (within(stated[i], m) ? [] : [`figure ${i + 1}: the docs say ${stated[i]} B, the build measures ${m} B`]));
    expect({ off, fix: off.length ? 'run `npx tsx scripts/build-dashboard.ts --docs` and commit docs/dashboard.md' : '' }).toEqual({ off: [], fix: '' });
  });

  test('the docs check fails on a figure that drifted, and the writer puts back what was measured', () => {
    const { manifest } = loadDashboardAssets();
    const docs = withFirstLoad(fs.readFileSync(DOCS, 'utf8'), manifest.firstLoad);
    const written = statedFirstLoad(docs);
    expect(written.every((s, i) => within(s, figuresOf(manifest.firstLoad)[i]))).toBe(true);
    // The old docs' figure (16 KB for 46.6 KB), and one just past the margin, are caught.
    const total = manifest.firstLoad.total.br;
    expect(within(16 * 1024, total)).toBe(false);
    expect(within(Math.round(total * 1.04), total)).toBe(false);
    expect(within(Math.round(total * 1.02), total)).toBe(true);
  });
});
