/**
 * The demo's mail sink: an SMTP server on 127.0.0.1 that keeps every email it is sent (in memory,
 * the newest 200), and a web page on another local port that lists them, so a person trying the
 * product sees the invitations, links and notices the service sends. Each email's plain-text
 * part is shown escaped, its web links made clickable; nothing of an email becomes markup.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';

export interface SinkEmail {
  receivedAt: Date;
  from: string;
  to: string[];
  subject: string;
  text: string;
}

export interface MailSink {
  smtpUrl: string;
  webUrl: string;
  emails: SinkEmail[];
  close(): Promise<void>;
}

const KEEP = 200;
const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Plain text as HTML: every character escaped, and each http(s) link a link (to a new tab, no referrer). */
export function textToHtml(text: string): string {
  return text
    .split(/(https?:\/\/[^\s<>"']+)/g)
    .map((part, i) => (i % 2 === 1 ? `<a href="${escapeHtml(part)}" target="_blank" rel="noreferrer noopener">${escapeHtml(part)}</a>` : escapeHtml(part)))
    .join('');
}

function page(emails: SinkEmail[]): string {
  const items = [...emails]
    .reverse()
    .map(
      (e) => `<article>
<h2>${escapeHtml(e.subject || '(no subject)')}</h2>
<p>To ${escapeHtml(e.to.join(', '))}, from ${escapeHtml(e.from)}, at ${escapeHtml(e.receivedAt.toISOString())}</p>
<pre>${textToHtml(e.text)}</pre>
</article>`,
    )
    .join('\n<hr>\n');
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Demo mail (${emails.length})</title></head>
<body>
<h1>Emails the chat service sent</h1>
<p>${emails.length ? 'Newest first. Reload to see new ones.' : 'None yet: invite someone, or ask for a new password from the sign-in page.'}</p>
${items}
</body>
</html>
`;
}

/** Starts the sink: SMTP on `smtpPort`, the page on `webPort` (0: any free port), both on 127.0.0.1. */
export async function startMailSink(opts: { smtpPort?: number; webPort?: number } = {}): Promise<MailSink> {
  const emails: SinkEmail[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    closeTimeout: 200,
    onData(stream, session, callback) {
      simpleParser(stream).then((mail) => {
        emails.push({
          receivedAt: new Date(),
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          subject: mail.subject ?? '',
          text: mail.text ?? '',
        });
        if (emails.length > KEEP) emails.splice(0, emails.length - KEEP);
        callback();
      }, callback);
    },
  });
  const web = http.createServer((req, res) => {
    if ((req.url ?? '/').split('?')[0] !== '/' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Not found: the emails are at /\n');
      return;
    }
    res.writeHead(200, {
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Security-Policy': "default-src 'none'; base-uri 'none'; form-action 'none'",
      'Cache-Control': 'no-store',
    });
    res.end(page(emails));
  });
  const listen = (
    server: { listen: (port: number, host: string, cb: () => void) => unknown; once: (e: 'error', cb: (err: Error) => void) => unknown },
    port: number,
  ) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  await listen(smtp.server, opts.smtpPort ?? 0);
  await listen(web, opts.webPort ?? 0);
  return {
    smtpUrl: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`,
    webUrl: `http://127.0.0.1:${(web.address() as AddressInfo).port}/`,
    emails,
    close: async () => {
      await new Promise<void>((resolve) => web.close(() => resolve()));
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    },
  };
}
