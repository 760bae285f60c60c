import { loadConfig } from '../config';
import { checkDataDir, exitOnStartupFailure } from '../platform/startup';
import { createDb, migrate, waitForDatabase } from './knex';

/** `npm run db:migrate`: brings the configured database to the latest schema. */
async function main() {
  const config = loadConfig();
  if (!config.databaseUrl) checkDataDir(config.dataDir);
  const db = createDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    await waitForDatabase(db, {
      timeoutSeconds: config.databaseConnectTimeoutSeconds,
      onRetry: ({ reason, retryInMs, where }) =>
        console.error(`waiting for the database: ${where} does not answer yet (${reason}); trying again in ${retryInMs} ms (DATABASE_CONNECT_TIMEOUT_SECONDS)`),
    });
    const { newer } = await migrate(db);
    const where = config.databaseUrl ? 'MySQL' : 'SQLite in ' + config.dataDir;
    if (newer.length) console.log(`database is ahead of this release (${where}): it has ${newer.length} newer migration(s): ${newer.join(', ')}`);
    else console.log(`database is at the latest schema (${where}); pending: 0`);
  } finally {
    await db.destroy();
  }
}

main().catch(exitOnStartupFailure);
