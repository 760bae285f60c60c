/**
 * multipart/form-data bodies (server/http/bodies.ts, busboy directly): each limit and its exact
 * edge, malformed and cut-off bodies, parts in any order; then multipartBody on a bare app over raw
 * sockets: an early refusal that leaves the connection usable, a route that answers a client that
 * is gone, and a client that leaves while its bytes are held back. Nothing may stay in the spool.
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import express, { RequestHandler } from 'express';
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { multipartBody, UploadGuard } from '../../server/http/bodies';
import { errorHandler } from '../../server/http/error-handler';
import { createLogger } from '../../server/platform/logger';

const B = 'mpTestBoundary';
const MAX_FILE = 4096;
const field = (name: string, value: string) => `--${B}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
const filePart = (name: string, filename: string, bytes: string, type = 'application/octet-stream') =>
  `--${B}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n${bytes}\r\n`;
const closing = `--${B}--\r\n`;
const overLimit = (what: string) => `The upload is over a limit (${what}): at most 10 files of 20 MiB each.`;

describe('through the public API (MAX_ATTACHMENT_BYTES 4096)', () => {
  let h: Harness;
  let convId: string;
  beforeAll(async () => {
    h = await createHarness({ env: { MAX_ATTACHMENT_BYTES: String(MAX_FILE) } });
    convId = (await h.visitorSay(h.site.id, 'v-multipart', 'hi')).conversation.id;
  });
  afterAll(() => h.close());

  const spool = () => fs.readdirSync(path.join(h.config.dataDir, 'tmp'));
  const spoolEmpty = () => waitFor('the spool to empty', () => spool().length === 0, 5000);
  const post = (body: string | Buffer, contentType = `multipart/form-data; boundary=${B}`) =>
    request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).set('Content-Type', contentType).send(Buffer.from(body));
  const expectError = (res: request.Response, status: number, code: string, message?: string) => {
    expect([res.status, res.body.error?.code]).toEqual([status, code]);
    if (message !== undefined) expect(res.body.error.message).toBe(message);
  };

  test('a text field after the file is read like one before it', async () => {
    const res = await post(filePart('file', 'a.txt', 'bytes', 'text/plain') + field('content', 'after the file') + field('format', 'markdown') + closing);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ content: 'after the file', format: 'markdown', attachments: [{ name: 'a.txt', mimeType: 'text/plain', size: 5 }] });
    await spoolEmpty();
  });

  test('a file of exactly MAX_ATTACHMENT_BYTES is taken; one byte more is 413 and leaves nothing', async () => {
    const fits = await post(filePart('file', 'fits.bin', 'a'.repeat(MAX_FILE)) + closing);
    expect(fits.status).toBe(201);
    expect(fits.body.data.attachments[0].size).toBe(MAX_FILE);
    const over = await post(
      field('content', 'x') + filePart('file', 'ok.bin', 'b'.repeat(10)) + filePart('file', 'over.bin', 'c'.repeat(MAX_FILE + 1)) + closing,
    );
    expectError(over, 413, 'payload_too_large', overLimit('File too large'));
    await spoolEmpty();
  });

  test('10 files are taken, an 11th is 413 and leaves nothing', async () => {
    const files = (n: number) => Array.from({ length: n }, (_, i) => filePart('file', `f${i}.txt`, `file ${i}`, 'text/plain')).join('');
    const ten = await post(files(10) + closing);
    expect(ten.status).toBe(201);
    expect(ten.body.data.attachments).toHaveLength(10);
    expectError(await post(files(11) + closing), 413, 'payload_too_large', overLimit('Too many files'));
    await spoolEmpty();
  });

  test('more than 10 text fields is 413', async () => {
    const fields = Array.from({ length: 11 }, (_, i) => field(`f${i}`, 'x')).join('');
    expectError(await post(fields + closing), 413, 'payload_too_large', overLimit('Too many fields'));
  });

  test('a text field of 64 KiB or more is 413; a long one below it reaches the validator', async () => {
    expectError(await post(field('content', 'x'.repeat(64 * 1024)) + closing), 413, 'payload_too_large', overLimit('Field value too long'));
    const below = await post(field('content', 'x'.repeat(64 * 1024 - 1)) + closing);
    expectError(below, 400, 'invalid_request');
    expect(below.body.error.details).toEqual([{ path: '/body/content', message: expect.stringMatching(/10000/) }]);
  });

  test('29 parts are read (parts without a Content-Disposition are skipped); a 30th is 413', async () => {
    const junk = (n: number) => Array.from({ length: n }, () => `--${B}\r\nX-Junk: 1\r\n\r\nskipped\r\n`).join('');
    const ok = await post(field('content', 'among junk') + junk(28) + closing);
    expect(ok.status).toBe(201);
    expect(ok.body.data.content).toBe('among junk');
    expectError(await post(field('content', 'too many') + junk(29) + closing), 413, 'payload_too_large', overLimit('Too many parts'));
  });

  test('a part without a field name is 400', async () => {
    const res = await post(`--${B}\r\nContent-Disposition: form-data\r\n\r\nnameless\r\n` + closing);
    expectError(res, 400, 'invalid_request', 'The multipart body is malformed: Field name missing.');
    expect(res.body.error.details).toEqual([{ path: '/body', message: 'Field name missing' }]);
    const file = await post(`--${B}\r\nContent-Disposition: form-data; filename="a.bin"\r\n\r\nnameless\r\n` + closing);
    expectError(file, 400, 'invalid_request', 'The multipart body is malformed: Field name missing.');
    await spoolEmpty();
  });

  test('a file input left empty (a part with an empty file name) is no file', async () => {
    const res = await post(field('content', 'no file chosen') + filePart('file', '', '') + closing);
    expect(res.status).toBe(201);
    expect(res.body.data.attachments).toEqual([]);
  });

  test('a file under another field name is 400 naming it, and its spool file goes', async () => {
    const res = await post(field('content', 'x') + filePart('attachment', 'a.txt', 'bytes') + closing);
    expectError(res, 400, 'invalid_request', 'Unexpected file field "attachment"; send files as "file".');
    expect(res.body.error.details).toEqual([{ path: '/body/attachment', message: 'unexpected file field' }]);
    await spoolEmpty();
  });

  test('a text field sent twice is a list, which the validator refuses', async () => {
    const res = await post(field('content', 'one') + field('content', 'two') + closing);
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.details).toEqual([{ path: '/body/content', message: 'must be string' }]);
  });

  test.each([
    ['without a boundary', 'multipart/form-data', 'Multipart: Boundary not found'],
    ['with an unterminated quoted boundary', 'multipart/form-data; boundary="abc', 'Malformed content type'],
  ])('a Content-Type %s is 400', async (_name, contentType, detail) => {
    const res = await post(field('content', 'x') + closing, contentType);
    expectError(res, 400, 'invalid_request', 'The multipart body is malformed or incomplete.');
    expect(res.body.error.details).toEqual([{ path: '/body', message: detail }]);
  });

  test.each([
    ['inside the first part header', `--${B}\r\nContent-Disposi`],
    ['inside a part header after a file', `${filePart('file', 'a.txt', 'whole')}--${B}\r\nContent-Disposition: form-data; name="fi`],
    ['after a boundary, before any header', `${field('content', 'x')}--${B}`],
    ['inside a file, with no closing boundary', `--${B}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n\r\n${'z'.repeat(3000)}`],
    ['before the first boundary', 'preamble only'],
    ['at once (an empty body)', ''],
  ])('a body that ends %s is 400 and leaves nothing', async (_name, body) => {
    const res = await post(body);
    expectError(res, 400, 'invalid_request', 'The multipart body is malformed or incomplete.');
    await spoolEmpty();
  });

  test('a part header that is not a header is 400', async () => {
    const res = await post(`--${B}\r\nContent-Disposition: form-data; name="content"\r\nbad header line\r\n\r\nx\r\n` + closing);
    expectError(res, 400, 'invalid_request', 'The multipart body is malformed or incomplete.');
    expect(res.body.error.details).toEqual([{ path: '/body', message: 'Malformed part header' }]);
  });
});

/** An answer read off a raw connection. */
interface RawAnswer {
  status: number;
  body: string;
}

