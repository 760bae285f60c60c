/**
 * Issue 7, defect 2, on the real server process: a download the client abandons must close the
 * file. With `stream.pipe(res)` the read stream (and its descriptor) stayed open forever once the
 * client went away, so signed links alone could drive the process to EMFILE.
 */
import { once } from 'node:events';
import { createHash } from 'node:crypto';
import path from 'node:path';
import https from 'node:https';
import { waitFor } from '../helpers/wait';
import { bearer, connectRaw, openDescriptorsUnder, RealServer, startRealServer } from './upload-faults.real-server';

const FILE = Buffer.alloc(6 * 1024 * 1024, 0x5a);
const ABANDONED = 24;

let server: RealServer;
let mediaFile: string;
let attachment: { id: string; url: string; size: number };

beforeAll(async () => {
  server = await startRealServer({ file: { buffer: FILE, originalName: 'large.bin', mimeType: 'application/octet-stream' } });
  attachment = server.site.attachment!;
  mediaFile = path.join(server.dataDir, 'media', attachment.id);
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

/** Starts a download, waits for the first bytes of the answer, then drops the connection. */
async function abandonDownload(target: string, headers: Record<string, string>) {
  const conn = await connectRaw(server);
  try {
    const lines = [`GET ${target} HTTP/1.1`, 'Host: localhost', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
    const firstChunk = once(conn.socket, 'data');
    await conn.write(`${lines.join('\r\n')}\r\n\r\n`);
    const [chunk] = (await firstChunk) as [Buffer];
    expect(chunk.toString('latin1')).toMatch(/^HTTP\/1\.1 200 /);
  } finally {
    conn.socket.destroy();
  }
}

function download(target: string): Promise<{ status: number; sha256: string; size: number }> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      { host: '127.0.0.1', servername: 'localhost', port: server.port, path: target, ca: server.ca, agent: false, timeout: 15_000 },
      (res) => {
        const hash = createHash('sha256');
        let size = 0;
        res.on('data', (d: Buffer) => {
          hash.update(d);
          size += d.length;
        });
        res.on('end', () => resolve({ status: res.statusCode!, sha256: hash.digest('hex'), size }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer in 15 s')));
    req.on('error', reject);
  });
}

test(`${ABANDONED} abandoned downloads (signed link and key) leave no descriptor of the file open`, async () => {
  const link = new URL(attachment.url);
  for (let i = 0; i < ABANDONED; i++) {
    if (i % 2 === 0) await abandonDownload(link.pathname + link.search, {});
    else await abandonDownload(`/api/v1/media/${attachment.id}`, bearer(server.site.readKey));
  }
  const openRightAfter = openDescriptorsUnder(server, mediaFile).length;
  if (process.env.DRILL_REPORT) console.log(`descriptors of the media file right after ${ABANDONED} abandoned downloads: ${openRightAfter}`);
  await waitFor('every descriptor of the media file to be closed', () => openDescriptorsUnder(server, mediaFile).length === 0, 10_000);

  // and the server still serves the whole file
  const whole = await download(link.pathname + link.search);
  expect(whole).toEqual({ status: 200, size: FILE.length, sha256: createHash('sha256').update(FILE).digest('hex') });
  await waitFor('the completed download to close the file', () => openDescriptorsUnder(server, mediaFile).length === 0, 10_000);
});
