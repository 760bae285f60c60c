/**
 * Migrations run one process at a time under a lock of the engine (server/db/knex.ts). Here two
 * connections of one process migrate a new database at the same moment: both finish, the schema
 * is made once, and the one that waits leaves this process's event loop free to finish the other.
 */
import type { Knex } from 'knex';
import { createDb, migrate } from '../../server/db/knex';
import { migrationSource } from '../../server/db/migrations';
import { createTestDatabase, TestDatabase } from '../helpers/db';

let t: TestDatabase;
const open: Knex[] = [];
beforeEach(async () => {
  t = await createTestDatabase();
});
afterEach(async () => {
  for (const db of open.splice(0)) await db.destroy();
  await t.drop();
});
const connect = () => {
  const db = createDb({ databaseUrl: t.databaseUrl, dataDir: t.dataDir });
  open.push(db);
  return db;
};

test('two migrations at once on a new database both finish, and the waiting one leaves the event loop free', async () => {
  const [a, b] = [connect(), connect()];
  const started = Date.now();
  await Promise.all([migrate(a), migrate(b)]);
  // Liveness, not speed: a busy wait inside SQLite holds the event loop, so the migration holding the
  // lock cannot go on: the two would wait out the whole lock time-out (120 s) and the second would fail.
  expect(Date.now() - started).toBeLessThan(30_000);
  const names = (await a('knex_migrations').pluck('name')) as string[];
  expect(new Set(names).size).toBe(names.length);
  // Every migration the service knows ran, once each.
  expect([...names].sort()).toEqual(await migrationSource.getMigrations([]));
});
