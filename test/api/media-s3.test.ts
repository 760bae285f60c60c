/**
 * Media on an S3-compatible store (MEDIA_STORE=s3, both engines): uploads through the API and the
 * chat window land in the bucket, a 20 MiB file as a streamed multipart upload; downloads answer a
 * redirect to a presigned URL with our inert headers, or stream the object; retention, visitor-data
 * deletion and the orphan sweep remove objects. A real s3rver behind a fault-injecting proxy gives
 * the faults s3rver cannot: a store that is down or hangs (503 with Retry-After, nothing
 * acknowledged) and an upload cut off midway (the multipart upload is aborted).
 */
import http from 'node:http';
import https from 'node:https';
import { createHash } from 'node:crypto';
import request from 'supertest';
import { S3Client, PutObjectCommand, HeadObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createHarness, Harness, bearer, listenHttps } from '../helpers/harness';
import { startFaultProxy, startS3rver, FaultProxy } from '../helpers/s3';
import { allowOrigins, getToken, ORIGIN, w } from '../window/helpers';
import { runMaintenance } from '../../server/maintenance';
import { startSdkServer } from '../sdk/helpers';

const BUCKET = 'chat-media';
const PREFIX = 'test/media/';
const MiB = 1024 * 1024;

let s3: Awaited<ReturnType<typeof startS3rver>>;
let proxy: FaultProxy;
let h: Harness;
let streamed: Harness;
let direct: S3Client;
const now = Date.now();

// Idle time-outs short enough for the fault tests to be quick, long enough that a loaded CI machine
// (s3rver runs in the test's own event loop) does not stall past them mid-upload.
const TIMEOUT_MS = { redirect: 1000, stream: 2000 } as const;

const envFor = (endpoint: string, download: keyof typeof TIMEOUT_MS) => ({
  MEDIA_STORE: 's3',
  MEDIA_S3_BUCKET: BUCKET,
  MEDIA_S3_ENDPOINT: endpoint,
  MEDIA_S3_FORCE_PATH_STYLE: 'true',
  MEDIA_S3_PREFIX: PREFIX,
  MEDIA_S3_TIMEOUT_MS: String(TIMEOUT_MS[download]),
  MEDIA_DOWNLOAD: download,
  MEDIA_RETENTION_DAYS: '30',
  MAX_ATTACHMENT_BYTES: String(25 * MiB),
});

beforeAll(async () => {
  s3 = await startS3rver(BUCKET);
  proxy = await startFaultProxy(s3.url);
  h = await createHarness({ now: () => now, env: envFor(proxy.url, 'redirect') });
  streamed = await createHarness({ env: envFor(s3.url, 'stream') });
  direct = new S3Client({
    region: 'us-east-1',
    endpoint: s3.url,
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
});
afterEach(() => proxy.setMode('pass'));
afterAll(async () => {
  await h?.close();
  await streamed?.close();
  direct?.destroy();
  await proxy?.close();
  await s3?.close();
});

const stored = async (key: string) =>
  direct.send(new HeadObjectCommand({ Bucket: BUCKET, Key: PREFIX + key })).then(
    () => true,
    (err: { $metadata?: { httpStatusCode?: number } }) => {
      if (err.$metadata?.httpStatusCode === 404) return false;
      throw err;
    },
  );

const binary = (r: request.Test) =>
  r.buffer(true).parse((res, cb) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => cb(null, Buffer.concat(chunks)));
  });

