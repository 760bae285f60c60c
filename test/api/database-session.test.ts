import { createHarness, Harness } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';
import { MYSQL_TIMEOUTS } from '../../server/db/knex';

/** Session settings the service relies on for bounded waits (see docs/operations.md, Failure behaviour). */
let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

(TEST_DB === 'mysql' ? test : test.skip)('every pooled MySQL session gives up a row-lock wait after 10 s, not 50 s', async () => {
  // Several at once, so more than one pooled connection answers.
  const rows = await Promise.all(
    Array.from({ length: 4 }, () => h.runtime.db.transaction(async (trx) => (await trx.raw('SELECT @@SESSION.innodb_lock_wait_timeout AS t'))[0][0].t)),
  );
  expect(MYSQL_TIMEOUTS.lockWaitSeconds).toBe(10);
  for (const t of rows) expect(Number(t)).toBe(MYSQL_TIMEOUTS.lockWaitSeconds);
});
