/**
 * Visitor files against the real server process (server/main.ts), on SQLite and on MariaDB: the
 * site's setting changed by the operator CLI while it runs, the per-client-IP budgets over several
 * visitors (refused before the body, and while a chunked body arrives), the site's quotas, the
 * media retention run by the server's own maintenance, and a real full disk (tmpfs) while spooling
 * and while storing: 507 in the envelope and no partial file left.
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connectRaw, RealServer, request, startRealServer } from './upload-faults.real-server';
import { spawnTs } from '../helpers/spawn';
import { createDb } from '../../server/db/knex';
import { DAY_MS, secondsUntilNextUtcDay } from '../../server/media/quota';
import { leftAfterCleanUp, waitFor } from '../helpers/wait';

const ORIGIN = 'https://shop.example';
const KB = 1000;
let seq = 0;
const cid = () => `rs-${seq++}`;

interface FilePart {
  name?: string;
  type?: string;
  size: number;
}

function multipart(files: FilePart[], content?: string) {
  const boundary = `----rs${randomBytes(8).toString('hex')}`;
  let body = `--${boundary}\r\nContent-Disposition: form-data; name="clientMessageId"\r\n\r\n${cid()}\r\n`;
  if (content !== undefined) body += `--${boundary}\r\nContent-Disposition: form-data; name="content"\r\n\r\n${content}\r\n`;
  for (const f of files) {
    body += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${f.name ?? 'f.bin'}"\r\nContent-Type: ${f.type ?? 'application/octet-stream'}\r\n\r\n${'a'.repeat(f.size)}\r\n`;
  }
  return { body: body + `--${boundary}--\r\n`, contentType: `multipart/form-data; boundary=${boundary}` };
}

async function windowToken(server: RealServer, siteId: string): Promise<string> {
  const r = await request(server, 'POST', `/window/v1/sites/${siteId}/token`, { Origin: ORIGIN, 'Content-Type': 'application/json' }, '{}');
  expect(r.status).toBe(201);
  return (r.json().data as { token: string }).token;
}

function sendFiles(server: RealServer, siteId: string, token: string, clientIp: string, files: FilePart[], content?: string) {
  const m = multipart(files, content);
  return request(
    server,
    'POST',
    `/window/v1/sites/${siteId}/messages`,
    { Authorization: `Bearer ${token}`, 'Content-Type': m.contentType, 'X-Forwarded-For': clientIp },
    m.body,
  );
}

/** The request line and headers of an upload only: an answer that comes now came before the body. */
async function answerBeforeBody(server: RealServer, siteId: string, token: string, clientIp: string, fileSize: number) {
  const m = multipart([{ size: fileSize }]);
  const conn = await connectRaw(server);
  try {
    await conn.write(
      `POST /window/v1/sites/${siteId}/messages HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nX-Forwarded-For: ${clientIp}\r\n` +
        `Content-Type: ${m.contentType}\r\nContent-Length: ${Buffer.byteLength(m.body)}\r\n\r\n`,
    );
    return await conn.answer(10_000);
  } finally {
    conn.socket.destroy();
  }
}

const uploadsIn = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => n.startsWith('upload_')) : []);

/** Spool files go when the answer has been sent: give the removal a moment. */
async function noSpoolFiles(server: RealServer) {
  expect(await leftAfterCleanUp(() => uploadsIn(path.join(server.dataDir, 'tmp')))).toEqual([]);
}

