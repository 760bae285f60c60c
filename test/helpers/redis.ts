import { spawn, ChildProcess } from 'node:child_process';
import { waitFor } from './wait';

/**
 * A redis-server of the test's own, on its own port, with nothing saved to disk: tests that kill,
 * stop or restart Redis never touch the machine's shared one.
 */
export interface PrivateRedis {
  child: ChildProcess;
  exited: Promise<void>;
}

export async function startPrivateRedis(port: number, password: string): Promise<PrivateRedis> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--requirepass', password], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await waitFor(`redis-server on ${port} ready`, () => {
    if (child.exitCode !== null) throw new Error(`redis-server exited: ${out}`);
    return /Ready to accept connections/.test(out);
  });
  return { child, exited };
}

export async function stopPrivateRedis(redis: PrivateRedis | undefined): Promise<void> {
  if (!redis || redis.child.exitCode !== null || redis.child.signalCode !== null) return;
  redis.child.kill('SIGKILL');
  await redis.exited;
}
