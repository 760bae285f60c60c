/**
 * The service with a real SMTP sink and its mail worker running, as the mail tests and the
 * dashboard's email tests in Chromium need it: every email the service queues is sent to `sink`
 * within a poll (100 ms).
 */
import pino from 'pino';
import type { Harness } from '../helpers/harness';
import type { DeliveryWorker } from '../../server/delivery/engine';
import { mailWorkerFor } from '../../server/services';
import { manageHarness } from '../manage/helpers';
import { startSink, Sink } from './sink';

/** What `withMail` wraps: a service under test, made with the settings it is given. */
interface ServiceUnderTest {
  h: Harness;
  close(): Promise<void>;
}

export interface WithMail<T extends ServiceUnderTest> {
  service: T;
  sink: Sink;
  worker: DeliveryWorker;
  close(): Promise<void>;
}

/** `make` given the sink's SMTP_URL, then its mail worker started; closed in the reverse order. */
export async function withMail<T extends ServiceUnderTest>(make: (env: Record<string, string>) => Promise<T>): Promise<WithMail<T>> {
  const sink = await startSink();
  const service = await make({ SMTP_URL: sink.url });
  const worker = mailWorkerFor(service.h.runtime.services, pino({ level: 'silent' }), { pollMs: 100 });
  worker.start();
  return {
    service,
    sink,
    worker,
    async close() {
      await worker.stop();
      await service.close();
      await sink.close();
    },
  };
}

export interface MailHarness {
  h: Harness;
  sink: Sink;
  worker: DeliveryWorker;
  close(): Promise<void>;
}

export async function mailHarness(opts: { now?: () => number } = {}): Promise<MailHarness> {
  const mail = await withMail(async (env) => {
    const h = await manageHarness({ env, now: opts.now });
    return { h, close: () => h.close() };
  });
  return { h: mail.service.h, sink: mail.sink, worker: mail.worker, close: mail.close };
}
