/**
 * The media part of `npm run bench`: upload and download rates of attachments through the real
 * service, with files on local disk (MEDIA_STORE=local, the baseline) and in an S3-compatible bucket
 * (MEDIA_STORE=s3 on s3rver, downloads by redirect and by stream). One client sends one file at a
 * time, so each figure is the rate of one transfer: MiB/s of the median, p50 and p99 of its time.
 * s3rver runs in this process on the same machine: its figures show what our side adds (spooling,
 * multipart parts, a redirect), not what a real bucket over a network would give.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import type { BenchContext } from './context';
import type { Engine } from './options';
import { BenchRow, summarize } from './measure';
import { createDatabase } from './delivery';
import { API_BASE, REPO_ROOT, startService } from './processes';
import { tlsEnv } from './read';

const MiB = 1024 * 1024;
/** File sizes measured: a photo, and the largest attachment allowed by default (a multipart upload to S3). */
const SIZES = [1 * MiB, 20 * MiB];
const BUCKET = 'bench-media';

interface Setup {
  what: string;
  env: Record<string, string>;
}

interface Timed {
  ms: number;
  body?: Buffer;
  status: number;
  location?: string;
}

/** One request over HTTPS (the service) or HTTP (s3rver), timed to the last byte of the answer. */
function timedRequest(url: string, opts: { method: string; headers?: Record<string, string>; body?: Buffer }): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const target = new URL(url);
    const client = target.protocol === 'https:' ? https : http;
    const req = client.request(target, { method: opts.method, headers: opts.headers, rejectUnauthorized: false, agent: false }, (res) => {
      let size = 0;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (res.statusCode !== 200 || size < 4096) chunks.push(c);
      });
      res.on('end', () =>
        resolve({
          ms: Number(process.hrtime.bigint() - started) / 1e6,
          status: res.statusCode!,
          body: Buffer.concat(chunks),
          location: res.headers.location,
        }),
      );
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

function multipart(bytes: Buffer, name: string): { body: Buffer; type: string } {
  const boundary = `bench${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="content"\r\n\r\nbench\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  return { body: Buffer.concat([head, bytes, Buffer.from(`\r\n--${boundary}--\r\n`)]), type: `multipart/form-data; boundary=${boundary}` };
}

/**
 * s3rver (a dev dependency) in a Node process of its own: measured beside the service, not inside the
 * bench client, and out of tsx, whose loader its web framework does not start under.
 */
async function startS3rver(directory: string): Promise<{ url: string; close(): Promise<void> }> {
  const script = `
    const S3rver = require('s3rver');
    new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: process.argv[1], configureBuckets: [{ name: '${BUCKET}' }] })
      .run().then(({ port }) => console.log(port));`;
  const child = spawn(process.execPath, ['-e', script, directory], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
    child.once('exit', (code) => reject(new Error(`s3rver exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** Uploads `count` files of `size` one after another, then downloads each (following a redirect); the times of each. */
async function measure(ctx: BenchContext, engine: Engine, setup: Setup, size: number, count: number) {
  const database = engine === 'mysql' ? await createDatabase(ctx.options.mysqlServerUrl) : undefined;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-media-'));
  const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: 'silent', MEDIA_RETENTION_DAYS: '0', ...setup.env };
  if (database) env.DATABASE_URL = database.url;
  let service: Awaited<ReturnType<typeof startService>> | undefined;
  try {
    const runtime = await openRuntime(loadConfig(env));
    const site = await runtime.services.access.createSite('Media bench');
    const key = await runtime.services.access.createKey(site.id, ['conversations:write', 'media:read']);
    const conversation = (await runtime.services.window.chat.visitorSay(site.id, 'v-bench', 'hello')).conversation.id;
    await runtime.close();
    service = await startService({ databaseUrl: database?.url, dataDir, port: ctx.nextPort(), env: { ...tlsEnv(ctx), ...env } });
    const auth = { authorization: `Bearer ${key.key}` };
    const bytes = randomBytes(size);
    const uploads: number[] = [];
    const downloads: number[] = [];
    const ids: string[] = [];
    const note = await ctx.quiet();
    for (let i = 0; i < count; i++) {
      const { body, type } = multipart(bytes, `f${i}.bin`);
      const sent = await timedRequest(`${service.url}${API_BASE}/conversations/${conversation}/messages`, {
        method: 'POST',
        headers: { ...auth, 'content-type': type, 'content-length': String(body.length) },
        body,
      });
      if (sent.status !== 201) throw new Error(`upload answered ${sent.status}: ${sent.body?.toString().slice(0, 300)}`);
      uploads.push(sent.ms);
      ids.push(JSON.parse(sent.body!.toString()).data.attachments[0].id);
    }
    for (const id of ids) {
      const first = await timedRequest(`${service.url}${API_BASE}/media/${id}`, { method: 'GET', headers: auth });
      let ms = first.ms;
      if (first.status === 302) {
        const file = await timedRequest(first.location!, { method: 'GET' });
        if (file.status !== 200) throw new Error(`presigned download answered ${file.status}`);
        ms += file.ms;
      } else if (first.status !== 200) throw new Error(`download answered ${first.status}`);
      downloads.push(ms);
    }
    return { uploads, downloads, note };
  } finally {
    await service?.stop();
    await database?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

function row(what: string, size: number, samples: number[], baseline: number | undefined, note: string): BenchRow {
  const s = summarize(samples);
  const rate = size / MiB / (s.p50 / 1000);
  return {
    what,
    value: rate,
    unit: 'MiB/s',
    baseline,
    ratio: baseline === undefined ? undefined : rate / baseline,
    p50Ms: s.p50,
    p99Ms: s.p99,
    note: [`${s.n} files one at a time; rate of the median transfer`, baseline === undefined ? '' : 'ratio = rate / local disk rate', note]
      .filter(Boolean)
      .join('; '),
  };
}

export async function runMediaPart(ctx: BenchContext, engine: Engine): Promise<BenchRow[]> {
  const name = engine === 'mysql' ? 'MariaDB' : 'SQLite';
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-s3rver-'));
  const s3 = await startS3rver(directory);
  const s3Env = (download: string) => ({
    MEDIA_STORE: 's3',
    MEDIA_S3_BUCKET: BUCKET,
    MEDIA_S3_ENDPOINT: s3.url,
    MEDIA_S3_FORCE_PATH_STYLE: 'true',
    MEDIA_DOWNLOAD: download,
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
  });
  const setups: Setup[] = [
    { what: 'local disk', env: {} },
    { what: 's3rver, redirect', env: s3Env('redirect') },
    { what: 's3rver, stream', env: s3Env('stream') },
  ];
  const rows: BenchRow[] = [];
  try {
    for (const size of SIZES) {
      const count = Math.max(5, Math.min(30, Math.round((ctx.options.rounds * 40 * MiB) / size)));
      let local: { up: number; down: number } | undefined;
      for (const setup of setups) {
        ctx.log(`media on ${name}: ${count} files of ${size / MiB} MiB, ${setup.what}`);
        const { uploads, downloads, note } = await measure(ctx, engine, setup, size, count);
        const up = row(`media: upload ${size / MiB} MiB (${setup.what}, ${name})`, size, uploads, local?.up, note);
        const down = row(`media: download ${size / MiB} MiB (${setup.what}, ${name})`, size, downloads, local?.down, note);
        if (!local) local = { up: up.value, down: down.value };
        if (setup.what === 's3rver, stream') rows.push(down);
        else rows.push(up, down);
      }
    }
  } finally {
    await s3.close();
    fs.rmSync(directory, { recursive: true, force: true });
  }
  return rows;
}
