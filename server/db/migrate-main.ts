import { loadConfig } from '../config';
import { createDb, migrate } from './knex';

/** `npm run db:migrate`: brings the configured database to the latest schema. */
async function main() {
  const config = loadConfig();
  const db = createDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    await migrate(db);
    const [, done] = await db.migrate.list({ migrationSource: (await import('./migrations')).migrationSource });
    console.log(`database is at the latest schema (${config.databaseUrl ? 'MySQL' : 'SQLite in ' + config.dataDir}); pending: ${done.length}`);
  } finally {
    await db.destroy();
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
