/**
 * Visitor files through the chat window's entry (the real app, both engines): the site's setting
 * (off, allowed types) refused before a byte is spooled, the site's quotas charged with the files
 * (also under concurrency), the per-client-IP budgets, retention, inert serving and clean names.
 * The real server process, a full disk and raw sockets: test/api/visitor-files.real-server.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { allowOrigins, auth, getToken, ORIGIN, w } from './helpers';
import { runMaintenance } from '../../server/maintenance';
import { DAY_MS } from '../../server/media/quota';
import { migrationSource } from '../../server/db/migrations';
import { leftAfterCleanUp } from '../helpers/wait';

let h: Harness;
let now = Date.UTC(2026, 2, 10, 9, 0, 0);
const KB = 1000;

beforeAll(async () => {
  h = await createHarness({
    now: () => now,
    env: {
      TRUST_PROXY: 'loopback', // each test names its client IP in X-Forwarded-For
      VISITOR_MESSAGES_PER_HOUR_PER_ADDRESS: '6',
      VISITOR_FILE_BYTES_PER_HOUR_PER_ADDRESS: String(600 * KB),
      VISITOR_FILE_BYTES_PER_DAY_PER_SITE: String(500 * KB),
      VISITOR_FILE_BYTES_PER_SITE: String(800 * KB),
      MEDIA_RETENTION_DAYS: '30',
    },
  });
});
afterAll(() => h?.close());

let seq = 0;
const cid = () => `c-${seq++}`;
let clientIpSeq = 1;
/** A client IP of its own, so one test's budgets do not spend another's. */
const newClientIp = () => `198.51.100.${clientIpSeq++}`;

async function newSite() {
  const site = await h.newSite();
  await allowOrigins(h, site.id);
  return site;
}

interface Upload {
  name?: string;
  type?: string;
  bytes: Buffer;
}
function send(siteId: string, token: string, clientIp: string, files: Upload[], content?: string) {
  let r = request(h.app).post(w(siteId, '/messages')).set(auth(token)).set('Origin', ORIGIN).set('X-Forwarded-For', clientIp).field('clientMessageId', cid());
  if (content !== undefined) r = r.field('content', content);
  for (const f of files) r = r.attach('file', f.bytes, { filename: f.name ?? 'f.bin', contentType: f.type ?? 'application/octet-stream' });
  return r;
}
const bytes = (n: number) => Buffer.alloc(n, 0x61);
const spoolDir = () => path.join(h.config.dataDir, 'tmp');
const mediaDir = () => path.join(h.config.dataDir, 'media');

/** Spool files this test's requests create (write streams opened under DATA_DIR/tmp). */
function watchSpool() {
  const opened: string[] = [];
  const original = fs.createWriteStream;
  const spy = jest.spyOn(fs, 'createWriteStream').mockImplementation(((p: fs.PathLike, o?: unknown) => {
    if (String(p).startsWith(spoolDir())) opened.push(String(p));
    return original(p, o as never);
  }) as typeof fs.createWriteStream);
  return { opened, restore: () => spy.mockRestore() };
}

async function spoolEmpty() {
  expect(await leftAfterCleanUp(() => fs.readdirSync(spoolDir()))).toEqual([]);
}

