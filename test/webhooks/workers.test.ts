import type { Knex } from 'knex';
import pino from 'pino';
import type { Harness } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';
import { createDb } from '../../server/db/knex';
import type { DeliveryWorker } from '../../server/webhooks/worker';
import { createEventStore } from '../../server/webhooks/store';
import { deliveryWorkerFor } from '../../server/services';
import { deliveryHarness, Receiver, startReceiver, waitFor, webhooks } from './helpers';

/**
 * Several workers on MySQL/MariaDB: claims use SELECT ... FOR UPDATE SKIP LOCKED and a lease, so
 * each event goes out once when the receiver accepts it. SQLite supports one worker, so this runs
 * on MariaDB only (TEST_DB=mysql).
 */
const onMysql = TEST_DB === 'mysql' ? describe : describe.skip;

onMysql('two workers on MariaDB', () => {
  let receiver: Receiver;
  let h: Harness;
  const dbs: Knex[] = [];
  const workers: DeliveryWorker[] = [];

  beforeAll(async () => {
    receiver = await startReceiver();
    h = await deliveryHarness(receiver, { onEvents: () => workers.forEach((w) => w.wake()) });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await Promise.all(dbs.map((d) => d.destroy()));
    await h.close();
    await receiver.close();
  });

  test('deliver each of 200 events exactly once', async () => {
    const site = await h.newSite('two-workers');
    await webhooks(h).setEndpoint(site.id, receiver.url('/many'));
    receiver.on('/many', (_req, res) => setTimeout(() => res.writeHead(200).end(), Math.random() * 15));
    // Half the events are waiting before the workers start, half arrive while they run.
    for (let i = 0; i < 50; i++) await h.visitorSay(site.id, `early-${i}`, 'hi');
    for (const owner of ['worker-a', 'worker-b']) {
      // Each worker has its own connection pool, as separate processes would.
      const db = createDb({ databaseUrl: h.database.databaseUrl, dataDir: h.database.dataDir });
      dbs.push(db);
      const worker = deliveryWorkerFor(h.runtime.services, pino({ level: 'silent' }), { store: createEventStore(db), owner, perEndpoint: 16 });
      workers.push(worker);
      worker.start();
    }
    for (let i = 0; i < 50; i++) await h.visitorSay(site.id, `late-${i}`, 'hi');

    const ids: string[] = (await h.runtime.db('events').where({ site_id: site.id }).select('id')).map((r) => r.id);
    expect(ids).toHaveLength(200); // conversation.started + message.created per visitor
    await waitFor(
      'all delivered',
      async () => {
        const row = await h.runtime.db('deliveries').where({ site_id: site.id, status: 'delivered' }).count({ n: '*' }).first();
        return Number(row?.n) === 200;
      },
      60_000,
    );

    const received = receiver.at('/many').map((r) => r.json.id);
    expect(received).toHaveLength(200);
    expect(new Set(received)).toEqual(new Set(ids));
    const attempts = await h.runtime.db('delivery_attempts').where({ site_id: site.id }).select('event_id', 'attempt');
    expect(attempts).toHaveLength(200);
    expect(attempts.every((a) => a.attempt === 1)).toBe(true);
    // Both took part.
    expect(workers[0].stats.delivered).toBeGreaterThan(0);
    expect(workers[1].stats.delivered).toBeGreaterThan(0);
    expect(workers[0].stats.delivered + workers[1].stats.delivered).toBe(200);
    process.stdout.write(`worker-a delivered ${workers[0].stats.delivered}, worker-b ${workers[1].stats.delivered}\n`);
  }, 90_000);
});

// Keeps the file meaningful under TEST_DB=sqlite, where the suite above is skipped.
test('the two-worker test runs on MariaDB', () => {
  expect(['sqlite', 'mysql']).toContain(TEST_DB);
});
