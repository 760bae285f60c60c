/**
 * Start-up (issue 28): from spawning `node dist/server/main.js` (NODE_ENV=production, the embedded
 * database, a DATA_DIR an earlier start made: certificate, master key, migrations) to the first
 * `/healthz` 200, beside a bare HTTPS server with the same certificate started the same way and
 * answering the same path: the floor that Node itself, TLS and the probe cost. Medians of five,
 * the two alternated.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { BenchContext } from './context';
import { BenchRow, median } from './measure';

const RUNS = 5;
const ROOT = path.resolve(__dirname, '../..');

/** The bare server: what any HTTPS service on Node must do before its first answer. */
const BARE = `
const https = require('node:https'); const fs = require('node:fs');
https.createServer({ cert: fs.readFileSync(process.env.CERT), key: fs.readFileSync(process.env.KEY) }, (req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"status":"ok"}');
}).listen(Number(process.env.PORT));`;

function healthy(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    https
      .get({ host: '127.0.0.1', port, path: '/healthz', rejectUnauthorized: false }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      })
      .on('error', () => resolve(false));
  });
}

/** Milliseconds from spawn to the first 200 of /healthz; the process is then stopped. */
async function timeToHealthy(args: string[], env: Record<string, string>, port: number): Promise<number> {
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port) }, stdio: 'ignore' });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited ${child.exitCode} before answering`);
      if (await healthy(port)) return Number(process.hrtime.bigint() - started) / 1e6;
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

export async function runStartPart(ctx: BenchContext): Promise<BenchRow[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-bench-start-'));
  try {
    const service = {
      args: ['--enable-source-maps', 'dist/server/main.js'],
      env: {
        NODE_ENV: 'production',
        DATA_DIR: dataDir,
        DATABASE_URL: '',
        REDIS_URL: '',
        TLS_CERT_FILE: ctx.tls.certFile,
        TLS_KEY_FILE: ctx.tls.keyFile,
        LOG_LEVEL: 'info',
      },
    };
    const bare = { args: ['-e', BARE], env: { CERT: ctx.tls.certFile, KEY: ctx.tls.keyFile } };
    ctx.log('start: a first start makes the data directory (master key, migrations)');
    await timeToHealthy(service.args, service.env, ctx.nextPort());
    const note = await ctx.quiet();
    const times: { service: number[]; bare: number[] } = { service: [], bare: [] };
    for (let i = 0; i < RUNS; i++) {
      times.service.push(await timeToHealthy(service.args, service.env, ctx.nextPort()));
      times.bare.push(await timeToHealthy(bare.args, bare.env, ctx.nextPort()));
    }
    const value = median(times.service);
    const baseline = median(times.bare);
    ctx.log(`start: service ${times.service.map(Math.round).join(', ')} ms; bare ${times.bare.map(Math.round).join(', ')} ms`);
    return [
      {
        what: 'start to first /healthz 200 (production, SQLite, from a build)',
        value: Math.round(value),
        unit: 'ms',
        baseline: Math.round(baseline),
        ratio: Number((value / baseline).toFixed(2)),
        note: [note, `median of ${RUNS}; ratio is service / bare (lower is better)`].filter(Boolean).join('; '),
      },
    ];
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
