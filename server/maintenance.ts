import fs from 'node:fs';
import path from 'node:path';
import type { Services } from './services';
import type { Logger } from './platform/logger';
import { removeExpiredMedia } from './media/retention';
import { listOlderThan } from './media/blob-store';
import { ApiError } from './platform/errors';
import { VISITOR_CREDENTIAL_TTL_SECONDS } from './window/tokens';
import { removeExpiredDeliveryLog } from './webhooks/retention';
import { MAIL_LOG_RETENTION_MS } from './mail/log';

const HOUR = 3600_000;

/**
 * Housekeeping that keeps storage bounded after crashes and over time:
 *  - Idempotency-Key records older than 24 hours are forgotten;
 *  - upload spool files (DATA_DIR/tmp) older than an hour are removed (a process killed mid-upload
 *    leaves them behind);
 *  - media older than MEDIA_RETENTION_DAYS (0: kept) is removed, file and row (media/retention.ts);
 *  - media files with no attachment row, older than an hour, are removed from the media store (a
 *    process killed between storing a file and committing its message, or a store that failed when
 *    a file was discarded, leaves them behind);
 *  - per-visitor window revocations are forgotten once every credential they void has expired
 *    (the credential's 180 days, plus a day for clocks; sessions are capped far below that);
 *  - the delivery log keeps 30 days: older attempt rows, finished deliveries and the events nobody
 *    can redeliver any more are removed (webhooks/retention.ts; `npm run worker` runs it too);
 *  - the mail log keeps 30 days: emails that ended before are removed (mail/log.ts), and the
 *    reply notices that ended before (visitors/reply-emails.ts);
 *  - sign-in sessions past their limits, invitations past their week, audit log entries older
 *    than a year and security log entries older than 90 days are removed (the `purge` of
 *    accounts/sign-in.ts, invitations.ts, audit.ts, security-log.ts); password reset links past their hour;
 *  - the inbox's feed keeps a week: a live stream resumes within it (inbox/service.ts, `purge`);
 *  - agents' alerts keep a day of ended checks and sent marks (agent-alerts/store.ts, `purge`);
 *  - the chat window's reports of visitors' pages and browsers older than
 *    VISITOR_CONTEXT_RETENTION_DAYS (0: kept) are removed (visitors/context.ts, `purge`).
 * Every step is idempotent, so several instances may run it at once.
 */
export async function runMaintenance(services: Services, now = Date.now()) {
  const purgedKeys = Number(await services.idempotency.purgeExpired());
  const removedSpool = removeOlderThan(path.join(services.config.dataDir, 'tmp'), now - HOUR);
  const blobs = services.blobs;
  const retentionDays = services.config.mediaRetentionDays;
  const expiredMedia =
    retentionDays > 0 ? await removeExpiredMedia({ db: services.db, visitorFiles: services.visitorFiles, blobs }, now - retentionDays * 24 * HOUR) : 0;
  let removedOrphans = 0;
  let mediaStoreFailed: true | undefined;
  try {
    for await (const batch of blobs.listOlderThan(now - HOUR)) {
      const known = await services.stores.media.existingStorageKeys(batch);
      const orphans = batch.filter((key) => !known.has(key));
      await blobs.remove(orphans);
      removedOrphans += orphans.length;
    }
  } catch (err) {
    // A bucket that fails now is swept on the next run; the steps below do not wait for it.
    if (!(err instanceof ApiError && err.code === 'service_unavailable')) throw err;
    mediaStoreFailed = true;
  }
  const purgedRevocations = Number(await services.stores.access.purgeVisitorRevocations(now - VISITOR_CREDENTIAL_TTL_SECONDS * 1000 - 24 * HOUR));
  const removedDeliveryLog = await removeExpiredDeliveryLog(services.stores.events, now);
  const removedMailLog = await services.stores.mail.removeEndedBefore(now - MAIL_LOG_RETENTION_MS);
  const removedReplyNotices = await services.visitors.replyEmails.purge(now - MAIL_LOG_RETENTION_MS);
  const { signIn, invitations, audit, securityLog } = services.accounts;
  const accounts = {
    sessions: await signIn.purge(now),
    invitations: await invitations.purge(now),
    audit: await audit.purge(now),
    securityLog: await securityLog.purge(now),
    passwordResets: await services.accounts.passwordReset.purge(now),
    emailLinks: await services.accounts.emailVerification.purge(now),
  };
  const inboxActivity = Number(await services.inbox.service.purge(now));
  // A day is far past the 15 minutes a sent mark matters for.
  const agentAlerts = await services.agentAlerts.store.purge(now - 24 * HOUR);
  const contextDays = services.config.visitorContextRetentionDays;
  const visitorContext = contextDays > 0 ? await services.visitors.context.purge(now - contextDays * 24 * HOUR) : 0;
  return {
    purgedKeys,
    removedSpool,
    expiredMedia,
    removedOrphans,
    ...(mediaStoreFailed && { mediaStoreFailed }),
    purgedRevocations,
    removedDeliveryLog,
    removedMailLog,
    removedReplyNotices,
    accounts,
    inboxActivity,
    agentAlerts,
    visitorContext,
  };
}

function removeOlderThan(dir: string, before: number): number {
  const names = listOlderThan(dir, before);
  for (const name of names) fs.rmSync(path.join(dir, name), { force: true });
  return names.length;
}

export function startMaintenance(services: Services, logger: Logger, everyMs = HOUR) {
  const tick = () =>
    runMaintenance(services).then(
      (result) => logger.info({ maintenance: result }, 'maintenance done'),
      (err) => logger.error({ err }, 'maintenance failed'),
    );
  const first = setTimeout(tick, 10_000);
  const timer = setInterval(tick, everyMs);
  first.unref();
  timer.unref();
  return { stop: () => (clearTimeout(first), clearInterval(timer)) };
}
