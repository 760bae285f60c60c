/**
 * Issue 7, defects 1, 7 and 8 (Content-Type), on the real server process over raw TLS:
 * - a multipart body cut off inside a file part, or a connection dropped mid-upload, used to crash
 *   the whole process (an fs.rm, from a `close` listener, on a spool entry that had no file yet) and leave the
 *   partial spool file (and its descriptor) behind;
 * - a request refused anyway (no conversations:write, a bad or foreign conversation id) used to be
 *   spooled to disk whole before its answer;
 * - a file part's Content-Type over 255 characters was a 500 on MariaDB and stored as sent on SQLite.
 */
import fs from 'node:fs';
import path from 'node:path';
import { waitFor } from '../helpers/wait';
import { bearer, connectRaw, openDescriptorsUnder, RealServer, request, startRealServer } from './upload-faults.real-server';

const BOUNDARY = 'faultdrillboundary';
const MiB = 1024 * 1024;

let server: RealServer;
let tmpDir: string;

beforeAll(async () => {
  server = await startRealServer();
  tmpDir = path.join(server.dataDir, 'tmp');
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

const fieldPart = (name: string, value: string) => `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
const fileHead = (name: string, type = 'application/octet-stream') =>
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: ${type}\r\n\r\n`;
const closing = `\r\n--${BOUNDARY}--\r\n`;

function headers(key: string, conversationId: string, extra: Record<string, string | number>): string {
  const lines = [
    `POST /api/v1/conversations/${conversationId}/messages HTTP/1.1`,
    'Host: localhost',
    `Authorization: Bearer ${key}`,
    `Content-Type: multipart/form-data; boundary=${BOUNDARY}`,
    ...Object.entries(extra).map(([k, v]) => `${k}: ${v}`),
  ];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

const spoolFiles = () => fs.readdirSync(tmpDir);

/** The process is up and serves both the operational endpoint and a normal reply. */
async function expectServerServes() {
  expect(server.process.child.exitCode).toBeNull();
  expect((await request(server, 'GET', '/healthz')).status).toBe(200);
  const reply = await request(
    server,
    'POST',
    `/api/v1/conversations/${server.site.conversationId}/messages`,
    { ...bearer(server.site.writeKey), 'Content-Type': 'application/json' },
    JSON.stringify({ content: 'still here' }),
  );
  expect(reply.status).toBe(201);
}

/** Nothing spooled stays on disk, and no descriptor of the server points into the spool directory. */
async function expectSpoolClean() {
  await waitFor('the spool directory to be empty and closed', () => spoolFiles().length === 0 && openDescriptorsUnder(server, tmpDir).length === 0, 10_000);
}

describe('a multipart body cut off inside a file part', () => {
  test('with a Content-Length that ends early: 400 in the envelope, the process stays up, nothing left in tmp', async () => {
    const body = Buffer.concat([Buffer.from(fieldPart('content', 'cut') + fileHead('cut.bin')), Buffer.alloc(MiB, 0x61)]);
    const conn = await connectRaw(server);
    try {
      await conn.write(headers(server.site.writeKey, server.site.conversationId, { 'Content-Length': body.length }));
      await conn.write(body);
      const res = await conn.answer();
      expect(res.status).toBe(400);
      expect(res.json().error).toEqual(expect.objectContaining({ code: 'invalid_request', message: 'The multipart body is malformed or incomplete.' }));
    } finally {
      conn.socket.destroy();
    }
    await expectServerServes();
    await expectSpoolClean();
  });

  test('with a chunked body whose last chunk comes early: the same 400', async () => {
    const conn = await connectRaw(server);
    try {
      await conn.write(headers(server.site.writeKey, server.site.conversationId, { 'Transfer-Encoding': 'chunked' }));
      const part = Buffer.concat([Buffer.from(fileHead('chunked.bin')), Buffer.alloc(512 * 1024, 0x62)]);
      await conn.write(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n0\r\n\r\n')]));
      const res = await conn.answer();
      expect(res.status).toBe(400);
      expect(res.json().error?.code).toBe('invalid_request');
    } finally {
      conn.socket.destroy();
    }
    await expectServerServes();
    await expectSpoolClean();
  });

  test.each([
    ['destroys the connection', (socket: import('node:tls').TLSSocket) => socket.destroy()],
    ['half-closes the connection', (socket: import('node:tls').TLSSocket) => socket.end()],
  ])('a client that %s while the server writes the file: the process stays up, the partial file and its descriptor go', async (_name, leave) => {
    const conn = await connectRaw(server);
    try {
      await conn.write(headers(server.site.writeKey, server.site.conversationId, { 'Content-Length': 8 * MiB }));
      await conn.write(Buffer.concat([Buffer.from(fieldPart('content', 'dropped') + fileHead('dropped.bin')), Buffer.alloc(2 * MiB, 0x63)]));
      // the server is mid-write: a spool file exists and holds bytes
      await waitFor('a spool file with bytes in it', () =>
        spoolFiles().some((f) => (fs.statSync(path.join(tmpDir, f), { throwIfNoEntry: false })?.size ?? 0) > 0),
      );
      leave(conn.socket);
      await conn.closed();
    } finally {
      conn.socket.destroy();
    }
    await expectSpoolClean();
    await expectServerServes();
  });

  test('a file part cut off after a complete one: both spool files go', async () => {
    const body = Buffer.concat([
      Buffer.from(fieldPart('content', 'two files') + fileHead('whole.bin')),
      Buffer.alloc(256 * 1024, 0x64),
      Buffer.from(`\r\n${fileHead('cut.bin')}`),
      Buffer.alloc(256 * 1024, 0x65),
    ]);
    const conn = await connectRaw(server);
    try {
      await conn.write(headers(server.site.writeKey, server.site.conversationId, { 'Content-Length': body.length }));
      await conn.write(body);
      expect((await conn.answer()).status).toBe(400);
    } finally {
      conn.socket.destroy();
    }
    await expectSpoolClean();
    await expectServerServes();
  });
});

describe('an upload refused anyway is answered before its body is read', () => {
  /**
   * Sends the headers and the first MiB of an 8 MiB upload, never the rest: only a server that
   * answers without reading the body can answer at all. Nothing may appear in the spool directory.
   */
  async function refusedUpload(key: string, conversationId: string) {
    const created: string[] = [];
    const watcher = fs.watch(tmpDir, (_event, name) => created.push(String(name)));
    const conn = await connectRaw(server);
    try {
      await conn.write(headers(key, conversationId, { 'Content-Length': 8 * MiB }));
      await conn.write(Buffer.concat([Buffer.from(fieldPart('content', 'refused') + fileHead('refused.bin')), Buffer.alloc(MiB, 0x66)]));
      const res = await conn.answer(10_000);
      expect(spoolFiles()).toEqual([]);
      expect(created).toEqual([]);
      return res;
    } finally {
      watcher.close();
      conn.socket.destroy();
    }
  }

  test('a key without conversations:write gets 403 insufficient_scope', async () => {
    const res = await refusedUpload(server.site.readKey, server.site.conversationId);
    expect(res.status).toBe(403);
    expect(res.json().error).toEqual(expect.objectContaining({ code: 'insufficient_scope', message: 'This key lacks the conversations:write right.' }));
  });

  test('a conversation id that does not match the document is 400 invalid_request', async () => {
    const res = await refusedUpload(server.site.writeKey, 'conv_not-an-id');
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({
      error: expect.objectContaining({ code: 'invalid_request', details: [{ path: '/params/id', message: expect.stringMatching(/^must match pattern/) }] }),
    });
  });

  test('a conversation of another site, or none, is 404 like a missing one', async () => {
    const foreign = await refusedUpload(server.site.writeKey, server.otherSiteConversationId);
    expect(foreign.status).toBe(404);
    expect(foreign.json().error?.code).toBe('not_found');
    const missing = await refusedUpload(server.site.writeKey, 'conv_00000000000000000000000000');
    expect(missing.status).toBe(404);
    expect(missing.json().error).toEqual(foreign.json().error);
  });

  test('the whole body of a read-only key is still 403, with nothing spooled', async () => {
    const created: string[] = [];
    const watcher = fs.watch(tmpDir, (_event, name) => created.push(String(name)));
    const conn = await connectRaw(server);
    try {
      const body = Buffer.concat([Buffer.from(fieldPart('content', 'all of it') + fileHead('all.bin')), Buffer.alloc(4 * MiB, 0x67), Buffer.from(closing)]);
      await conn.write(headers(server.site.readKey, server.site.conversationId, { 'Content-Length': body.length }));
      await conn.write(body);
      const res = await conn.answer();
      expect(res.status).toBe(403);
      expect(created).toEqual([]);
    } finally {
      watcher.close();
      conn.socket.destroy();
    }
    await expectServerServes();
  });
});

describe("a file part's Content-Type", () => {
  async function uploadWithType(type: string) {
    const body = Buffer.concat([Buffer.from(fieldPart('content', 'typed') + fileHead('typed.bin', type)), Buffer.from('bytes'), Buffer.from(closing)]);
    const conn = await connectRaw(server);
    try {
      await conn.write(headers(server.site.writeKey, server.site.conversationId, { 'Content-Length': body.length }));
      await conn.write(body);
      return await conn.answer();
    } finally {
      conn.socket.destroy();
    }
  }
  const attachmentType = (res: Awaited<ReturnType<typeof uploadWithType>>) =>
    (res.json().data as { attachments: { mimeType: string }[] }).attachments[0].mimeType;

  test('over 255 characters is stored as application/octet-stream, not a 500', async () => {
    const res = await uploadWithType(`application/${'x'.repeat(300)}`);
    expect(res.status).toBe(201);
    expect(attachmentType(res)).toBe('application/octet-stream');
  });

  test('of exactly 255 characters is kept (lower-cased)', async () => {
    const type = `Application/${'y'.repeat(255 - 'application/'.length)}`;
    expect(type).toHaveLength(255);
    const res = await uploadWithType(type);
    expect(res.status).toBe(201);
    expect(attachmentType(res)).toBe(type.toLowerCase());
    await expectSpoolClean();
  });
});
