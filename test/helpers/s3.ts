import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';

// s3rver ships no types: the little of it the tests use.
const S3rver = require('s3rver') as new (opts: Record<string, unknown>) => { run(): Promise<AddressInfo>; close(): Promise<void> };

/**
 * A real S3-compatible server for one test file: s3rver on a free port with its own directory and
 * one bucket. It serves multipart uploads, ranges and presigned GETs, but checks no signature, cannot
 * abort a multipart upload (405) and gives plain MD5 ETags (docs/operations.md, Media storage).
 * The SDK's default credential chain reads the AWS_* variables set here (s3rver takes any).
 */
export async function startS3rver(bucket: string) {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 's3rver-'));
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  return {
    url: `http://127.0.0.1:${port}`,
    directory,
    async close() {
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * How the proxy treats requests: `pass` forwards them; `down` drops each connection as it comes (a
 * store that is down); `stall` takes requests and never answers (a store that hangs); `cut-second-part`
 * forwards everything except part 2 of a multipart upload (every attempt of it), whose connection
 * it drops midway (an upload cut off).
 */
export type FaultMode = 'pass' | 'down' | 'stall' | 'cut-second-part';

export interface SeenRequest {
  method: string;
  url: string;
}

/**
 * A fault-injecting proxy in front of an S3-compatible server: every request it saw is in `seen`
 * (method and URL), so a test can assert what the SDK sent (UploadPart, AbortMultipartUpload) even
 * where the server behind cannot act on it.
 */
export async function startFaultProxy(target: string) {
  const upstream = new URL(target);
  const seen: SeenRequest[] = [];
  const state = { mode: 'pass' as FaultMode };
  const parts = { active: 0, most: 0 };
  const stalled = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url! });
    const isPart = req.method === 'PUT' && /[?&]partNumber=/.test(req.url!) && /[?&]uploadId=/.test(req.url!);
    const isSecondPart = isPart && /[?&]partNumber=2(&|$)/.test(req.url!);
    if (state.mode === 'down') {
      req.socket.destroy();
      return;
    }
    if (state.mode === 'stall') {
      stalled.add(res);
      req.resume();
      return;
    }
    if (state.mode === 'cut-second-part' && isSecondPart) {
      // Take part of the body, then drop the connection as a failing network would.
      let taken = 0;
      req.on('data', (chunk: Buffer) => {
        taken += chunk.length;
        if (taken > 64 * 1024) req.socket.destroy();
      });
      return;
    }
    if (isPart) {
      parts.active++;
      parts.most = Math.max(parts.most, parts.active);
      // Counted out when the answer's last byte is handed to the socket ('finish'), before the
      // client can read it and send the next part; 'close' covers an answer that never finished.
      let counted = true;
      const done = () => {
        if (counted) parts.active--;
        counted = false;
      };
      res.once('finish', done);
      res.once('close', done);
    }
    const forward = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    setMode(mode: FaultMode) {
      state.mode = mode;
      if (mode !== 'stall') {
        for (const res of stalled) res.destroy();
        stalled.clear();
      }
    },
    /** The most UploadParts that were in flight at once since the last call (what an upload holds in memory). */
    mostPartsInFlight() {
      const most = parts.most;
      parts.most = parts.active;
      return most;
    },
    /** Requests seen from `from` on that match. */
    count(from: number, method: string, pattern: RegExp) {
      return seen.slice(from).filter((r) => r.method === method && pattern.test(r.url)).length;
    },
    async close() {
      for (const res of stalled) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type FaultProxy = Awaited<ReturnType<typeof startFaultProxy>>;