/** GET of a presigned URL (plain http to s3rver): status, headers, body. */
function fetchUrl(url: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

async function reply(harness: Harness, files: { bytes: Buffer; name: string; type: string }[]) {
  const conv = (await harness.visitorSay(harness.site.id, `v-${Math.random()}`, 'hi')).conversation.id;
  let r = request(harness.app).post(`/api/v1/conversations/${conv}/messages`).set(bearer(harness.site.key)).field('content', 'see attached');
  for (const f of files) r = r.attach('file', f.bytes, { filename: f.name, contentType: f.type });
  return { conv, res: await r };
}

/** The multipart upload the proxy saw from request `from` on: its upload ids, part numbers, completed, aborted. */
function multipartOf(from: number) {
  const seen = proxy.seen.slice(from);
  const param = (url: string, name: string) => new URL(url, 'http://proxy').searchParams.get(name);
  const partRequests = seen.filter((r) => r.method === 'PUT' && param(r.url, 'partNumber') !== null);
  const ids = [...new Set(partRequests.map((r) => param(r.url, 'uploadId')))];
  const parts = [...new Set(partRequests.filter((r) => param(r.url, 'uploadId') === ids[0]).map((r) => Number(param(r.url, 'partNumber'))))];
  return {
    ids,
    parts: parts.sort((a, b) => a - b),
    completed: seen.some((r) => r.method === 'POST' && param(r.url, 'uploadId') === ids[0]),
    aborted: seen.some((r) => r.method === 'DELETE' && param(r.url, 'uploadId') === ids[0]),
  };
}

const messagesOf = async (harness: Harness, conv: string) =>
  (await request(harness.app).get(`/api/v1/conversations/${conv}/messages`).set(bearer(harness.site.key))).body.data.length;

describe('the main paths (s3rver)', () => {
  test('an API upload lands in the bucket; its signed link redirects to a presigned URL serving it with inert headers', async () => {
    const bytes = Buffer.from('<html><script>alert(1)</script></html>');
    const { res } = await reply(h, [{ bytes, name: 'page.html', type: 'text/html' }]);
    expect(res.status).toBe(201);
    const file = res.body.data.attachments[0];
    expect(file.mimeType).toBe('text/html');
    expect(await stored(file.id)).toBe(true);

    const link = new URL(file.url);
    const hop = await request(h.app).get(link.pathname + link.search);
    expect(hop.status).toBe(302);
    expect(hop.headers['cache-control']).toBe('no-store');
    expect(hop.headers.etag).toBe(`"${createHash('sha256').update(bytes).digest('hex')}"`);
    const target = new URL(hop.headers.location);
    expect(target.origin).toBe(proxy.url);
    expect(Number(target.searchParams.get('X-Amz-Expires'))).toBe(60);
    const got = await fetchUrl(target.href);
    expect(got.status).toBe(200);
    expect(Buffer.compare(got.body, bytes)).toBe(0);
    // The store answers with the type and disposition we chose, never the declared text/html.
    expect(got.headers['content-type']).toBe('application/octet-stream');
    expect(got.headers['content-disposition']).toBe(`attachment; filename="page.html"; filename*=UTF-8''page.html`);

    // With a key too; If-None-Match is still answered by us.
    const keyed = await request(h.app).get(`/api/v1/media/${file.id}`).set(bearer(h.site.key));
    expect(keyed.status).toBe(302);
    const again = await request(h.app).get(`/api/v1/media/${file.id}`).set(bearer(h.site.key)).set('If-None-Match', hop.headers.etag);
    expect(again.status).toBe(304);
  });

  test('MEDIA_DOWNLOAD=stream: the object is streamed by us with the headers of local files', async () => {
    const bytes = Buffer.from('%PDF-1.4 streamed');
    const { res } = await reply(streamed, [{ bytes, name: 'invoice.pdf', type: 'application/pdf' }]);
    expect(res.status).toBe(201);
    const file = res.body.data.attachments[0];
    const got = await binary(request(streamed.app).get(`/api/v1/media/${file.id}`).set(bearer(streamed.site.key)));
    expect(got.status).toBe(200);
    expect(Buffer.compare(got.body, bytes)).toBe(0);
    expect(got.headers['content-type']).toBe('application/pdf');
    expect(got.headers['content-length']).toBe(String(bytes.length));
    expect(got.headers['x-content-type-options']).toBe('nosniff');
  });

  test('MEDIA_DOWNLOAD=stream: a client that pauses longer than the store time-out still gets the whole file', async () => {
    const bytes = Buffer.alloc(20 * MiB, 3);
    const { res } = await reply(streamed, [{ bytes, name: 'slow.bin', type: 'application/octet-stream' }]);
    expect(res.status).toBe(201);
    const srv = await listenHttps(streamed.app);
    try {
      const received = await new Promise<number>((resolve, reject) => {
        const req = https.get(`${srv.url}/api/v1/media/${res.body.data.attachments[0].id}`, { ca: srv.ca, headers: bearer(streamed.site.key) }, (answer) => {
          let size = 0;
          answer.on('data', (c: Buffer) => (size += c.length));
          answer.on('end', () => resolve(size));
          answer.on('error', reject);
          // Backpressure past MEDIA_S3_TIMEOUT_MS: the store's side sends nothing meanwhile.
          answer.pause();
          setTimeout(() => answer.resume(), 2 * TIMEOUT_MS.stream);
        });
        req.on('error', reject);
      });
      expect(received).toBe(bytes.length);
    } finally {
      await srv.close();
    }
  });

  test('a file from the chat window lands in the bucket', async () => {
    await allowOrigins(h, h.site.id);
    const t = await getToken(h.app, h.site.id);
    const res = await request(h.app)
      .post(w(h.site.id, '/messages'))
      .set('Authorization', `Bearer ${t.token}`)
      .set('Origin', ORIGIN)
      .field('clientMessageId', 'c-window-1')
      .attach('file', Buffer.from('GIF89a window'), { filename: 'w.gif', contentType: 'image/gif' });
    expect(res.status).toBe(201);
    const file = res.body.data.message.attachments[0];
    expect(await stored(file.id)).toBe(true);
  });

  test('a 20 MiB file is a streamed multipart upload (four parts of 5 MiB, one in flight), and comes back whole', async () => {
    const bytes = Buffer.alloc(20 * MiB);
    for (let i = 0; i < bytes.length; i += 4096) bytes.writeUInt32BE(i, i);
    const from = proxy.seen.length;
    proxy.mostPartsInFlight();
    const { res } = await reply(h, [{ bytes, name: 'big.bin', type: 'application/octet-stream' }]);
    expect(res.status).toBe(201);
    // Counted by what reached the store, not by requests: the SDK may retry one on a stale connection.
    const upload = multipartOf(from);
    expect(upload.ids).toHaveLength(1);
    expect(upload.parts).toEqual([1, 2, 3, 4]);
    expect(upload.completed).toBe(true);
    // One part at a time: the upload holds the part it sends and the one it reads, never the file.
    expect(proxy.mostPartsInFlight()).toBe(1);
    const file = res.body.data.attachments[0];
    const location = (await request(h.app).get(`/api/v1/media/${file.id}`).set(bearer(h.site.key))).headers.location;
    const got = await fetchUrl(location);
    expect(got.body.length).toBe(bytes.length);
    expect(createHash('sha256').update(got.body).digest('hex')).toBe(createHash('sha256').update(bytes).digest('hex'));
  });
});

test("the SDK's media.download follows the redirect without sending the key to the bucket", async () => {
  const sdk = await startSdkServer({ env: envFor(proxy.url, 'redirect') });
  try {
    const chat = sdk.client();
    const conv = (await sdk.h.visitorSay(sdk.h.site.id, 'v-sdk', 'hi')).conversation.id;
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
    const message = await chat.messages.create(conv, { content: 'a file', files: [{ data: png, name: 'p.png', type: 'image/png' }] });
    const from = proxy.seen.length;
    const file = await chat.media.download(message.attachments[0].id);
    expect(Buffer.from(file.data).equals(Buffer.from(png))).toBe(true);
    expect(file).toMatchObject({ contentType: 'image/png', filename: 'p.png', size: png.byteLength });
    expect(file.etag).toMatch(/^"[0-9a-f]{64}"$/); // ours, not the bucket's MD5
    expect(proxy.count(from, 'GET', /X-Amz-Signature=/)).toBe(1);
    // The key went to the service only; the bucket got the presigned URL alone.
    const sent = sdk.exchanges.filter((e) => e.method === 'GET' && e.url.includes('/media/'));
    expect(sent.map((e) => [new URL(e.url).origin, Boolean(e.headers.authorization)])).toEqual([
      [sdk.origin, true],
      [proxy.url, false],
    ]);
  } finally {
    await sdk.close();
  }
});

describe('removal', () => {
  test('retention removes the object with the row; its link is 404', async () => {
    const { res } = await reply(h, [{ bytes: Buffer.from('old'), name: 'old.txt', type: 'text/plain' }]);
    const file = res.body.data.attachments[0];
    expect(await stored(file.id)).toBe(true);
    const result = await runMaintenance(h.runtime.services, now + 31 * 24 * 3600_000);
    expect(result.expiredMedia).toBeGreaterThanOrEqual(1);
    expect(await stored(file.id)).toBe(false);
    expect((await request(h.app).get(`/api/v1/media/${file.id}`).set(bearer(h.site.key))).status).toBe(404);
  });

  test("deleting a visitor's data removes its objects", async () => {
    const said = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-forget-me', 'mine', {
      files: [{ buffer: Buffer.from('private'), originalName: 'p.txt', mimeType: 'text/plain' }],
    });
    const id = said.message.attachments[0].id;
    expect(await stored(id)).toBe(true);
    const result = await h.runtime.services.visitors.deletion.deleteVisitor({ manager: null, clientIp: null }, h.site.id, 'v-forget-me');
    expect(result.removed.files).toBe(1);
    expect(await stored(id)).toBe(false);
  });

  test("the orphan sweep removes old objects without a row, and keeps rows' objects, new ones and what is not ours", async () => {
    const said = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-keep', 'kept', {
      files: [{ buffer: Buffer.from('kept'), originalName: 'k.txt', mimeType: 'text/plain' }],
    });
    const kept = said.message.attachments[0].id;
    const put = (key: string) => direct.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: 'x' }));
    await put(`${PREFIX}med_orphanfromacrash`);
    await put(`${PREFIX}not-a-media-file`);
    await put('outside/med_othersprefix');
    // Everything is an hour old once the sweep's clock is two hours ahead.
    const result = await runMaintenance(h.runtime.services, Date.now() + 2 * 3600_000);
    expect(result.removedOrphans).toBe(1);
    const left = (await direct.send(new ListObjectsV2Command({ Bucket: BUCKET }))).Contents!.map((o) => o.Key);
    expect(left).not.toContain(`${PREFIX}med_orphanfromacrash`);
    expect(left).toEqual(expect.arrayContaining([`${PREFIX}${kept}`, `${PREFIX}not-a-media-file`, 'outside/med_othersprefix']));
  });
});

