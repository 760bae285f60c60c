import fs from 'node:fs';
import path from 'node:path';
import type { Transporter } from 'nodemailer';
import type { Logger } from '../platform/logger';

/** One email as the relay gets it. */
export interface OutgoingEmail {
  id: string;
  from: string;
  to: string;
  /** Fixed per email, the same on every attempt, so a relay can drop a repeat. */
  messageId: string;
  subject: string;
  text: string;
  html: string;
  headers: Record<string, string>;
}

/** What one attempt came to: taken by the relay, or its reply code (null: no reply) and complaint. */
export interface MailResult {
  ok: boolean;
  responseCode: number | null;
  error: string | null;
}

export interface MailTransport {
  send(email: OutgoingEmail): Promise<MailResult>;
  close(): void;
  /** Where emails go, for log lines and the dashboard: `smtp://host:port` or the directory of files. */
  readonly destination: string;
}

export interface SmtpSettings {
  url: string;
  user?: string;
  password?: string;
}

/** Time-outs of the relay's connection: a hung relay fails an attempt instead of holding it for minutes. */
export const SMTP_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 };
/** Connections kept open to the relay at once (the pool). */
export const SMTP_CONNECTIONS = 4;

/**
 * Sends over SMTP with a pool of kept-alive connections. `smtps://` is TLS from the first byte;
 * `smtp://` upgrades with STARTTLS when the relay offers it. Credentials come from the URL or
 * SMTP_USER/SMTP_PASSWORD and never reach a log line.
 */
export function createSmtpTransport(smtp: SmtpSettings): MailTransport {
  const url = new URL(smtp.url);
  const secure = url.protocol === 'smtps:';
  const user = smtp.user ?? (url.username ? decodeURIComponent(url.username) : undefined);
  const pass = smtp.password ?? (url.password ? decodeURIComponent(url.password) : undefined);
  const transporter = lazily(() => ({
    pool: true,
    maxConnections: SMTP_CONNECTIONS,
    host: url.hostname,
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    auth: user ? { user, pass } : undefined,
    ...SMTP_TIMEOUTS,
  }));
  return {
    destination: `${url.protocol}//${url.host}`,
    async send(email) {
      try {
        await transporter.get().sendMail(messageOf(email));
        return { ok: true, responseCode: null, error: null };
      } catch (err) {
        const e = err as { message?: string; responseCode?: number; code?: string };
        return { ok: false, responseCode: typeof e.responseCode === 'number' ? e.responseCode : null, error: String(e.message ?? err).slice(0, 500) };
      }
    },
    close: () => transporter.close(),
  };
}

/**
 * Without SMTP_URL: each email is written as `<id>.eml` under `dir` (open it with any mail
 * program) and a log line names the file.
 */
export function createFileTransport(dir: string, logger: Pick<Logger, 'info'>): MailTransport {
  const transporter = lazily(() => ({ streamTransport: true, buffer: true, newline: 'unix' }));
  return {
    destination: dir,
    async send(email) {
      try {
        const info = await transporter.get().sendMail(messageOf(email));
        await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
        const file = path.join(dir, `${email.id}.eml`);
        await fs.promises.writeFile(file, info.message as Buffer, { mode: 0o600 });
        logger.info({ emailId: email.id, file }, 'email written to a file (no SMTP_URL set)');
        return { ok: true, responseCode: null, error: null };
      } catch (err) {
        return { ok: false, responseCode: null, error: String((err as Error).message).slice(0, 500) };
      }
    },
    close: () => transporter.close(),
  };
}

/**
 * A nodemailer transporter made on the first email: loading nodemailer took a tenth of a second of
 * every start, and most starts send no email before their first request.
 */
function lazily(options: () => object) {
  let made: Transporter | undefined;
  return {
    get(): Transporter {
      made ??= (require('nodemailer') as typeof import('nodemailer')).createTransport(options());
      return made;
    },
    close: () => made?.close(),
  };
}

function messageOf(email: OutgoingEmail) {
  return {
    from: email.from,
    to: email.to,
    messageId: email.messageId,
    subject: email.subject,
    text: email.text,
    html: email.html,
    headers: email.headers,
  };
}
