import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { makeSelfSignedCert } from '../../server/platform/tls';
import type { BenchContext } from '../../scripts/bench/context';
import { Dataset, DatasetShape, mysqlDataset, sqliteDataset } from '../../scripts/bench/dataset';
import { parseOptions } from '../../scripts/bench/options';
import { prepareInbox, runInboxLivePart, runInboxPagePart } from '../../scripts/bench/inbox';
import { MYSQL_ADMIN_URL, TEST_DB } from '../helpers/db';

/**
 * The inbox rows of `npm run bench` on a tiny data set of their own, one short round each, so the
 * part keeps working: every row measured something, the service and the bare server answered every
 * request, the streams saw every message. The figures themselves come from the real run.
 */
const TINY: DatasetShape = { sites: 2, keysPerSite: 1, conversations: 20, bigSiteConversations: 300, messages: 100, longConversationMessages: 30 };

jest.setTimeout(300_000);

describe(`bench inbox rows (${TEST_DB})`, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-inbox-test-'));
  const dbName = `chat_bench_test_${randomBytes(4).toString('hex')}`;
  const mysqlServer = `mysql://${new URL(MYSQL_ADMIN_URL).username || 'root'}@${new URL(MYSQL_ADMIN_URL).host}`;
  let ctx: BenchContext;
  let dataset: Dataset;
  const logged: string[] = [];

  beforeAll(async () => {
    const pair = await makeSelfSignedCert('localhost');
    const certFile = path.join(dir, 'cert.pem');
    const keyFile = path.join(dir, 'key.pem');
    fs.writeFileSync(certFile, pair.cert);
    fs.writeFileSync(keyFile, pair.key, { mode: 0o600 });
    let port = 21_000 + Math.floor(Math.random() * 20_000);
    ctx = {
      options: parseOptions(['--rounds=1', '--seconds=3', '--warmup-seconds=2', '--quiet-wait=1', `--database-url=${mysqlServer}`, `--engine=${TEST_DB}`]),
      tls: { certFile, keyFile, cert: pair.cert, key: pair.key },
      nextPort: () => port++,
      quiet: async () => '',
      log: (m) => logged.push(m),
    };
    const log = (m: string) => logged.push(m);
    dataset =
      TEST_DB === 'mysql'
        ? await mysqlDataset(mysqlServer, TINY, { rebuild: true, log, name: dbName, dataDir: path.join(dir, 'data') })
        : await sqliteDataset(TINY, { rebuild: true, log, dataDir: path.join(dir, 'data') });
  });

  afterAll(async () => {
    if (TEST_DB === 'mysql') {
      const admin = await mysql.createConnection({ uri: mysqlServer });
      await admin.query(`DROP DATABASE IF EXISTS \`${dbName}\``);
      await admin.end();
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('prepares the big site’s member once and keeps its token', async () => {
    const first = await prepareInbox(dataset, () => {});
    const second = await prepareInbox(dataset, () => {});
    expect(second).toEqual(first);
    expect(first.token.startsWith('wcm_')).toBe(true);
    expect(first.siteId).toBe(dataset.bigSiteId);
  });

  it('measures the inbox first page beside the public list, each against the bare server on MariaDB', async () => {
    const rows = await runInboxPagePart(ctx, dataset);
    expect(rows.map((r) => r.what.split(',')[0])).toEqual([
      'public list first page (GET /api/v1/conversations?limit=25',
      'inbox first page (GET /manage/v1/…/inbox/conversations?limit=25',
      'inbox first page',
    ]);
    for (const row of rows) {
      if (!(row.value > 0)) throw new Error(`no request answered in the timed window: ${JSON.stringify(row)}`);
      expect(row.p50Ms).toBeGreaterThan(0);
      expect(row.p99Ms).toBeGreaterThanOrEqual(row.p50Ms!);
      expect(row.cpuMsPerOp).toBeGreaterThan(0);
      expect(row.note ?? '').not.toMatch(/errors/);
      if (TEST_DB === 'mysql') {
        expect(row.baseline).toBeGreaterThan(0);
        expect(row.ratio).toBeGreaterThan(0);
      } else expect(row.baseline).toBeUndefined();
    }
  });

  it('measures visitor message to inbox stream latency on every setup', async () => {
    const rows = await runInboxLivePart(ctx, TEST_DB, { messages: 8, gapMs: 10 });
    expect(rows.length).toBe(TEST_DB === 'mysql' ? 3 : 1);
    // Every message was seen on the stream (a missing one fails the run); the poll-woken setup sends a quarter of them.
    expect(rows.map((r) => Number(/^(\d+) messages/.exec(r.note ?? '')?.[1]))).toEqual(TEST_DB === 'mysql' ? [8, 8, 2] : [8]);
    for (const row of rows) {
      expect(row.p50Ms).toBeGreaterThan(0);
      expect(row.p99Ms).toBeGreaterThanOrEqual(row.p50Ms!);
      expect(row.note ?? '').not.toMatch(/closed/);
    }
    // Without Redis the second instance learns of the message from its feed poll (1 s).
    if (TEST_DB === 'mysql') expect(rows[2].what).toMatch(/without Redis/);
  });
});