describe("the site's setting", () => {
  test('files off: refused with 415 before a byte is spooled, text still goes through, and on again', async () => {
    const site = await newSite();
    const t = await getToken(h.app, site.id);
    const clientIp = newClientIp();
    await h.runtime.services.visitorFiles.update(site.id, { enabled: false });
    const spool = watchSpool();
    try {
      // A body too large to be text: refused from its Content-Length.
      const big = await send(site.id, t.token, clientIp, [{ bytes: bytes(200 * KB) }]);
      expect(big.status).toBe(415);
      expect(big.body.error).toMatchObject({ code: 'unsupported_media_type', message: 'This site does not take files from visitors.' });
      // A small one: refused at its first file part's header.
      const small = await send(site.id, t.token, clientIp, [{ name: 'a.txt', type: 'text/plain', bytes: bytes(10) }], 'with a file');
      expect(small.status).toBe(415);
      expect(spool.opened).toEqual([]);
    } finally {
      spool.restore();
    }
    const text = await send(site.id, t.token, clientIp, [], 'just text');
    expect(text.status).toBe(201);
    await h.runtime.services.visitorFiles.update(site.id, { enabled: true });
    expect((await send(site.id, t.token, clientIp, [{ bytes: bytes(10) }])).status).toBe(201);
  });

  test('allowed types: another type is refused before it is spooled, an allowed one is stored', async () => {
    const site = await newSite();
    const t = await getToken(h.app, site.id);
    const clientIp = newClientIp();
    await h.runtime.services.visitorFiles.update(site.id, { types: 'image/*,application/pdf' });
    const spool = watchSpool();
    try {
      const js = await send(site.id, t.token, clientIp, [
        { name: 'a.png', type: 'image/png', bytes: bytes(10) },
        { name: 'x.js', type: 'text/javascript', bytes: bytes(10) },
      ]);
      expect(js.status).toBe(415);
      expect(js.body.error.message).toBe('Files of type text/javascript are not accepted here; this site takes image/*, application/pdf.');
      expect(js.body.error.details).toEqual([{ path: '/body/file', message: 'type text/javascript is not allowed for this site' }]);
      expect(spool.opened).toHaveLength(1); // the PNG before it, removed with the refusal
    } finally {
      spool.restore();
    }
    await spoolEmpty();
    const ok = await send(site.id, t.token, clientIp, [
      { name: 'a.png', type: 'image/png', bytes: bytes(10) },
      { name: 'b.pdf', type: 'application/pdf', bytes: bytes(10) },
    ]);
    expect(ok.status).toBe(201);
    expect(ok.body.data.message.attachments.map((a: { mimeType: string }) => a.mimeType)).toEqual(['image/png', 'application/pdf']);
    // The operator's CLI path (`visitor say`) follows the same setting.
    await expect(
      h.runtime.services.window.chat.visitorSay(site.id, 'vis_cli', 'x', { files: [{ buffer: bytes(5), originalName: 'x.html', mimeType: 'text/html' }] }),
    ).rejects.toMatchObject({ code: 'unsupported_media_type' });
    await h.runtime.services.visitorFiles.update(site.id, { types: 'any' });
    expect(await h.runtime.services.visitorFiles.settings(site.id)).toEqual({ enabled: true, types: null });
  });

  test('bad patterns and unknown sites are refused', async () => {
    await expect(h.runtime.services.visitorFiles.update(h.site.id, { types: 'text/html;x' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(h.runtime.services.visitorFiles.update('ws_00000000000000000000000000', { enabled: false })).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe("the site's quotas", () => {
  test('bytes a day: 429 quota_exceeded until the next UTC day, before the body when its length says so', async () => {
    const site = await newSite();
    const t = await getToken(h.app, site.id);
    expect((await send(site.id, t.token, newClientIp(), [{ bytes: bytes(300 * KB) }])).status).toBe(201);
    const spool = watchSpool();
    let over: request.Response;
    try {
      over = await send(site.id, t.token, newClientIp(), [{ bytes: bytes(300 * KB) }]);
      expect(spool.opened).toEqual([]);
    } finally {
      spool.restore();
    }
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe('quota_exceeded');
    expect(Number(over.headers['retry-after'])).toBe(15 * 3600); // 09:00 UTC
    expect(over.headers['access-control-allow-origin']).toBe(ORIGIN);
    // Small files still fit in what is left today.
    expect((await send(site.id, t.token, newClientIp(), [{ bytes: bytes(150 * KB) }])).status).toBe(201);
    now += DAY_MS;
    const again = await getToken(h.app, site.id, { visitorCredential: t.visitorCredential });
    expect((await send(site.id, again.token, newClientIp(), [{ bytes: bytes(300 * KB) }])).status).toBe(201);
  });

  test('bytes stored: 507 insufficient_storage; simultaneous uploads cannot both take the last room', async () => {
    const site = await newSite();
    const t = await getToken(h.app, site.id);
    expect((await send(site.id, t.token, newClientIp(), [{ bytes: bytes(400 * KB) }])).status).toBe(201);
    now += DAY_MS; // a new day: only the stored quota binds (400 of 800 kB left)
    const again = await getToken(h.app, site.id, { visitorCredential: t.visitorCredential });
    const racing = await Promise.all(Array.from({ length: 4 }, () => send(site.id, again.token, newClientIp(), [{ bytes: bytes(150 * KB) }])));
    expect(racing.map((r) => r.status).sort()).toEqual([201, 201, 507, 507]);
    const refused = racing.find((r) => r.status === 507)!;
    expect(refused.body.error).toEqual({
      code: 'insufficient_storage',
      message: "The site's storage for files from visitors is full; older files make room as they expire.",
    });
    const stored = await h.runtime.db('attachments').where({ site_id: site.id }).sum({ n: 'size' }).first();
    expect(Number(stored!.n)).toBe(700 * KB);
    await spoolEmpty();
    expect(fs.readdirSync(mediaDir()).length).toBe(Number((await h.runtime.db('attachments').count({ n: '*' }).first())!.n));
  });

  test("a new site's first files, sent at once, are all stored and all counted", async () => {
    const site = await newSite();
    const visitors = await Promise.all(Array.from({ length: 5 }, () => getToken(h.app, site.id)));
    const sent = await Promise.all(visitors.map((t) => send(site.id, t.token, newClientIp(), [{ bytes: bytes(10 * KB) }])));
    expect(sent.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    const row = await h.runtime.db('site_visitor_files').where({ site_id: site.id }).first();
    expect(Number(row.stored_bytes)).toBe(50 * KB);
    expect(Number(row.day_bytes)).toBe(50 * KB);
  });

  test("the API's files do not count against the visitors' quotas", async () => {
    const site = await newSite();
    const said = await h.runtime.services.window.chat.visitorSay(site.id, 'vis_api', 'hi');
    const reply = await request(h.app)
      .post(`/api/v1/conversations/${said.conversation.id}/messages`)
      .set(bearer(site.key))
      .attach('file', bytes(700 * KB), { filename: 'catalogue.pdf', contentType: 'application/pdf' });
    expect(reply.status).toBe(201);
    const t = await getToken(h.app, site.id);
    expect((await send(site.id, t.token, newClientIp(), [{ bytes: bytes(400 * KB) }])).status).toBe(201);
  });
});

describe("a client IP's budgets, over all its visitors", () => {
  test('messages an hour: every visitor from the client IP shares them', async () => {
    const site = await newSite();
    const clientIp = newClientIp();
    const codes: number[] = [];
    for (let i = 0; i < 7; i++) {
      const t = await getToken(h.app, site.id); // a new visitor each time
      const r = await request(h.app)
        .post(w(site.id, '/messages'))
        .set(auth(t.token))
        .set('X-Forwarded-For', clientIp)
        .send({ content: `hi ${i}`, clientMessageId: cid() });
      codes.push(r.status);
      if (r.status === 429) {
        expect(r.body.error.code).toBe('quota_exceeded');
        expect(r.body.error.message).toMatch(/^Too many messages from this network in the last hour; retry in \d+ s\.$/);
        expect(Number(r.headers['retry-after'])).toBeGreaterThan(60);
      }
    }
    expect(codes).toEqual([201, 201, 201, 201, 201, 201, 429]);
    const other = await getToken(h.app, site.id);
    expect(
      (
        await request(h.app)
          .post(w(site.id, '/messages'))
          .set(auth(other.token))
          .set('X-Forwarded-For', newClientIp())
          .send({ content: 'x', clientMessageId: cid() })
      ).status,
    ).toBe(201);
  });

  test('file bytes an hour: refused from Content-Length before the body, or while it arrives; unused budget goes back', async () => {
    const siteA = await newSite();
    const siteB = await newSite();
    const clientIp = newClientIp();
    const a = await getToken(h.app, siteA.id);
    const b = await getToken(h.app, siteB.id);
    // Text in a multipart body costs no file budget.
    expect((await send(siteA.id, a.token, clientIp, [], 'x'.repeat(9000))).status).toBe(201);
    expect((await send(siteA.id, a.token, clientIp, [{ bytes: bytes(400 * KB) }])).status).toBe(201);
    let spool = watchSpool();
    let over: request.Response;
    try {
      over = await send(siteB.id, b.token, clientIp, [{ bytes: bytes(300 * KB) }]); // another site, the same network
      expect(spool.opened).toEqual([]);
    } finally {
      spool.restore();
    }
    expect(over.status).toBe(429);
    expect(over.body.error.message).toMatch(/^Too many file bytes from this network in the last hour; retry in \d+ s\.$/);
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(3000);
    expect((await send(siteB.id, b.token, clientIp, [{ bytes: bytes(150 * KB) }])).status).toBe(201);

    // 50 kB left: a 100 kB file passes the check of its length (most of a small body may be text)
    // and is stopped once its bytes pass the budget; what it wrote is removed.
    const filesBefore = fs.readdirSync(mediaDir()).length;
    spool = watchSpool();
    try {
      over = await send(siteB.id, b.token, clientIp, [{ bytes: bytes(100 * KB) }]);
      expect(spool.opened).toHaveLength(1);
    } finally {
      spool.restore();
    }
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe('quota_exceeded');
    await spoolEmpty();
    expect(fs.readdirSync(mediaDir())).toHaveLength(filesBefore);
  });
});

describe('requests no quota can ever take', () => {
  test('files larger than a whole hour of the client IP or a whole day of the site: 413, never a 429 whose retry fails again', async () => {
    const site = await newSite();
    const t = await getToken(h.app, site.id);
    // 550 kB: over the site's 500 kB a day, within the client IP's 600 kB an hour.
    const overDay = await send(site.id, t.token, newClientIp(), [{ bytes: bytes(550 * KB) }]);
    expect([overDay.status, overDay.body.error.code, overDay.headers['retry-after']]).toEqual([413, 'payload_too_large', undefined]);
    expect(overDay.body.error.message).toMatch(/the site takes in a day/);
    // 700 kB: its length alone is over the client IP's hour, refused before the body.
    const overHour = await send(site.id, t.token, newClientIp(), [{ bytes: bytes(700 * KB) }]);
    expect([overHour.status, overHour.body.error.code]).toEqual([413, 'payload_too_large']);
    expect(overHour.body.error.message).toMatch(/one network may send in an hour/);
    await spoolEmpty();
  });

  test('a multipart send to a malformed site id is a client error in the envelope, and spends no quota', async () => {
    const clientIp = newClientIp();
    for (const site of ['nope', 'WS_01ARZ3NDEKTSV4RRFFQ69G5FAV']) {
      for (let i = 0; i < 8; i++) {
        const res = await request(h.app)
          .post(`/window/v1/sites/${site}/messages`)
          .set('X-Forwarded-For', clientIp)
          .field('clientMessageId', cid())
          .attach('file', bytes(10), { filename: 'a.txt', contentType: 'text/plain' });
        expect(res.status).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
        expect(res.body.error.code).not.toBe('quota_exceeded');
      }
    }
  });
});

describe('what is stored and served', () => {
  test('bidi and other invisible characters are stripped from the stored name', async () => {
    const site = await newSite();
    const t = await getToken(h.app, site.id);
    const res = await send(site.id, t.token, newClientIp(), [
      { name: 'invoice\u202Efdp.exe', type: 'application/pdf', bytes: bytes(10) },
      { name: 'a\u2066b\u200Bc\u2028.txt', type: 'text/plain', bytes: bytes(5) },
    ]);
    expect(res.status).toBe(201);
    expect(res.body.data.message.attachments.map((a: { name: string }) => a.name)).toEqual(['invoicefdp.exe', 'abc.txt']);
    const rows = await h.runtime.db('attachments').where({ message_id: res.body.data.message.id }).orderBy('name').pluck('name');
    expect(rows).toEqual(['abc.txt', 'invoicefdp.exe']);
  });

  test('a script is served as octet-stream with nosniff, by key and by signed link; the declared type stays in the record', async () => {
    const site = await newSite();
    const t = await getToken(h.app, site.id);
    const res = await send(site.id, t.token, newClientIp(), [
      { name: 'x.js', type: 'text/javascript', bytes: Buffer.from('window.ran = true') },
      { name: 'i.svg', type: 'image/svg+xml', bytes: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>') },
      { name: 'p.png', type: 'image/png', bytes: bytes(8) },
    ]);
    expect(res.status).toBe(201);
    const [js, svg, png] = res.body.data.message.attachments;
    expect([js.mimeType, svg.mimeType, png.mimeType]).toEqual(['text/javascript', 'image/svg+xml', 'image/png']);
    for (const [att, served] of [
      [js, 'application/octet-stream'],
      [svg, 'application/octet-stream'],
      [png, 'image/png'],
    ]) {
      const link = new URL(att.url);
      for (const r of [await request(h.app).get(link.pathname + link.search), await request(h.app).get(`/api/v1/media/${att.id}`).set(bearer(site.key))]) {
        expect(r.status).toBe(200);
        expect(r.headers['content-type']).toBe(served);
        expect(r.headers['x-content-type-options']).toBe('nosniff');
      }
    }
  });
});

describe('retention', () => {
  test('files older than MEDIA_RETENTION_DAYS go with their rows; the message lists none and frees its bytes', async () => {
    const site = await newSite();
    let t = await getToken(h.app, site.id);
    const old = await send(site.id, t.token, newClientIp(), [{ name: 'old.pdf', type: 'application/pdf', bytes: bytes(450 * KB) }], 'my old receipt');
    expect(old.status).toBe(201);
    const oldAttachment = old.body.data.message.attachments[0];
    const conversationId = old.body.data.conversation.id;
    const reply = await request(h.app)
      .post(`/api/v1/conversations/${conversationId}/messages`)
      .set(bearer(site.key))
      .attach('file', bytes(20), { filename: 'r.txt', contentType: 'text/plain' });
    expect(reply.status).toBe(201);

    now += 29 * DAY_MS;
    t = await getToken(h.app, site.id, { visitorCredential: t.visitorCredential });
    const recent = await send(site.id, t.token, newClientIp(), [{ name: 'new.pdf', type: 'application/pdf', bytes: bytes(300 * KB) }], 'a new one');
    expect(recent.status).toBe(201);
    // 750 of 800 kB stored: another 300 kB does not fit yet.
    expect((await send(site.id, t.token, newClientIp(), [{ bytes: bytes(300 * KB) }])).status).toBe(507);

    now += 2 * DAY_MS;
    t = await getToken(h.app, site.id, { visitorCredential: t.visitorCredential });
    const swept = await runMaintenance(h.runtime.services, now);
    expect(swept.expiredMedia).toBeGreaterThanOrEqual(2); // these two, and older files of other tests
    for (const id of [oldAttachment.id, reply.body.data.attachments[0].id]) {
      expect(fs.existsSync(path.join(mediaDir(), id))).toBe(false);
      expect(await h.runtime.db('attachments').where({ id }).first()).toBeUndefined();
    }
    const history = await request(h.app)
      .get(w(site.id, `/conversations/${conversationId}/messages`))
      .set(auth(t.token));
    expect(history.status).toBe(200);
    const byContent = Object.fromEntries(history.body.data.map((m: { content: string; attachments: unknown[] }) => [m.content, m.attachments.length]));
    expect(byContent).toEqual({ 'my old receipt': 0, '': 0, 'a new one': 1 });
    const link = new URL(oldAttachment.url);
    expect((await request(h.app).get(`/api/v1/media/${oldAttachment.id}`).set(bearer(site.key))).status).toBe(404);
    expect((await request(h.app).get(link.pathname + link.search)).status).toBe(401); // its link expired long ago too
    // The site's stored bytes went down with them: 300 kB more fit again.
    expect((await send(site.id, t.token, newClientIp(), [{ bytes: bytes(300 * KB) }])).status).toBe(201);
    expect((await runMaintenance(h.runtime.services, now)).expiredMedia).toBe(0);
  });
});

describe('migration 007', () => {
  // Last in the file: it rolls the table back and forth under the other tests' data.
  test('counts the visitor files already stored per site, and rolls back', async () => {
    const db = h.runtime.db;
    const sums = await db('attachments')
      .join('messages', 'messages.id', 'attachments.message_id')
      .where('messages.direction', 'incoming')
      .groupBy('attachments.site_id')
      .select('attachments.site_id', db.raw('sum(attachments.size) as bytes'));
    expect(sums.length).toBeGreaterThan(0); // what the retention test left
    await db.migrate.down({ migrationSource, name: '007_visitor_files' });
    expect(await db.schema.hasTable('site_visitor_files')).toBe(false);
    await db.migrate.latest({ migrationSource });
    const rows = await db('site_visitor_files').select('site_id', 'stored_bytes', 'files_enabled', 'allowed_types');
    const stored = (list: { site_id: string; bytes?: unknown; stored_bytes?: unknown }[]) =>
      Object.fromEntries(list.map((r) => [r.site_id, Number(r.bytes ?? r.stored_bytes)]));
    expect(stored(rows)).toEqual(stored(sums));
    expect(rows.every((r: { files_enabled: unknown; allowed_types: unknown }) => Boolean(r.files_enabled) && r.allowed_types === null)).toBe(true);
  });
});
