/**
 * Processes started together on a fresh DATA_DIR (a server, a worker and CLI calls, or several
 * instances) each find no master key and no certificate and make one. They must all end with the
 * same key and a matching certificate pair, and none may read a file another is still writing.
 */
import { spawn } from 'node:child_process';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../helpers/spawn';

const PROCESSES = 8;

/** Runs PROCESSES copies of `code` at once against dataDir (the compiled modules in dist/), each printing one JSON line. */
async function together(dataDir: string, code: string): Promise<unknown[]> {
  const runs = Array.from({ length: PROCESSES }, () => {
    const child = spawn(process.execPath, ['-e', code], { cwd: ROOT, env: { ...process.env, DATA_DIR: dataDir } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    return new Promise<unknown>((resolve, reject) =>
      child.on('close', (status) => (status === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${status}: ${err}`)))),
    );
  });
  return Promise.all(runs);
}

test('eight processes on a fresh DATA_DIR all load the same master key', async () => {
  for (let round = 0; round < 5; round++) {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-race-key-'));
    const keys = await together(
      dataDir,
      `const { loadMasterKey } = require('./dist/server/platform/master-key.js');
       console.log(JSON.stringify(loadMasterKey(process.env.DATA_DIR).toString('hex')));`,
    );
    const onDisk = fs.readFileSync(path.join(dataDir, 'master.key'), 'utf8').trim();
    expect(onDisk).toMatch(/^[0-9a-f]{64}$/);
    expect(keys).toEqual(Array(PROCESSES).fill(onDisk));
    expect(fs.statSync(path.join(dataDir, 'master.key')).mode & 0o777).toBe(0o600);
    expect(fs.readdirSync(dataDir)).toEqual(['master.key']); // no private drafts left behind
  }
});

test('eight processes on a fresh DATA_DIR all serve one matching certificate pair, the one on disk', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-race-tls-'));
  const pairs = (await together(
    dataDir,
    `require('./dist/server/platform/tls.js').loadTls(process.env.DATA_DIR)
       .then((t) => console.log(JSON.stringify({ cert: t.cert, key: t.key, generated: Boolean(t.generatedAt) })));`,
  )) as { cert: string; key: string; generated: boolean }[];
  const cert = fs.readFileSync(path.join(dataDir, 'tls', 'localhost.crt'), 'utf8');
  const key = fs.readFileSync(path.join(dataDir, 'tls', 'localhost.key'), 'utf8');
  expect(new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))).toBe(true);
  for (const p of pairs) expect({ cert: p.cert, key: p.key }).toEqual({ cert, key });
  // Exactly one process made the pair in use and says where it is; the others only read it.
  expect(pairs.filter((p) => p.generated)).toHaveLength(1);
  expect(fs.statSync(path.join(dataDir, 'tls', 'localhost.key')).mode & 0o777).toBe(0o600);
  expect(fs.readdirSync(dataDir)).toEqual(['tls']);
}, 60_000);