describe('faults (through the proxy)', () => {
  test('a store that is down: uploads and downloads answer 503 with Retry-After, nothing is acknowledged, /readyz says so', async () => {
    const { res: before } = await reply(h, [{ bytes: Buffer.from('there'), name: 'a.txt', type: 'text/plain' }]);
    const file = before.body.data.attachments[0];
    proxy.setMode('down');
    const { conv, res } = await reply(h, [{ bytes: Buffer.from('lost'), name: 'b.txt', type: 'text/plain' }]);
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expect(res.body.error).toMatchObject({ code: 'service_unavailable', message: 'The media store is not answering; retry later.' });
    expect(await messagesOf(h, conv)).toBe(1); // the visitor's, not the reply

    // The chat window's upload is refused the same way, in its own document's envelope.
    await allowOrigins(h, h.site.id);
    const t = await getToken(h.app, h.site.id);
    const fromWindow = await request(h.app)
      .post(w(h.site.id, '/messages'))
      .set('Authorization', `Bearer ${t.token}`)
      .set('Origin', ORIGIN)
      .field('clientMessageId', 'c-window-down')
      .attach('file', Buffer.from('GIF89a lost'), { filename: 'l.gif', contentType: 'image/gif' });
    expect([fromWindow.status, fromWindow.headers['retry-after'], fromWindow.body.error.code]).toEqual([503, '5', 'service_unavailable']);

    const down = await request(h.app).get(`/api/v1/media/${file.id}`).set(bearer(h.site.key));
    expect(down.status).toBe(503);
    expect(down.headers['retry-after']).toBe('5');
    const ready = await request(h.app).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.error.details).toEqual([{ path: 'mediaStore', message: expect.stringMatching(/^does not answer/) }]);

    // Housekeeping goes on without the bucket; its sweep is retried on the next run.
    const housekeeping = await runMaintenance(h.runtime.services, Date.now() + 2 * 3600_000);
    expect(housekeeping).toMatchObject({ removedOrphans: 0, mediaStoreFailed: true });
    expect(housekeeping).toHaveProperty('inboxActivity');

    proxy.setMode('pass');
    expect((await request(h.app).get('/readyz')).body.data.checks.mediaStore).toBe('ok');
    expect((await request(h.app).get(`/api/v1/media/${file.id}`).set(bearer(h.site.key))).status).toBe(302);
  });

  test('a store that hangs: the upload answers 503 within its time-outs, not never', async () => {
    proxy.setMode('stall');
    const from = proxy.seen.length;
    const { conv, res } = await reply(h, [{ bytes: Buffer.from('slow'), name: 's.txt', type: 'text/plain' }]);
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    // Bounded by attempts, not by the clock: the SDK tried twice (MEDIA_S3_TIMEOUT_MS each) and gave up.
    const attempts = proxy.count(from, 'PUT', /./);
    expect(attempts).toBeGreaterThanOrEqual(1);
    expect(attempts).toBeLessThanOrEqual(2);
    expect(await messagesOf(h, conv)).toBe(1);
    // /readyz names the bucket, within its own time, and keeps the database's check apart.
    const ready = await request(h.app).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.error.details).toEqual([{ path: 'mediaStore', message: 'does not answer (timeout)' }]);
  });

  test('an upload cut off midway is aborted (AbortMultipartUpload sent) and leaves no object nor message', async () => {
    proxy.setMode('cut-second-part');
    const from = proxy.seen.length;
    const before = (await direct.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: PREFIX }))).KeyCount;
    const { conv, res } = await reply(h, [{ bytes: Buffer.alloc(12 * MiB, 7), name: 'cut.bin', type: 'application/octet-stream' }]);
    expect(res.status).toBe(503);
    const upload = multipartOf(from);
    expect(upload.ids).toHaveLength(1);
    expect(upload.parts).toEqual([1, 2]);
    // s3rver answers 405 to the abort: the proxy saw it sent, which is what we can check here.
    expect(upload.aborted).toBe(true);
    expect(upload.completed).toBe(false);
    expect(await messagesOf(h, conv)).toBe(1);
    expect((await direct.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: PREFIX }))).KeyCount).toBe(before);
  });
});
