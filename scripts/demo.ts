/**
 * `npm run demo`: the chat window on a shop page of its own origin, for a first look.
 *
 * 1. Makes (or reuses) the site "Demo shop", lets http://localhost:5173 embed its window, and
 *    prints a fresh API key with every right (for Swagger UI or the SDK).
 * 2. Starts the service (server/main.ts, HTTPS on PORT, 8443 by default) unless --page-only
 *    (use that when `npm start` already runs).
 * 3. Serves the shop page at http://localhost:5173 (DEMO_PORT) with a strict CSP: the snippet,
 *    nothing inline.
 * 4. Unless SMTP_URL is set, starts a local mail sink (scripts/lib/mail-sink.ts: SMTP on
 *    DEMO_SMTP_PORT, 1025 by default) that the service sends to, and prints the page that lists
 *    every email (DEMO_MAIL_PORT, 1080 by default): invitations, links, notices.
 *
 * Then: open the shop page, chat as a visitor, and answer from https://localhost:8443/docs/
 * (Authorize with the key, POST /conversations/{id}/messages).
 */
import http from 'node:http';
import path from 'node:path';
import { spawn, ChildProcess } from 'node:child_process';
import { loadConfig } from '../server/config';
import { openRuntime } from '../server/runtime';
import type { Scope } from '../server/access/scopes';
import { startMailSink, MailSink } from './lib/mail-sink';

const DEMO_PORT = Number(process.env.DEMO_PORT || 5173);
const DEMO_ORIGIN = `http://localhost:${DEMO_PORT}`;
const SITE_NAME = 'Demo shop';
const ALL_SCOPES: Scope[] = ['conversations:read', 'conversations:write', 'media:read'];

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function prepareSite(): Promise<{ siteId: string; key: string; apiUrl: string; windowUrl: string }> {
  const config = loadConfig();
  const runtime = await openRuntime(config);
  try {
    const { access } = runtime.services;
    const existing = (await access.listSites()).find((s) => s.name === SITE_NAME);
    const siteId = existing?.id ?? (await access.createSite(SITE_NAME)).id;
    const origins = new Set(existing?.allowedOrigins ?? []);
    origins.add(DEMO_ORIGIN);
    await access.setAllowedOrigins(siteId, [...origins]);
    // Keys are shown once only, so each run makes one (labelled, revocable with the CLI).
    const key = await access.createKey(siteId, ALL_SCOPES, 'demo page');
    // The loader comes from the window's own origin when it has one (WINDOW_PUBLIC_URL); Swagger UI never does.
    return { siteId, key: key.key, apiUrl: config.publicUrl, windowUrl: config.windowPublicUrl ?? config.publicUrl };
  } finally {
    await runtime.close();
  }
}

function page(siteId: string, urls: { apiUrl: string; windowUrl: string }, key: string): string {
  const docs = `${urls.apiUrl}/docs/`;
  const loader = `${urls.windowUrl}/window/v1/loader.js`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Demo shop</title>
<script async src="${escapeHtml(loader)}" data-site="${escapeHtml(siteId)}"></script>
</head>
<body>
<main>
<h1>Demo shop</h1>
<p>This page is another origin (${escapeHtml(DEMO_ORIGIN)}) with a strict Content-Security-Policy
(<code>script-src</code> and <code>frame-src</code> allow the chat service only, nothing inline). The chat
launcher is at the bottom right.</p>
<ol>
<li>If the launcher does not appear, open <a href="${escapeHtml(loader)}">${escapeHtml(loader)}</a>
once and accept the development certificate, then reload this page.</li>
<li>Open the chat and write something, as a visitor would. Attach a file if you like.</li>
<li>Answer from <a href="${escapeHtml(docs)}">Swagger UI</a>: <em>Authorize</em> with the key
<code>${escapeHtml(key)}</code>, run <code>GET /conversations</code>, then
<code>POST /conversations/{id}/messages</code> with <code>{"content": "Hello **from the API**", "format": "markdown"}</code>.
The reply appears in the window at once. <code>POST /conversations/{id}/close</code> closes it.</li>
<li>Reload this page and open the chat again: the conversation is still there.</li>
</ol>
</main>
</body>
</html>
`;
}

async function main() {
  const pageOnly = process.argv.includes('--page-only');
  const { siteId, key, apiUrl, windowUrl } = await prepareSite();
  const serviceOrigin = new URL(windowUrl).origin;
  const csp = `default-src 'none'; script-src ${serviceOrigin}; frame-src ${serviceOrigin}; base-uri 'none'; form-action 'none'`;
  const html = page(siteId, { apiUrl, windowUrl }, key);

  // The service sends its emails to the sink, unless it was given a relay of its own.
  let sink: MailSink | undefined;
  if (!pageOnly && !process.env.SMTP_URL) {
    sink = await startMailSink({ smtpPort: Number(process.env.DEMO_SMTP_PORT || 1025), webPort: Number(process.env.DEMO_MAIL_PORT || 1080) });
  }

  let service: ChildProcess | undefined;
  if (!pageOnly) {
    const env = sink ? { ...process.env, SMTP_URL: sink.smtpUrl } : process.env;
    service = spawn(process.execPath, ['--import', 'tsx', path.resolve(__dirname, '../server/main.ts')], { stdio: 'inherit', env });
    service.on('exit', (code) => {
      console.error(`the chat service stopped (${code ?? 'signal'}); the demo stops too`);
      process.exit(code ?? 1);
    });
  }

  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    if ((req.url ?? '/').split('?')[0] !== '/') {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Not found: the demo is at /\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': csp, 'Cache-Control': 'no-store' });
    res.end(html);
  });
  server.listen(DEMO_PORT, 'localhost', () => {
    process.stdout.write(
      `\nDemo shop: ${DEMO_ORIGIN}/  (site ${siteId})\nAPI key for Swagger UI (${apiUrl}/docs/): ${key}\n` +
        `${sink ? `Emails the service sends: ${sink.webUrl}\n` : ''}` +
        `${pageOnly ? '' : 'The chat service starts beside it (Ctrl-C stops both).\n'}\n`,
    );
  });

  const stop = () => {
    server.close();
    void sink?.close();
    if (service && service.exitCode === null) {
      service.removeAllListeners('exit');
      service.once('exit', () => process.exit(0));
      service.kill('SIGTERM');
    } else process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
