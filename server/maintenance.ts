import fs from 'node:fs';
import path from 'node:path';
import type { Services } from './services';
import type { Logger } from './platform/logger';
import { removeExpiredMedia } from './media/retention';
import { VISITOR_CREDENTIAL_TTL_SECONDS } from './window/tokens';
import { removeExpiredDeliveryLog } from './webhooks/retention';

const HOUR = 3600_000;

/**
 * Housekeeping that keeps storage bounded after crashes and over time:
 *  - Idempotency-Key records older than 24 hours are forgotten;
 *  - upload spool files (DATA_DIR/tmp) older than an hour are removed (a process killed mid-upload
 *    leaves them behind);
 *  - media older than MEDIA_RETENTION_DAYS (0: kept) is removed, file and row (media/retention.ts);
 *  - media files with no attachment row, older than an hour, are removed (a process killed between
 *    storing a file and committing its message leaves them behind);
 *  - per-visitor window revocations are forgotten once every credential they void has expired
 *    (the credential's 180 days, plus a day for clocks; sessions are capped far below that);
 *  - the delivery log keeps 30 days: older attempt rows, finished deliveries and the events nobody
 *    can redeliver any more are removed (webhooks/retention.ts; `npm run worker` runs it too);
 *  - sign-in sessions past their limits, invitations past their week, audit log entries older
 *    than a year and security log entries older than 90 days are removed (the `purge` of
 *    accounts/sign-in.ts, invitations.ts, audit.ts, security-log.ts);
 *  - the inbox's feed keeps a week: a live stream resumes within it (inbox/service.ts, `purge`);
 *  - the chat window's reports of visitors' pages and browsers older than
 *    VISITOR_CONTEXT_RETENTION_DAYS (0: kept) are removed (visitors/context.ts, `purge`).
 * Every step is idempotent, so several instances may run it at once.
 */
export async function runMaintenance(services: Services, now = Date.now()) {
  const purgedKeys = Number(await services.idempotency.purgeExpired());
  const removedSpool = removeOlderThan(path.join(services.config.dataDir, 'tmp'), now - HOUR);
  const mediaDir = path.join(services.config.dataDir, 'media');
  const retentionDays = services.config.mediaRetentionDays;
  const expiredMedia =
    retentionDays > 0 ? await removeExpiredMedia({ db: services.db, visitorFiles: services.visitorFiles, mediaDir }, now - retentionDays * 24 * HOUR) : 0;
  const candidates = listOlderThan(mediaDir, now - HOUR);
  let removedOrphans = 0;
  for (let i = 0; i < candidates.length; i += 500) {
    const batch = candidates.slice(i, i + 500);
    const known = await services.stores.media.existingStorageKeys(batch);
    for (const name of batch) {
      if (!known.has(name)) {
        fs.rmSync(path.join(mediaDir, name), { force: true });
        removedOrphans++;
      }
    }
  }
  const purgedRevocations = Number(await services.stores.access.purgeVisitorRevocations(now - VISITOR_CREDENTIAL_TTL_SECONDS * 1000 - 24 * HOUR));
  const removedDeliveryLog = await removeExpiredDeliveryLog(services.stores.events, now);
  const { signIn, invitations, audit, securityLog } = services.accounts;
  const accounts = {
    sessions: await signIn.purge(now),
    invitations: await invitations.purge(now),
    audit: await audit.purge(now),
    securityLog: await securityLog.purge(now),
  };
  const inboxActivity = Number(await services.inbox.service.purge(now));
  const contextDays = services.config.visitorContextRetentionDays;
  const visitorContext = contextDays > 0 ? await services.visitors.context.purge(now - contextDays * 24 * HOUR) : 0;
  return { purgedKeys, removedSpool, expiredMedia, removedOrphans, purgedRevocations, removedDeliveryLog, accounts, inboxActivity, visitorContext };
}

function listOlderThan(dir: string, before: number): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((name) => {
    try {
      return fs.statSync(path.join(dir, name)).mtimeMs < before;
    } catch {
      return false;
    }
  });
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
