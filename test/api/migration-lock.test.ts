/**
 * Migrations run one process at a time under a lock of the engine (server/db/knex.ts). Here two
 * connections of one process migrate a new database at the same moment: both finish, the schema
 * is made once, and the one that waits leaves this process's event loop free to finish the other.
 */
import type { Knex } from 'knex';
import { createDb, migrate } from '../../server/db/knex';
import { migrationSource } from '../../server/db/migrations';
import { createTestDatabase, TestDatabase, TEST_DB } from '../helpers/db';

let t: TestDatabase;
const open: Knex[] = [];
beforeEach(async () => {
  t = await createTestDatabase({ empty: true });
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

/** What the engine says of each table: its DDL as `SHOW CREATE TABLE` prints it (the auto-increment counter aside). */
async function schemaOf(db: Knex): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const row of (await db.raw('SHOW FULL TABLES'))[0] as Record<string, string>[]) {
    const table = Object.values(row)[0];
    out[table] = ((await db.raw(`SHOW CREATE TABLE \`${table}\``))[0][0]['Create Table'] as string).replace(/ AUTO_INCREMENT=\d+/, '');
  }
  return out;
}

// The other test files' MariaDB databases are copies of a migrated template (test/helpers/db.ts):
// the copy must be exactly what the migrations make, or every MariaDB test would test another schema.
(TEST_DB === 'mysql' ? test : test.skip)('a test database copied from the template has the schema and rows the migrations make', async () => {
  const migrated = connect();
  await migrate(migrated);
  const copy = await createTestDatabase();
  const copied = createDb({ databaseUrl: copy.databaseUrl, dataDir: copy.dataDir });
  try {
    expect(await schemaOf(copied)).toEqual(await schemaOf(migrated));
    expect(await copied('knex_migrations').orderBy('id').pluck('name')).toEqual(await migrated('knex_migrations').orderBy('id').pluck('name'));
    expect(await copied('knex_migrations_lock').select('is_locked')).toEqual(await migrated('knex_migrations_lock').select('is_locked'));
  } finally {
    await copied.destroy();
    await copy.drop();
  }
});
