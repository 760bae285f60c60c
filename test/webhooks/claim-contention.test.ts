import type { Knex } from 'knex';
import { createHarness, Harness } from '../helpers/harness';
import { ApiError } from '../../server/platform/errors';
import { createEventStore } from '../../server/webhooks/store';
import { deliveryWorkerFor } from '../../server/services';
import { captureLogger, eventIdsOf, waitFor, webhooks } from './helpers';

/**
 * A claim that loses to other writers (a deadlock on MySQL, a busy SQLite) is run again; when it
 * keeps losing, the worker gets the database's own error, logs it and claims again at its next
 * poll. It is not a client's `503 service_unavailable`: no client asked for anything. The losses
 * are injected at the transaction, so this runs the same on both engines.
 */
let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const deadlock = () => Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), { code: 'ER_LOCK_DEADLOCK' });

/** The harness's database, except that its first `losses` transactions lose to another writer. */
function losingTransactions(losses: number) {
  const db = h.runtime.db;
  let started = 0;
  const proxy = new Proxy(db, {
    get(target, property, receiver) {
      if (property !== 'transaction') return Reflect.get(target, property, receiver);
      return (work: (trx: Knex.Transaction) => Promise<unknown>, config?: Knex.TransactionConfig) =>
        ++started <= losses ? Promise.reject(deadlock()) : db.transaction(work, config);
    },
  });
  return { db: proxy, started: () => started };
}

async function siteWithDueDelivery(name: string) {
  const site = await h.newSite(name);
  await webhooks(h).setEndpoint(site.id, `https://localhost:9/${name}`, 'message.created');
  await h.visitorSay(site.id, 'v', 'hi');
  const [eventId] = await eventIdsOf(h, site.id, 'message.created');
  return eventId;
}

const claim = (db: Knex) =>
  createEventStore(db).claimDue({
    owner: 'contention-test',
    now: Date.now(),
    leaseMs: 60_000,
    limit: 50,
    maxAttempts: 3,
    held: new Map(),
    allowance: () => 50,
  });

test('a claim that lost to other writers is run again and claims the row', async () => {
  const eventId = await siteWithDueDelivery('lost-three-times');
  const db = losingTransactions(3);
  const { claimed } = await claim(db.db);
  expect(db.started()).toBe(4);
  expect(claimed.map((c) => [c.delivery.event_id, c.attempt])).toEqual([[eventId, 1]]);
});

test('a claim that loses every time hands the worker the database error, not a 503', async () => {
  const db = losingTransactions(Infinity);
  const failure = await claim(db.db).then(
    () => null,
    (err: unknown) => err,
  );
  expect(db.started()).toBe(4);
  expect(failure).not.toBeInstanceOf(ApiError);
  expect(failure).toMatchObject({ code: 'ER_LOCK_DEADLOCK' });
});

test("the worker's log names the database's error and says it claims again", async () => {
  const { logger, text } = captureLogger();
  const db = losingTransactions(Infinity);
  const worker = deliveryWorkerFor(h.runtime.services, logger, { store: createEventStore(db.db), pollMs: 50 });
  worker.start();
  try {
    await waitFor('two failed claims', () => db.started() >= 8);
  } finally {
    await worker.stop();
  }
  const failures = text()
    .split('\n')
    .filter((line) => line.includes('claiming failed'));
  expect(failures.length).toBeGreaterThanOrEqual(2);
  for (const line of failures) {
    expect(JSON.parse(line)).toMatchObject({ level: 50, err: { code: 'ER_LOCK_DEADLOCK' }, msg: 'event delivery: claiming failed; retrying at the next poll' });
    expect(line).not.toMatch(/service_unavailable|retry in a moment/);
  }
});
