import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import knexFactory, { type Knex } from 'knex';
import { createDb, migrate } from '../../server/db/knex';
import { stopwordTable } from '../../server/db/fulltext';

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
 *
 * On MariaDB the new database is a copy of a migrated template (`cloneTemplate`) unless `empty`:
 * running two dozen migrations' DDL took 4-10 s a database, for each of a hundred test files and
 * their second and third servers; copying the schema takes a fraction of that. The server still
 * runs its migrations at start, and finds them done, as it would on an upgraded production database.
 */
export async function createTestDatabase(opts: { empty?: boolean } = {}): Promise<TestDatabase> {
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
    if (!opts.empty) await cloneTemplate(conn, name);
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

/** The template's name: it changes with the migrations, so a changed migration makes a new template. */
function templateName(): string {
  const dir = path.join(__dirname, '..', '..', 'server', 'db', 'migrations');
  const hash = createHash('sha256');
  for (const file of fs.readdirSync(dir).sort()) hash.update(file).update(fs.readFileSync(path.join(dir, file)));
  return `chat_tpl_${hash.digest('hex').slice(0, 16)}`;
}

/** Templates older than this are dropped when a new one is made (a run of another checkout may still use a recent one). */
const TEMPLATE_KEPT_MS = 24 * 3600 * 1000;

/**
 * Copies the migrated template into `name`: each table's own `SHOW CREATE TABLE` (indexes, foreign
 * keys, charset and collation as the migrations made them), then its rows (the migrations'
 * bookkeeping in knex_migrations and its lock row, and any row a migration wrote). The template is
 * made once per set of migrations, under an engine lock so parallel test files wait for one maker.
 */
async function cloneTemplate(conn: Knex, name: string): Promise<void> {
  const template = templateName();
  await ensureTemplate(conn, template);
  const tables = (await conn.raw(`SHOW FULL TABLES FROM \`${template}\` WHERE Table_type = 'BASE TABLE'`))[0].map(
    (row: Record<string, string>) => Object.values(row)[0],
  ) as string[];
  // One connection (pool max 1): the session setting holds for every statement here, so a table
  // may name one not yet copied in its foreign keys.
  await conn.raw('SET SESSION foreign_key_checks = 0');
  try {
    // A full-text index is made with its own empty stopword list (server/db/fulltext.ts), which
    // InnoDB reads from the session when the index is created: the lists first, then the session
    // names the copy's list while its table is made, as the migration did.
    const ordered = [...tables.filter((t) => t.endsWith('_stopwords')), ...tables.filter((t) => !t.endsWith('_stopwords'))];
    for (const table of ordered) {
      const ddl = (await conn.raw(`SHOW CREATE TABLE \`${template}\`.\`${table}\``))[0][0]['Create Table'] as string;
      const stopwords = /FULLTEXT KEY/.test(ddl) && tables.includes(stopwordTable(table));
      if (stopwords) await conn.raw('SET SESSION innodb_ft_user_stopword_table = ?', [`${name}/${stopwordTable(table)}`]);
      await conn.raw(ddl.replace(/^CREATE TABLE `/, `CREATE TABLE \`${name}\`.\``));
      if (stopwords) await conn.raw('SET SESSION innodb_ft_user_stopword_table = DEFAULT');
      if (table !== '_template') await conn.raw(`INSERT INTO \`${name}\`.\`${table}\` SELECT * FROM \`${template}\`.\`${table}\``);
    }
    await conn.raw(`DROP TABLE \`${name}\`.\`_template\``);
  } finally {
    await conn.raw('SET SESSION foreign_key_checks = 1');
  }
}

async function ensureTemplate(conn: Knex, template: string): Promise<void> {
  const ready = async () =>
    (await conn.raw(`SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = '_template'`, [template]))[0].length > 0;
  if (await ready()) return;
  const [[{ got }]] = await conn.raw(`SELECT GET_LOCK('chat_test_template', 300) AS got`);
  if (got !== 1) throw new Error('waited 300 s for another test process making the MariaDB template database');
  try {
    if (await ready()) return;
    // A maker killed midway leaves a template without its marker: made again from nothing.
    await conn.raw(`DROP DATABASE IF EXISTS \`${template}\``);
    await conn.raw(`CREATE DATABASE \`${template}\``);
    const url = new URL(MYSQL_ADMIN_URL);
    url.pathname = `/${template}`;
    // The server's own connection settings and migration path, so the copy is what a server makes.
    const db = createDb({ databaseUrl: url.toString(), dataDir: os.tmpdir() });
    try {
      await migrate(db);
      await db.schema.createTable('_template', (t) => t.bigInteger('made_at').notNullable());
      await db('_template').insert({ made_at: Date.now() });
    } finally {
      await db.destroy();
    }
    for (const old of (await conn.raw(`SHOW DATABASES LIKE 'chat\\_tpl\\_%'`))[0].map((row: Record<string, string>) => Object.values(row)[0]) as string[]) {
      if (old === template) continue;
      const made = await conn.raw(`SELECT made_at FROM \`${old}\`._template`).then(
        ([rows]: [{ made_at: number }[]]) => Number(rows[0]?.made_at ?? 0),
        () => 0,
      );
      if (Date.now() - made > TEMPLATE_KEPT_MS) await conn.raw(`DROP DATABASE IF EXISTS \`${old}\``);
    }
  } finally {
    await conn.raw(`SELECT RELEASE_LOCK('chat_test_template')`);
  }
}
