import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';

/** Which database this run uses: TEST_DB=sqlite (default) or TEST_DB=mysql (the local MariaDB). */
export const TEST_DB = (process.env.TEST_DB ?? 'sqlite') as 'sqlite' | 'mysql';
export const MYSQL_ADMIN_URL = process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

export interface TestDatabase {
  dataDir: string;
  databaseUrl: string | undefined;
  drop(): Promise<void>;
}

/**
 * A fresh, uniquely named database for one test file: a SQLite file in a temporary DATA_DIR, or a
 * new MariaDB database created (and dropped afterwards) through the admin connection. Runs never
 * collide, even in parallel on one machine.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-test-'));
  if (TEST_DB === 'sqlite') {
    return { dataDir, databaseUrl: undefined, drop: async () => fs.rmSync(dataDir, { recursive: true, force: true }) };
  }
  const admin = new URL(MYSQL_ADMIN_URL);
  const name = `chat_test_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const conn = knexFactory({
    client: 'mysql2',
    connection: {
      host: admin.hostname,
      port: Number(admin.port || 3306),
      user: decodeURIComponent(admin.username),
      password: decodeURIComponent(admin.password),
    },
    pool: { min: 0, max: 1 },
  });
  try {
    // The server's default collation (case-insensitive here): the migrations must not depend on it.
    await conn.raw(`CREATE DATABASE \`${name}\``);
  } catch (err) {
    await conn.destroy();
    throw new Error(
      `TEST_DB=mysql needs MariaDB at ${admin.host} (${(err as Error).message}). Start it: start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`,
    );
  }
  const url = new URL(MYSQL_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    dataDir,
    databaseUrl: url.toString(),
    drop: async () => {
      try {
        await conn.raw(`DROP DATABASE IF EXISTS \`${name}\``);
      } finally {
        await conn.destroy();
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}
