/**
 * The password hashing pool's rules, on threads the test drives (a fake that answers when told),
 * plus real worker threads for the parts a fake cannot prove: the key is scrypt's, and a thread
 * that dies or cannot start fails its hash with a clear error instead of hanging it.
 */
import { scryptSync } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { createHashPool, defaultHashThreads, ScryptJob } from '../../server/accounts/hash-pool';
import { fakeHashThreads } from '../fakes/fake-hash-threads';
import { ApiError } from '../../server/platform/errors';
import { loadConfig } from '../../server/config';

function fakePool(threads: number, queue: number, extra: { jobTimeoutMs?: number; idleMs?: number } = {}) {
  const fake = fakeHashThreads();
  const pool = createHashPool({ threads, queue, ...extra, spawn: fake.spawn });
  return { pool, made: fake.made, busy: fake.busy };
}

const job = (password = 'a long enough password'): ScryptJob => ({
  password,
  salt: Buffer.alloc(16, 7),
  keyLength: 32,
  N: 2 ** 4,
  r: 8,
  p: 1,
  maxmem: 32 * 1024 * 1024,
});

/** Records how each promise settles, in order, without awaiting it. */
function track<T>(promises: Promise<T>[]) {
  const settled: { i: number; ok: boolean; value?: T; err?: unknown }[] = [];
  promises.forEach((p, i) =>
    p.then(
      (value) => settled.push({ i, ok: true, value }),
      (err) => settled.push({ i, ok: false, err }),
    ),
  );
  return settled;
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

test('no thread starts before the first hash, and never more than the limit', async () => {
  const { pool, made } = fakePool(2, 10);
  expect(made).toHaveLength(0);
  const results = track([1, 2, 3, 4, 5].map(() => pool.derive(job())));
  expect(made).toHaveLength(2);
  expect(pool.stats()).toMatchObject({ running: 2, queued: 3 });
  while (results.length < 5) {
    for (const t of made.filter((t) => t.refs === 1)) t.answer();
    await flush();
  }
  expect(made).toHaveLength(2); // the two threads took the queued hashes in turn
  expect(results.every((r) => r.ok)).toBe(true);
  await pool.close();
});

test('a full queue refuses at once with 503 and Retry-After; the queue never passes its bound', async () => {
  const { pool, made, busy } = fakePool(2, 3);
  const promises = Array.from({ length: 20 }, () => pool.derive(job()));
  const settled = track(promises);
  await flush();
  // Refused before a single hash was answered: 2 run, 3 wait, 15 are turned away.
  expect(made.every((t) => t.jobs.length === 1)).toBe(true);
  expect(settled).toHaveLength(15);
  for (const r of settled) {
    expect(r.ok).toBe(false);
    const err = r.err as ApiError;
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(503);
    expect(err.code).toBe('service_unavailable');
    expect(Number(err.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
  }
  expect(pool.stats()).toMatchObject({ running: 2, queued: 3, maxQueued: 3, refused: 15 });

  // As hashes finish, more are taken, and the queue stays within 3.
  let more = 0;
  while (busy().length) {
    busy()[0].answer();
    await flush();
    if (more++ < 10) track([pool.derive(job())]);
    expect(pool.stats().queued).toBeLessThanOrEqual(3);
  }
  expect(pool.stats().maxQueued).toBe(3);
  await pool.close();
});

test('a queue of 0 runs only what the threads take', async () => {
  const { pool } = fakePool(1, 0);
  const settled = track([pool.derive(job()), pool.derive(job())]);
  await flush();
  expect(settled).toEqual([{ i: 1, ok: false, err: expect.any(ApiError) }]);
  await pool.close();
});

test('a thread that crashes fails its hash with a clear error; a new thread takes the next', async () => {
  const { pool, made } = fakePool(1, 5);
  const settled = track([pool.derive(job()), pool.derive(job())]);
  made[0].crash('out of memory');
  await flush();
  expect(settled).toHaveLength(1);
  expect((settled[0].err as Error).message).toMatch(/password hashing thread exited \(code 1: out of memory\) during a hash/);
  expect(made).toHaveLength(2);
  made[1].answer();
  await flush();
  expect(settled[1]).toMatchObject({ i: 1, ok: true });
  expect(pool.stats()).toMatchObject({ failed: 1, started: 2, running: 0 });
  await pool.close();
});

test('a thread that never answers is stopped after the job time-out and replaced', async () => {
  jest.useFakeTimers();
  try {
    const { pool, made } = fakePool(1, 5, { jobTimeoutMs: 30_000 });
    const settled = track([pool.derive(job()), pool.derive(job())]);
    jest.advanceTimersByTime(29_999);
    await Promise.resolve();
    expect(settled).toHaveLength(0);
    jest.advanceTimersByTime(1);
    await Promise.resolve();
    await Promise.resolve();
    expect(settled).toHaveLength(1);
    expect((settled[0].err as Error).message).toMatch(/did not answer within 30000 ms/);
    expect(made[0].terminated).toBe(true);
    expect(made[1].jobs).toHaveLength(1); // the waiting hash went to a new thread
    await pool.close();
  } finally {
    jest.useRealTimers();
  }
});

test('an idle thread never holds the process, and exits after a while', async () => {
  jest.useFakeTimers();
  try {
    const { pool, made } = fakePool(1, 5, { idleMs: 60_000 });
    const settled = track([pool.derive(job())]);
    expect(made[0].refs).toBe(1); // a hash under way keeps the process alive
    made[0].answer();
    await Promise.resolve();
    await Promise.resolve();
    expect(settled).toHaveLength(1);
    expect(made[0].refs).toBe(0);
    jest.advanceTimersByTime(60_000);
    expect(made[0].terminated).toBe(true);
    track([pool.derive(job())]);
    expect(made).toHaveLength(2);
    await pool.close();
  } finally {
    jest.useRealTimers();
  }
});

test('close refuses what waits, stops every thread, and refuses later hashes', async () => {
  const { pool, made } = fakePool(1, 5);
  const settled = track([pool.derive(job()), pool.derive(job())]);
  await pool.close();
  await flush();
  expect(settled.map((r) => (r.err as ApiError).status)).toEqual([503, 503]);
  expect(made.every((t) => t.terminated)).toBe(true);
  await expect(pool.derive(job())).rejects.toMatchObject({ status: 503, code: 'service_unavailable' });
});

test('a real thread derives what scrypt derives', async () => {
  const pool = createHashPool({ threads: 1, queue: 1 });
  try {
    const j = job('größer als zwölf');
    const key = await pool.derive(j);
    expect(key.equals(scryptSync(j.password, j.salt, j.keyLength, { N: j.N, r: j.r, p: j.p, maxmem: j.maxmem }))).toBe(true);
    // scrypt's own refusal comes back as an error of that hash, and the thread lives on.
    await expect(pool.derive({ ...j, maxmem: 1024 })).rejects.toThrow(/scrypt failed/);
    expect((await pool.derive(j)).equals(key)).toBe(true);
    expect(pool.stats()).toMatchObject({ started: 1, failed: 0 });
  } finally {
    await pool.close();
  }
});

test('a real thread that dies mid-hash, or cannot start, fails the hash instead of hanging it', async () => {
  let spawned = 0;
  const dying = createHashPool({
    threads: 1,
    queue: 1,
    // A thread that exits the moment it gets a hash.
    spawn: () => (spawned++, new Worker(`require('node:worker_threads').parentPort.on('message', () => process.exit(3));`, { eval: true })),
  });
  try {
    await expect(dying.derive(job())).rejects.toThrow(/thread exited \(code 3\) during a hash/);
    await expect(dying.derive(job())).rejects.toThrow(/thread exited \(code 3\)/);
    expect(spawned).toBe(2); // each hash found a fresh thread
  } finally {
    await dying.close();
  }
  const missing = createHashPool({ threads: 1, queue: 1, spawn: () => new Worker('/nonexistent/hash-worker.cjs') });
  try {
    await expect(missing.derive(job())).rejects.toThrow(/thread exited \(code 1: Cannot find module/);
  } finally {
    await missing.close();
  }
});

test('PASSWORD_HASH_THREADS and PASSWORD_HASH_QUEUE: defaults for a 2-core machine, bounds checked', () => {
  expect(defaultHashThreads(1)).toBe(1);
  expect(defaultHashThreads(2)).toBe(1);
  expect(defaultHashThreads(4)).toBe(2);
  expect(defaultHashThreads(64)).toBe(2);
  expect(loadConfig({}).passwordHashing).toEqual({ threads: defaultHashThreads(), queue: 8 });
  expect(loadConfig({ PASSWORD_HASH_THREADS: '2', PASSWORD_HASH_QUEUE: '0' }).passwordHashing).toEqual({ threads: 2, queue: 0 });
  expect(() => loadConfig({ PASSWORD_HASH_THREADS: '0' })).toThrow(/PASSWORD_HASH_THREADS must be 1 to 8/);
  expect(() => loadConfig({ PASSWORD_HASH_THREADS: '9' })).toThrow(/PASSWORD_HASH_THREADS must be 1 to 8/);
  expect(() => loadConfig({ PASSWORD_HASH_QUEUE: '-1' })).toThrow(/PASSWORD_HASH_QUEUE must be a non-negative integer/);
  expect(() => loadConfig({ PASSWORD_HASH_QUEUE: '1001' })).toThrow(/PASSWORD_HASH_QUEUE must be at most 1000/);
});
