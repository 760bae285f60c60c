import fs from 'node:fs';
import path from 'node:path';

/**
 * A start-up mistake the operator fixes (a setting, a port, a directory, the database): its message
 * is one line naming the setting, what is wrong with its value and what to do, printed without a
 * stack, and the process exits non-zero.
 */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}

/**
 * How an entry point (server, worker, migrations) ends on a failed start: one line on stderr and
 * exit 1. Errors that are not start-up mistakes keep only their message too: a stack helps nobody
 * who configured a service, and the message names the cause.
 */
export function exitOnStartupFailure(err: unknown): never {
  process.stderr.write(`${oneLine(err)}\n`);
  process.exit(1);
}

function oneLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.replace(/\s*\n\s*/g, ' ');
}

/**
 * DATA_DIR holds the SQLite database, media, the generated key and certificate: an existing one
 * this process cannot write would otherwise fail later as "unable to open database file". Checked
 * by writing, since permissions alone miss read-only mounts and access control lists.
 */
export function checkDataDir(dataDir: string): void {
  const fix = `give it to the user that runs the service (chown -R ${process.getuid?.() ?? 'the service user'} ${dataDir}) or point DATA_DIR at a writable directory`;
  let stat: fs.Stats | undefined;
  try {
    stat = fs.statSync(dataDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new StartupError(`DATA_DIR=${dataDir} cannot be read (${(err as NodeJS.ErrnoException).code}): ${fix}`);
  }
  if (stat && !stat.isDirectory()) throw new StartupError(`DATA_DIR=${dataDir} is a file, not a directory: point DATA_DIR at a directory`);
  try {
    fs.mkdirSync(dataDir, { recursive: true });
    const probe = path.join(dataDir, `.write-check-${process.pid}`);
    fs.writeFileSync(probe, '');
    fs.rmSync(probe, { force: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new StartupError(`DATA_DIR=${dataDir} is not writable by this process (${code}): ${fix}`);
  }
}
