import path from 'node:path';
import type { Logger } from '../platform/logger';
import { decrypt } from '../platform/crypto';
import { MAIL_KINDS, type EventChannel } from '../delivery/channel';
import { createDeliveryEngine, type DeliveryProvider, type DeliveryWorker } from '../delivery/engine';
import type { MailSettings } from '../config';
import { type EmailAttemptRow, type EmailClaim, type MailStore } from './store';
import { createFileTransport, createSmtpTransport, SMTP_CONNECTIONS, SMTP_TIMEOUTS, type MailResult, type MailTransport } from './transport';
import { isTemplateName, renderEmail } from './templates';
import { MAIL_RETRY_DELAYS_MS, mailRetryPolicy } from './retry-schedule';

export interface MailWorkerOptions {
  store: MailStore;
  mail: MailSettings;
  dataDir: string;
  /** Opens the sealed values of queued emails (services.keys.mailValues). */
  sealKey: Buffer;
  logger: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;
  channel?: Pick<EventChannel, 'subscribe' | 'live'>;
  /** The relay or the directory of files, built from `mail` when not given. */
  transport?: MailTransport;
  /** Pauses between attempts (default DECISIONS.md's; tests shorten them). */
  retryDelaysMs?: readonly number[];
  pollMs?: number;
  leaseMs?: number;
  owner?: string;
}

/** Longest one attempt may take: the relay's connection, greeting and a reply under the socket time-out. */
const ATTEMPT_TIMEOUT_MS = SMTP_TIMEOUTS.connectionTimeout + SMTP_TIMEOUTS.greetingTimeout + SMTP_TIMEOUTS.socketTimeout;

/** Where emails go when no relay is set. */
export const mailDir = (dataDir: string) => path.join(dataDir, 'mail');

/** The transport MailSettings ask for: the relay, or .eml files under DATA_DIR/mail/. */
export function mailTransportFor(mail: MailSettings, dataDir: string, logger: Pick<Logger, 'info'>): MailTransport {
  return mail.smtpUrl
    ? createSmtpTransport({ url: mail.smtpUrl, user: mail.smtpUser, password: mail.smtpPassword })
    : createFileTransport(mailDir(dataDir), logger);
}

/**
 * The mail worker: the delivery engine (../delivery/engine.ts) with email's provider. One attempt
 * renders the email's template from its sealed values and hands it to the relay (or writes it to a
 * file); the retry schedule is retry-schedule.ts's over the SMTP reply.
 */
export function createMailWorker(opts: MailWorkerOptions): DeliveryWorker {
  const { store, logger } = opts;
  const transport = opts.transport ?? mailTransportFor(opts.mail, opts.dataDir, logger);
  const provider: DeliveryProvider<EmailClaim, MailResult, EmailAttemptRow> = {
    label: 'email delivery',
    kinds: MAIL_KINDS,
    schedule: mailRetryPolicy(opts.retryDelaysMs ?? MAIL_RETRY_DELAYS_MS),
    claimDue: (req) => store.claimDue(req),
    finishAttempts: (owner, outcomes) => store.finishAttempts(owner, outcomes),
    logInterrupted: (c) => store.logInterrupted(c.key),
    // Its values are gone (the email ended elsewhere, or a visitor's data was deleted): nothing to send.
    unsentReason: ({ email }) =>
      email.values_sealed === null ? 'not sent: its content was removed' : !isTemplateName(email.template) ? 'not sent: unknown template' : null,
    async send({ email }) {
      let result: MailResult;
      try {
        const values = JSON.parse(decrypt(opts.sealKey, email.values_sealed!)) as Record<string, string>;
        const rendered = renderEmail(email.template as Parameters<typeof renderEmail>[0], values);
        const headers: Record<string, string> = {};
        if (rendered.unsubscribeUrl) {
          headers['List-Unsubscribe'] = `<${rendered.unsubscribeUrl}>`;
          headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
        }
        result = await transport.send({
          id: email.id,
          from: opts.mail.from,
          to: email.recipient,
          messageId: email.message_id,
          subject: rendered.subject,
          text: rendered.text,
          html: rendered.html,
          headers,
        });
      } catch (err) {
        result = { ok: false, responseCode: null, error: String((err as Error).message).slice(0, 500) };
      }
      return {
        result,
        row: () => ({ error: result.ok ? null : result.error }),
        // The template and the recipient's domain only: an address is personal data.
        summary: {
          emailId: email.id,
          template: email.template,
          domain: email.recipient.split('@').pop(),
          responseCode: result.responseCode,
          error: result.error,
        },
      };
    },
    close: () => {
      if (!opts.transport) transport.close();
    },
  };
  const leaseMs = opts.leaseMs ?? ATTEMPT_TIMEOUT_MS + 10_000;
  return createDeliveryEngine({
    provider,
    logger,
    concurrency: SMTP_CONNECTIONS,
    perAddress: SMTP_CONNECTIONS,
    attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
    leaseMs,
    pollMs: opts.pollMs ?? 1000,
    channel: opts.channel,
    owner: opts.owner,
  });
}
