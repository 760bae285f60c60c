import { spawnTs } from './spawn';
import { createTestDatabase, TestDatabase } from './db';
import { loadConfig } from '../../server/config';
import { openRuntime, Runtime } from '../../server/runtime';

export interface AdminCli {
  database: TestDatabase;
  /** The server's side of the same database (services, Knex). */
  runtime: Runtime;
  /** Runs `npm run admin -- <args>` as its own process; `stdin` is written to it and closed. */
  admin(args: string[], stdin?: string): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** The same with --json: it must succeed and print exactly one JSON object, which is returned. */
  adminJson(args: string[], stdin?: string): Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  close(): Promise<void>;
}

/** The operator CLI as operators run it: separate processes on a fresh test database the test can read too. */
export async function adminCli(): Promise<AdminCli> {
  const database = await createTestDatabase();
  const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl ?? '', LOG_LEVEL: 'silent' };
  const runtime = await openRuntime(loadConfig({ ...env } as NodeJS.ProcessEnv));
  const admin: AdminCli['admin'] = async (args, stdin) => {
    const p = spawnTs('server/cli/admin.ts', args, env);
    if (stdin !== undefined) p.child.stdin.end(stdin);
    const code = await p.exited();
    return { code, stdout: p.stdout(), stderr: p.stderr() };
  };
  return {
    database,
    runtime,
    admin,
    async adminJson(args, stdin) {
      const r = await admin([...args, '--json'], stdin);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout.trim().split('\n')).toHaveLength(1); // exactly one JSON object
      return JSON.parse(r.stdout);
    },
    async close() {
      await runtime.close();
      await database.drop();
    },
  };
}
