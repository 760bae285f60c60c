import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeSelfSignedCert } from '../../server/platform/tls';
import type { BenchContext } from '../../scripts/bench/context';
import { parseOptions } from '../../scripts/bench/options';
import { runVisitorPart } from '../../scripts/bench/visitor';
import { MYSQL_ADMIN_URL, TEST_DB } from '../helpers/db';

/**
 * The visitor rows of `npm run bench` (scripts/bench/visitor.ts) in one short round, so the part keeps
 * working: both message rows and the availability rows measured something and every request was
 * answered as expected. The figures themselves come from the real run.
 */
jest.setTimeout(300_000);

test(`the visitor part measures messages with alerts all and none, and availability (${TEST_DB})`, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-visitor-test-'));
  try {
    const pair = await makeSelfSignedCert('localhost');
    const certFile = path.join(dir, 'cert.pem');
    const keyFile = path.join(dir, 'key.pem');
    fs.writeFileSync(certFile, pair.cert);
    fs.writeFileSync(keyFile, pair.key, { mode: 0o600 });
    let port = 21_000 + Math.floor(Math.random() * 20_000);
    const mysqlServer = `mysql://${new URL(MYSQL_ADMIN_URL).username || 'root'}@${new URL(MYSQL_ADMIN_URL).host}`;
    const ctx: BenchContext = {
      options: parseOptions(['--parts=visitor', '--rounds=1', '--seconds=2', '--warmup-seconds=1', '--quiet-wait=1', `--database-url=${mysqlServer}`]),
      tls: { certFile, keyFile, cert: pair.cert, key: pair.key },
      nextPort: () => port++,
      quiet: async () => '',
      log: () => {},
    };
    const rows = await runVisitorPart(ctx, TEST_DB);
    expect(rows.map((r) => r.what.split(',')[0])).toEqual([
      'visitor message (POST /window/v1/…/messages',
      'visitor message (POST /window/v1/…/messages',
      'availability (GET /window/v1/…/availability)',
      'availability (GET /window/v1/…/availability)',
    ]);
    expect(rows[0].what).toMatch(/alerts `all`/);
    expect(rows[1].what).toMatch(/alerts `none`/);
    expect(rows[3].what).toMatch(/REDIS_URL \(presence/);
    for (const row of rows) {
      if (!(row.value > 0)) throw new Error(`no request answered in the timed window: ${JSON.stringify(row)}`);
      expect(row.cpuMsPerOp).toBeGreaterThan(0);
      expect(row.note ?? '').not.toMatch(/errors|no alerts step/);
    }
    expect(rows[2].note).toMatch(/^1,000 open windows asking once a minute: [\d.]+ ms CPU\/s/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
