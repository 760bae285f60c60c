import path from 'node:path';
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { spawn } from 'node:child_process';
import { ROOT, TSX } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';
import { TEST_DB } from '../helpers/db';
import { runInTransaction } from '../../server/db/transaction';
import { createDb } from '../../server/db/knex';
import { ApiError } from '../../server/platform/errors';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

describe('contention that outlasts every retry (both engines)', () => {
  test.each(['SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY', 'SQLITE_BUSY_RECOVERY', 'ER_LOCK_DEADLOCK'])(
    '%s is retried, then answered 503 with Retry-After',
    async (code) => {
      let tries = 0;
      const attempt = runInTransaction(
        h.runtime.db,
        async () => {
          tries++;
          throw Object.assign(new Error(`lost to another writer (${code})`), { code });
        },
        { attempts: 3 },
      );
      await expect(attempt).rejects.toBeInstanceOf(ApiError);
      await expect(attempt).rejects.toMatchObject({ code: 'service_unavailable', status: 503, headers: { 'Retry-After': '1' } });
      expect(tries).toBe(3);
    },
  );

  test('other errors are neither retried nor turned into 503', async () => {
    let tries = 0;
    const attempt = runInTransaction(h.runtime.db, async () => {
      tries++;
      throw Object.assign(new Error('bad query'), { code: 'SQLITE_ERROR' });
    });
    await expect(attempt).rejects.toMatchObject({ code: 'SQLITE_ERROR' });
    expect(tries).toBe(1);
  });
});

const sqliteOnly = TEST_DB === 'sqlite' ? describe : describe.skip;

sqliteOnly('SQLite shared with a second writing process (the CLI, npm run worker)', () => {
  const reply = (convId: string, content: string) => request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).send({ content });

  /**
   * Another process writing through the service's own code: read-then-write transactions in a loop
   * until its stdin closes (or 40 s pass). It prints a tally of its own outcomes when it stops.
   */
  function startSecondWriter(convId: string) {
    const script = `
      const { createDb } = require(${JSON.stringify(path.resolve(__dirname, '../../server/db/knex'))});
      const { runInTransaction } = require(${JSON.stringify(path.resolve(__dirname, '../../server/db/transaction'))});
      (async () => {
        const db = createDb({ dataDir: process.env.WRITER_DATA_DIR });
        const convId = process.env.WRITER_CONV_ID;
        let stop = false;
        process.stdin.on('end', () => { stop = true; });
        process.stdin.resume();
        const tally = { committed: 0, unavailable: 0, failed: 0, codes: {} };
        const deadline = Date.now() + 40000;
        while (!stop && Date.now() < deadline) {
          try {
            await runInTransaction(db, async (trx) => {
              const row = await trx('conversations').where({ id: convId }).first();
              await trx('conversations').where({ id: convId }).update({ updated_at: Number(row.updated_at) + 1 });
            });
            tally.committed++;
            if (tally.committed === 20) console.log('writing');
          } catch (err) {
            if (err.code === 'service_unavailable') tally.unavailable++;
            else { tally.failed++; tally.codes[err.code] = (tally.codes[err.code] || 0) + 1; }
          }
          await new Promise((r) => setImmediate(r));
        }
        console.log('TALLY ' + JSON.stringify(tally));
        await db.destroy();
      })();`;
    const child = spawn(TSX, ['-e', script], { cwd: ROOT, env: { ...process.env, WRITER_DATA_DIR: h.config.dataDir, WRITER_CONV_ID: convId } });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    const said = async (pattern: RegExp, timeoutMs: number) => {
      await waitFor(`the second writer to print ${pattern}`, () => pattern.test(output) || child.exitCode !== null, timeoutMs);
      const m = output.match(pattern);
      if (!m) throw new Error(`second writer exited (${child.exitCode}) without ${pattern}:\n${output}`);
      return m;
    };
    return { child, said, exited };
  }

  test('replies while another process writes: never a 500, every answer committed or 503', async () => {
    const target = (await h.visitorSay(h.site.id, 'v-busy', 'hi')).conversation.id;
    const theirs = (await h.visitorSay(h.site.id, 'v-theirs', 'hi')).conversation.id;
    const writer = startSecondWriter(theirs);
    try {
      await writer.said(/writing/, 30_000);
      const answers: request.Response[] = [];
      for (let batch = 0; batch < 40; batch++) {
        answers.push(...(await Promise.all(Array.from({ length: 4 }, (_, i) => reply(target, `busy ${batch}-${i}`)))));
      }
      writer.child.stdin.end();
      const tally = JSON.parse((await writer.said(/TALLY (.*)/, 20_000))[1]);

      const statuses = answers.map((a) => a.status);
      const unexpected = answers.filter((a) => a.status !== 201 && a.status !== 503).map((a) => `${a.status} ${JSON.stringify(a.body)}`);
      expect(unexpected).toEqual([]);
      for (const a of answers.filter((x) => x.status === 503)) {
        expect(a.body.error.code).toBe('service_unavailable');
        expect(a.headers['retry-after']).toBeDefined();
      }
      const created = statuses.filter((s) => s === 201).length;
      const stored = await h.runtime.db('messages').where({ conversation_id: target }).andWhere('content', 'like', 'busy %').count({ n: '*' });
      expect(Number(stored[0].n)).toBe(created);
      // The other process is the service's code too: it never fails either.
      expect(tally.failed).toBe(0);
      // Both really wrote at the same time (otherwise this proves nothing).
      expect(tally.committed).toBeGreaterThan(40);
      expect(created).toBeGreaterThan(answers.length / 2);
    } finally {
      if (writer.child.exitCode === null) writer.child.kill('SIGKILL');
      await writer.exited;
    }
  });

  test('a write lock held by another process past the busy time-out is 503 with Retry-After, then writes resume', async () => {
    const conv = (await h.visitorSay(h.site.id, 'v-locked', 'hi')).conversation.id;
    // Another connection holds the write lock: it is idle, so waiting on it here is the same as
    // waiting on another process.
    const other = createDb({ dataDir: h.config.dataDir });
    const holder = await other.transaction();
    try {
      await holder('conversations').where({ id: conv }).update({ updated_at: Date.now() });
      const blocked = runInTransaction(h.runtime.db, (trx) => trx('conversations').where({ id: conv }).update({ updated_at: Date.now() }), { attempts: 1 });
      await expect(blocked).rejects.toMatchObject({ code: 'service_unavailable', headers: { 'Retry-After': '1' } });
      await holder.commit();
      const res = await reply(conv, 'after the lock');
      expect(res.status).toBe(201);
    } finally {
      if (!holder.isCompleted()) await holder.rollback();
      await other.destroy();
    }
  }, 30_000);
});
