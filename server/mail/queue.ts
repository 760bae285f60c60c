import type { Knex } from 'knex';
import { afterCommit } from '../db/transaction';
import { encrypt } from '../platform/crypto';
import { newId } from '../platform/ids';
import type { EventChannel, MailNotice } from '../delivery/channel';
import { insertEmail } from './store';
import { pendingState } from '../delivery/rows';
import type { TemplateName } from './templates';

export interface QueuedEmail {
  /** The site whose mail log lists it; null for an account's own email (a password reset). */
  siteId: string | null;
  to: string;
  template: TemplateName;
  /** The template's values: kept sealed until the email is sent (a link in them may open an account). */
  values: Record<string, string>;
}

/**
 * The one way a change sends an email: `enqueue` inside the change's transaction (opened by
 * runInTransaction), so the email exists if and only if the change commits; after the commit the
 * channel wakes the mail workers, here and (with Redis) in other processes. The Message-ID is fixed
 * here, once, so every attempt carries the same one.
 */
export function createMailQueue(opts: { channel: Pick<EventChannel, 'publish'>; sealKey: Buffer; publicUrl: string }) {
  const host = new URL(opts.publicUrl).hostname;
  const written = new WeakMap<Knex.Transaction, MailNotice[]>();
  return {
    async enqueue(trx: Knex.Transaction, email: QueuedEmail, now: number): Promise<string> {
      const id = newId('eml', now);
      await insertEmail(trx, {
        id,
        site_id: email.siteId,
        recipient: email.to,
        template: email.template,
        values_sealed: encrypt(opts.sealKey, JSON.stringify(email.values)),
        message_id: `<${id}@${host}>`,
        last_error: null,
        created_at: now,
        ...pendingState(now),
      });
      let notices = written.get(trx);
      if (!notices) {
        const mine: MailNotice[] = (notices = []);
        afterCommit(trx, () => opts.channel.publish(mine));
        written.set(trx, mine);
      }
      notices.push({ kind: 'mail', id });
      return id;
    },
  };
}

export type MailQueue = ReturnType<typeof createMailQueue>;