/** A plain HTTP connection that reads every answer on it, in order (keep-alive). */
function connect(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  let buffered = Buffer.alloc(0);
  const answers: RawAnswer[] = [];
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (;;) {
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffered.length < end + 4 + length) return;
      answers.push({ status: Number(head.split(' ')[1]), body: buffered.subarray(end + 4, end + 4 + length).toString('utf8') });
      buffered = buffered.subarray(end + 4 + length);
    }
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    socket,
    answers,
    closed,
    write: (bytes: string | Buffer) => new Promise<void>((resolve, reject) => socket.write(bytes, (err) => (err ? reject(err) : resolve()))),
    answer: async (n: number) => {
      await waitFor(`answer ${n}`, () => answers.length >= n, 10_000);
      return answers[n - 1];
    },
  };
}

const uploadHead = (length: number | 'chunked') =>
  `POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${B}\r\n` +
  (length === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`) +
  '\r\n\r\n';

describe('multipartBody on a bare app, over raw connections', () => {
  let dataDir: string;
  let server: http.Server;
  let port: number;
  let route: RequestHandler;
  let guard: UploadGuard | undefined;
  const failures: unknown[] = [];
  const spool = () => fs.readdirSync(path.join(dataDir, 'tmp'));
  const spoolEmpty = () => waitFor('the spool to empty', () => spool().length === 0, 5000);

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'multipart-'));
    const app = express();
    app.get('/ping', (_req, res) => void res.json({ pong: true }));
    app.post(
      '/upload',
      (req, _res, next) => {
        req.uploadGuard = guard;
        next();
      },
      multipartBody(dataDir, 1024 * 1024),
      (req, res, next) => route(req, res, next),
    );
    app.use(((err, req, res, next) => {
      failures.push(err);
      errorHandler(createLogger('silent'))(err, req, res, next);
    }) as express.ErrorRequestHandler);
    server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  beforeEach(() => {
    // each test checks its own leftovers; one that fails leaves none for the next
    for (const name of spool()) fs.rmSync(path.join(dataDir, 'tmp', name), { force: true });
    guard = undefined;
    failures.length = 0;
    route = (req, res) => void res.json({ body: { ...req.body }, files: req.uploadedFiles!.map((f) => [f.originalname, f.size]) });
  });

  test('an upload refused early is answered before its body is sent, and the connection then serves the next request', async () => {
    const files = Array.from({ length: 11 }, (_, i) => filePart('file', `f${i}.txt`, 'small')).join('');
    const rest = Buffer.alloc(2 * 1024 * 1024, 0x61);
    const body = Buffer.concat([
      Buffer.from(files + `--${B}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n\r\n`),
      rest,
      Buffer.from(`\r\n${closing}`),
    ]);
    const conn = connect(port);
    try {
      await conn.write(uploadHead(body.length));
      const cut = body.length - rest.length / 2;
      await conn.write(body.subarray(0, cut));
      const refused = await conn.answer(1);
      expect(refused.status).toBe(413);
      expect(JSON.parse(refused.body).error.message).toBe(overLimit('Too many files'));
      // the rest of the body is read and dropped: the same connection carries the next request
      await conn.write(body.subarray(cut));
      await conn.write('GET /ping HTTP/1.1\r\nHost: localhost\r\n\r\n');
      expect(await conn.answer(2)).toEqual({ status: 200, body: '{"pong":true}' });
    } finally {
      conn.socket.destroy();
    }
    await spoolEmpty();
  });

  test('a route that answers after its client went away: the files stay while it works and go once it answers', async () => {
    let entered!: () => void;
    const inRoute = new Promise<void>((resolve) => (entered = resolve));
    let existedAfterClose: boolean | undefined;
    let answered = false;
    route = (req, res) => {
      entered();
      res.once('close', () => {
        existedAfterClose = fs.existsSync(req.uploadedFiles![0].path);
        setTimeout(() => {
          res.json({ late: true });
          answered = true;
        }, 200);
      });
    };
    const body = field('content', 'x') + filePart('file', 'kept.bin', 'k'.repeat(1000)) + closing;
    const conn = connect(port);
    await conn.write(uploadHead(Buffer.byteLength(body)) + body);
    await inRoute;
    expect(spool()).toHaveLength(1);
    conn.socket.destroy();
    await waitFor('the route to answer', () => answered, 5000);
    expect(existedAfterClose).toBe(true);
    await spoolEmpty();
  });

  test('a client that goes away while a slow upload guard holds its bytes back: no hang, no error, nothing left', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let asked = 0;
    guard = {
      checkPart: () => undefined,
      received: (total) => {
        asked++;
        return total > 64 * 1024 ? held : undefined;
      },
    };
    const conn = connect(port);
    await conn.write(uploadHead(4 * 1024 * 1024));
    await conn.write(
      Buffer.concat([Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"; filename="held.bin"\r\n\r\n`), Buffer.alloc(512 * 1024, 0x68)]),
    );
    await waitFor('the guard to hold the upload', () => asked > 0 && spool().length === 1, 5000);
    conn.socket.destroy();
    await conn.closed;
    release();
    await spoolEmpty();
    await waitFor('the failure to reach the error handler', () => failures.length === 1, 5000);
    expect(failures[0]).toMatchObject({ code: 'invalid_request', message: 'The request body was incomplete.' });
    // the server still serves
    const next = connect(port);
    try {
      await next.write('GET /ping HTTP/1.1\r\nHost: localhost\r\n\r\n');
      expect((await next.answer(1)).status).toBe(200);
    } finally {
      next.socket.destroy();
    }
  });

  test('a chunked body cut off inside a file part: 400, nothing left', async () => {
    const conn = connect(port);
    try {
      const part = Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"; filename="c.bin"\r\n\r\n${'c'.repeat(100_000)}`);
      await conn.write(uploadHead('chunked'));
      await conn.write(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n0\r\n\r\n')]));
      const res = await conn.answer(1);
      expect(res.status).toBe(400);
      expect(JSON.parse(res.body).error.message).toBe('The multipart body is malformed or incomplete.');
    } finally {
      conn.socket.destroy();
    }
    await spoolEmpty();
  });

  test('files and fields as the route sees them, in the order they came', async () => {
    const body =
      filePart('file', 'résumé.txt', 'first') + field('content', 'between') + filePart('file', 'second.bin', 'second!') + field('content', 'again') + closing;
    const conn = connect(port);
    try {
      await conn.write(uploadHead(Buffer.byteLength(body)) + body);
      const res = await conn.answer(1);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual({
        body: { content: ['between', 'again'] },
        files: [
          ['résumé.txt', 5],
          ['second.bin', 7],
        ],
      });
    } finally {
      conn.socket.destroy();
    }
    await spoolEmpty();
  });
});