describe('server A: the setting, the per-client-IP budgets and a full disk', () => {
  let server: RealServer;
  const sites: Record<'settings' | 'budgets' | 'disk', string> = { settings: '', budgets: '', disk: '' };
  const mounts: string[] = [];

  beforeAll(async () => {
    server = await startRealServer({
      env: {
        TRUST_PROXY: 'loopback',
        VISITOR_MESSAGES_PER_HOUR_PER_ADDRESS: '5',
        VISITOR_FILE_BYTES_PER_HOUR_PER_ADDRESS: String(1000 * KB),
      },
      prepare: async (rt) => {
        for (const key of Object.keys(sites) as (keyof typeof sites)[]) {
          sites[key] = (await rt.services.access.createSite(`visitor files: ${key}`)).id;
          await rt.services.access.setAllowedOrigins(sites[key], [ORIGIN]);
        }
      },
    });
  }, 90_000);

  afterAll(async () => {
    await server?.process.kill();
    for (const dir of mounts) execFileSync('umount', [dir]);
    await server?.stop();
  });

  async function admin(...args: string[]) {
    const p = spawnTs('server/cli/admin.ts', [...args, '--json'], {
      DATA_DIR: server.dataDir,
      DATABASE_URL: server.database.databaseUrl ?? '',
      LOG_LEVEL: 'silent',
    });
    expect(await p.exited()).toBe(0);
    return JSON.parse(p.stdout());
  }

  test('the operator turns files off and limits their types with the CLI; the running server follows at once', async () => {
    const site = sites.settings;
    const token = await windowToken(server, site);
    const clientIp = '203.0.113.10';
    expect((await admin('site', 'update', '--site', site, '--visitor-files', 'off')).visitorFiles).toEqual({ enabled: false, types: null });
    const off = await sendFiles(server, site, token, clientIp, [{ name: 'r.pdf', type: 'application/pdf', size: 10 }]);
    expect(off.status).toBe(415);
    expect(off.json().error).toMatchObject({ code: 'unsupported_media_type', message: 'This site does not take files from visitors.' });

    const updated = await admin('site', 'update', '--site', site, '--visitor-files', 'on', '--visitor-file-types', 'image/*,application/pdf');
    expect(updated.visitorFiles).toEqual({ enabled: true, types: ['image/*', 'application/pdf'] });
    const listed = await admin('site', 'list');
    expect(listed.sites.find((s: { id: string }) => s.id === site).visitorFiles).toEqual({ enabled: true, types: ['image/*', 'application/pdf'] });

    const js = await sendFiles(server, site, token, clientIp, [{ name: 'x.js', type: 'text/javascript', size: 10 }]);
    expect(js.status).toBe(415);
    expect(js.json().error?.code).toBe('unsupported_media_type');
    const png = await sendFiles(server, site, token, clientIp, [{ name: 'a.png', type: 'image/png', size: 10 }]);
    expect(png.status).toBe(201);
    await noSpoolFiles(server);
  }, 60_000);

  test('messages an hour per client IP, over five new visitors and a sixth', async () => {
    const codes: number[] = [];
    for (let i = 0; i < 6; i++) {
      const token = await windowToken(server, sites.budgets);
      const r = await request(
        server,
        'POST',
        `/window/v1/sites/${sites.budgets}/messages`,
        { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', 'X-Forwarded-For': '203.0.113.20' },
        JSON.stringify({ content: `hello ${i}`, clientMessageId: cid() }),
      );
      codes.push(r.status);
      if (r.status === 429) {
        expect(r.json().error?.code).toBe('quota_exceeded');
        expect(Number(r.headers['retry-after'])).toBeGreaterThan(60);
      }
    }
    expect(codes).toEqual([201, 201, 201, 201, 201, 429]);
  });

  test('file bytes an hour per client IP: refused before the body from Content-Length, by another visitor', async () => {
    const clientIp = '203.0.113.30';
    expect((await sendFiles(server, sites.budgets, await windowToken(server, sites.budgets), clientIp, [{ size: 700 * KB }])).status).toBe(201);
    const early = await answerBeforeBody(server, sites.budgets, await windowToken(server, sites.budgets), clientIp, 500 * KB);
    expect(early.status).toBe(429);
    expect(early.json().error).toMatchObject({ code: 'quota_exceeded' });
    expect(early.json().error?.message).toMatch(/^Too many file bytes from this network in the last hour/);
    expect(Number(early.headers['retry-after'])).toBeGreaterThan(60);
    await noSpoolFiles(server);
  });

  test('file bytes an hour per client IP: a chunked body (no length) is stopped as its bytes pass the budget, leaving nothing', async () => {
    const clientIp = '203.0.113.40';
    expect((await sendFiles(server, sites.budgets, await windowToken(server, sites.budgets), clientIp, [{ size: 700 * KB }])).status).toBe(201);
    const token = await windowToken(server, sites.budgets);
    const mediaBefore = fs.readdirSync(path.join(server.dataDir, 'media')).length;
    const m = multipart([{ size: 400 * KB }]);
    const conn = await connectRaw(server);
    try {
      await conn.write(
        `POST /window/v1/sites/${sites.budgets}/messages HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nX-Forwarded-For: ${clientIp}\r\n` +
          `Content-Type: ${m.contentType}\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      const body = Buffer.from(m.body);
      for (let at = 0; at < body.length && !conn.socket.destroyed; at += 16 * 1024) {
        const chunk = body.subarray(at, at + 16 * 1024);
        await conn.write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])).catch(() => undefined);
      }
      await conn.write('0\r\n\r\n').catch(() => undefined);
      const answer = await conn.answer(10_000);
      expect(answer.status).toBe(429);
      expect(answer.json().error?.code).toBe('quota_exceeded');
    } finally {
      conn.socket.destroy();
    }
    await noSpoolFiles(server);
    expect(fs.readdirSync(path.join(server.dataDir, 'media'))).toHaveLength(mediaBefore);
  });

  test('a full disk while spooling and while storing: 507 insufficient_storage, no partial file, and the service goes on', async () => {
    const tmp = path.join(server.dataDir, 'tmp');
    const media = path.join(server.dataDir, 'media');
    for (const dir of [tmp, media]) {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', dir]);
      mounts.push(dir);
    }
    fs.writeFileSync(path.join(media, 'ballast'), Buffer.alloc(200 * 1024)); // leaves about 56 KiB for files
    const clientIp = '203.0.113.50';
    const token = await windowToken(server, sites.disk);

    const spooling = await sendFiles(
      server,
      sites.disk,
      token,
      clientIp,
      [{ name: 'big.pdf', type: 'application/pdf', size: 300 * KB }],
      'too big for the spool',
    );
    expect(spooling.status).toBe(507);
    expect(spooling.json().error).toEqual({ code: 'insufficient_storage', message: 'The service has no room to store this right now; retry later.' });
    await noSpoolFiles(server);

    const storing = await sendFiles(
      server,
      sites.disk,
      token,
      clientIp,
      [{ name: 'mid.pdf', type: 'application/pdf', size: 100 * KB }],
      'too big for the media',
    );
    expect(storing.status).toBe(507);
    expect(storing.json().error?.code).toBe('insufficient_storage');
    await noSpoolFiles(server);
    expect(fs.readdirSync(media)).toEqual(['ballast']);

    const small = await sendFiles(server, sites.disk, token, clientIp, [{ name: 'small.pdf', type: 'application/pdf', size: 20 * KB }], 'fits');
    expect(small.status).toBe(201);
    const sent = small.json().data as unknown as { conversation: { id: string }; message: { attachments: { id: string }[] } };
    expect(fs.readdirSync(media).sort()).toEqual([sent.message.attachments[0].id, 'ballast'].sort());
    // Neither refusal left a message behind.
    const history = await request(server, 'GET', `/window/v1/sites/${sites.disk}/conversations/${sent.conversation.id}/messages`, {
      Authorization: `Bearer ${token}`,
    });
    expect((history.json().data as unknown as { content: string }[]).map((m) => m.content)).toEqual(['fits']);
    // Log lines go out in batches (server/platform/logger.ts), and a loaded machine delays the pipe.
    await waitFor('the ENOSPC log line', () => /"code":"ENOSPC"/.test(server.process.stdout() + server.process.stderr()), 10_000);
  });
});

describe("server B: a site's quotas and the media retention", () => {
  let server: RealServer;
  let shift = 0;
  const sites = { old: '', full: '', fresh: '' };
  let oldKey = '';
  let oldConversation = '';
  let oldAttachment = '';

  beforeAll(async () => {
    server = await startRealServer({
      env: {
        VISITOR_FILE_BYTES_PER_DAY_PER_SITE: String(600 * KB),
        VISITOR_FILE_BYTES_PER_SITE: String(1000 * KB),
        MEDIA_RETENTION_DAYS: '30',
      },
      now: () => Date.now() + shift,
      prepare: async (rt) => {
        const { access } = rt.services;
        const chat = rt.services.window.chat;
        const file = (size: number, name: string) => ({ buffer: Buffer.alloc(size, 0x61), originalName: name, mimeType: 'application/pdf' });
        for (const key of Object.keys(sites) as (keyof typeof sites)[]) {
          sites[key] = (await access.createSite(`quotas: ${key}`)).id;
          await access.setAllowedOrigins(sites[key], [ORIGIN]);
        }
        oldKey = (await access.createKey(sites.old, ['conversations:read', 'media:read'])).key;
        shift = -40 * DAY_MS;
        const old = await chat.visitorSay(sites.old, 'v-old', 'an old receipt', { files: [file(50 * KB, 'old.pdf')] });
        oldConversation = old.conversation.id;
        oldAttachment = old.message.attachments[0].id;
        // 800 of 1000 kB stored, over two earlier days (each within the day's 600 kB).
        shift = -3 * DAY_MS;
        await chat.visitorSay(sites.full, 'v-full', 'one', { files: [file(400 * KB, 'a.pdf')] });
        shift = -2 * DAY_MS;
        await chat.visitorSay(sites.full, 'v-full', 'two', { files: [file(400 * KB, 'b.pdf')] });
        shift = 0;
      },
    });
  }, 90_000);

  afterAll(() => server?.stop());

  test('bytes a day per site: 429 quota_exceeded until the next UTC day, answered before the body', async () => {
    const token = await windowToken(server, sites.fresh);
    expect((await sendFiles(server, sites.fresh, token, '127.0.0.1', [{ size: 400 * KB }])).status).toBe(201);
    const early = await answerBeforeBody(server, sites.fresh, token, '127.0.0.1', 300 * KB);
    expect(early.status).toBe(429);
    expect(early.json().error?.code).toBe('quota_exceeded');
    expect(Math.abs(Number(early.headers['retry-after']) - secondsUntilNextUtcDay(Date.now()))).toBeLessThan(30);
    expect((await sendFiles(server, sites.fresh, token, '127.0.0.1', [{ size: 150 * KB }])).status).toBe(201);
  });

  test('bytes stored per site: 507 insufficient_storage once the site holds its quota', async () => {
    const token = await windowToken(server, sites.full);
    const over = await sendFiles(server, sites.full, token, '127.0.0.1', [{ size: 300 * KB }]);
    expect(over.status).toBe(507);
    expect(over.json().error).toEqual({
      code: 'insufficient_storage',
      message: "The site's storage for files from visitors is full; older files make room as they expire.",
    });
    expect((await sendFiles(server, sites.full, token, '127.0.0.1', [{ size: 150 * KB }])).status).toBe(201);
    await noSpoolFiles(server);
  });

  test("the server's maintenance removes files past the retention, their rows and their bytes; the message shows no link", async () => {
    await server.process.waitFor(/"expiredMedia":1[,}].*maintenance done|maintenance done.*"expiredMedia":1[,}]/, 45_000);
    expect(fs.existsSync(path.join(server.dataDir, 'media', oldAttachment))).toBe(false);
    const messages = await request(server, 'GET', `/api/v1/conversations/${oldConversation}/messages`, { Authorization: `Bearer ${oldKey}` });
    expect(messages.status).toBe(200);
    const data = messages.json().data as unknown as { content: string; attachments: unknown[] }[];
    expect(data.find((m) => m.content === 'an old receipt')!.attachments).toEqual([]);
    expect((await request(server, 'GET', `/api/v1/media/${oldAttachment}`, { Authorization: `Bearer ${oldKey}` })).status).toBe(404);
    const db = createDb({ databaseUrl: server.database.databaseUrl, dataDir: server.dataDir });
    try {
      expect(await db('attachments').where({ id: oldAttachment }).first()).toBeUndefined();
      expect(Number((await db('site_visitor_files').where({ site_id: sites.old }).first('stored_bytes')).stored_bytes)).toBe(0);
      // Files within the retention stay.
      expect(Number((await db('attachments').where({ site_id: sites.full }).count({ n: '*' }).first())!.n)).toBeGreaterThanOrEqual(2);
    } finally {
      await db.destroy();
    }
  }, 60_000);
});
