import type { Request, RequestHandler } from 'express';
import express from 'express';
import multer from 'multer';
import path from 'node:path';
import fs from 'node:fs';
import { pipeline, Readable, Transform } from 'node:stream';
import { ApiError } from '../platform/errors';
import { ulidBody } from '../platform/ids';

/**
 * What a route may check of a multipart upload while it arrives (the chat window's visitor-file
 * setting and quotas), set as `req.uploadGuard` before multipartBody runs.
 */
export interface UploadGuard {
  /** A file part's declared type, before a byte of it is written: throws (an ApiError) to refuse the request. */
  checkPart(mimeType: string): void;
  /**
   * The request's file bytes so far, before they are written: returns when they may be, or a
   * promise that rejects (an ApiError) to stop the upload; what was written of it is removed.
   */
  received(totalBytes: number): void | Promise<void>;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      uploadGuard?: UploadGuard;
    }
  }
}

/** JSON bodies: 64 KiB, strict UTF-8 (invalid bytes are refused rather than silently replaced). */
export const jsonBody = express.json({
  limit: 64 * 1024,
  type: ['application/json', 'application/*+json'],
  verify: (_req, _res, buf) => {
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(buf);
    } catch {
      const err = new Error('The request body is not valid UTF-8.') as Error & { type: string };
      err.type = 'entity.verify.failed';
      throw err;
    }
  },
});

/**
 * multipart/form-data for replies with files: spooled to DATA_DIR/tmp (never whole in memory),
 * limits as README.md lists them (Errors: 413 payload_too_large). Every spool file a request wrote is removed when its answer is sent or its
 * connection goes away, including a file that was still being written (see RequestSpool).
 */
export function multipartBody(dataDir: string, maxFileBytes: number): RequestHandler {
  const tmp = path.join(dataDir, 'tmp');
  fs.mkdirSync(tmp, { recursive: true });
  sweepStaleSpoolFiles(tmp);
  const spools = new WeakMap<Request, RequestSpool>();
  const storage: multer.StorageEngine = {
    _handleFile: (req, file, cb) => spools.get(req)!.write(file.stream, file.mimetype, cb),
    _removeFile: (_req, file, cb) => fs.rm(file.path, { force: true }, (err) => cb(err)),
  };
  const upload = multer({
    storage,
    // busboy flags a file that reaches the limit, so allow one byte more and check `size` below.
    limits: { fileSize: maxFileBytes + 1, files: 10, fields: 10, fieldSize: 64 * 1024, parts: 30, headerPairs: 100 },
  }).any();
  return (req, res, next) => {
    if (!req.is('multipart/form-data')) return next();
    const spool = new RequestSpool(tmp, req.uploadGuard);
    spools.set(req, spool);
    let handedOver = false;
    // A client that drops the connection mid-upload: busboy never ends the part being written (and
    // multer waits for it forever), so the spool stops it and removes what it wrote. Once the files
    // are handed to the handler, they stay until it answers, even to a connection that is gone.
    res.once('close', () => {
      if (!handedOver || res.writableEnded) spool.release();
    });
    // Library patch 7 (docs/library-patches.md).
    const end = res.end;
    res.end = function endThenRelease(this: typeof res, ...args: Parameters<typeof end>) {
      try {
        return end.apply(this, args);
      } finally {
        spool.release();
      }
    } as typeof end;
    // busboy reports a malformed part header as an 'error' but goes on parsing the chunk it holds,
    // and may hand out one more file part that then never ends (multer has unpiped the request),
    // while multer waits for every part before it answers: the request would hang. So on the
    // parser's error the spool refuses further parts, the parser is destroyed (which ends its
    // current part), and what is still unfinished when it closes is stopped: a 400, not a hang.
    // Library patch 8 (docs/library-patches.md).
    const pipe = req.pipe;
    req.pipe = function pipeToParser<T extends NodeJS.WritableStream>(this: Request, parser: T, options?: { end?: boolean }): T {
      req.pipe = pipe;
      const events = parser as unknown as NodeJS.EventEmitter & { destroy(err?: Error): void };
      // Destroyed on the next tick, once busboy has left the chunk it is parsing: the failure its
      // destroy reports again is emitted on a tick too, so it still reaches multer's listener, which
      // multer removes only on a later setImmediate (an 'error' without a listener would crash).
      let destroying = false;
      events.on('error', (err: Error) => {
        spool.refuseParts(err);
        if (destroying) return;
        destroying = true;
        process.nextTick(() => events.destroy(err));
      });
      events.once('close', () => spool.stopUnfinishedParts());
      return pipe.call(this, parser, options) as T;
    } as typeof req.pipe;
    upload(req, res, (err?: unknown) => {
      if (err) return next(uploadError(err));
      handedOver = true;
      const files = (req.files as Express.Multer.File[]) ?? [];
      const wrong = files.find((f) => f.fieldname !== 'file');
      if (wrong) return next(new ApiError('invalid_request', `Unexpected file field "${wrong.fieldname}"; send files as "file".`, [{ path: `/body/${wrong.fieldname}`, message: 'unexpected file field' }]));
      for (const f of files) f.originalname = utf8FileName(f.originalname);
      const big = files.find((f) => f.size > maxFileBytes);
      if (big) return next(new ApiError('payload_too_large', `The file "${big.originalname}" is larger than ${maxFileBytes} bytes.`));
      next();
    });
  };
}

/** Raised into the file streams of a request whose connection is gone. */
class UploadAbandoned extends Error {
  constructor() {
    super('The client went away during the upload.');
  }
}

/**
 * The spool files of one request. multer 2's disk storage pipes busboy's file stream into a write
 * stream with `pipe`, which neither closes the write stream nor reports when the part is cut off
 * (the descriptor and a partial file stay behind, and multer never learns of them); here each part
 * is written with `pipeline`, and its path is known from the moment the file is created.
 */
class RequestSpool {
  private readonly written = new Set<string>();
  private readonly inFlight = new Set<Readable>();
  private released = false;
  private parserError: Error | undefined;
  /** File bytes of the request so far, over all its parts. */
  private total = 0;

  constructor(
    private readonly dir: string,
    private readonly guard?: UploadGuard,
  ) {}

  write(part: Readable, mimeType: string, cb: (error?: unknown, info?: Partial<Express.Multer.File>) => void): void {
    if (this.released || this.parserError) {
      part.resume();
      return cb(this.parserError ?? new UploadAbandoned());
    }
    try {
      this.guard?.checkPart(mimeType);
    } catch (err) {
      part.resume();
      return cb(err);
    }
    const filename = `upload_${ulidBody()}`;
    const target = path.join(this.dir, filename);
    this.inFlight.add(part);
    const out = fs.createWriteStream(target, { flags: 'wx', mode: 0o600 });
    const done = (err: NodeJS.ErrnoException | null) => {
      this.inFlight.delete(part);
      if (!err && this.released) {
        // the connection went away while the last bytes were flushed: nobody will read this file
        removeQuietly(target);
        return cb(new UploadAbandoned());
      }
      if (!err) {
        this.written.add(target);
        return cb(null, { destination: this.dir, filename, path: target, size: out.bytesWritten });
      }
      // The write stream may still be open (or opening) when pipeline reports: remove the file
      // only once its descriptor is closed, so a late open cannot re-create it after the removal.
      const removeAndReport = () => fs.rm(target, { force: true }, () => cb(err));
      if (out.closed) removeAndReport();
      else out.once('close', removeAndReport);
    };
    if (this.guard) pipeline(part, this.meter(this.guard), out, done);
    else pipeline(part, out, done);
  }

  /** Passes each chunk on once the guard lets the request's running total be written. */
  private meter(guard: UploadGuard): Transform {
    return new Transform({
      transform: (chunk: Buffer, _encoding, next) => {
        this.total += chunk.length;
        let verdict: void | Promise<void>;
        try {
          verdict = guard.received(this.total);
        } catch (err) {
          return next(err as Error);
        }
        if (verdict) verdict.then(() => next(null, chunk), next);
        else next(null, chunk);
      },
    });
  }

  /** The parser failed: parts it hands out from now on are drained and refused, never spooled. */
  refuseParts(err: Error): void {
    this.parserError ??= err;
  }

  /** Parts the parser will never finish (it is gone) fail, so multer stops waiting for them. */
  stopUnfinishedParts(): void {
    for (const part of this.inFlight) if (!part.readableEnded) part.destroy(this.parserError ?? new Error('The multipart body ended inside a file part.'));
  }

  /** Stops the parts still being written (their files go as they close) and removes the rest. */
  release(): void {
    if (this.released) return;
    this.released = true;
    for (const part of this.inFlight) part.destroy(new UploadAbandoned());
    for (const file of this.written) removeQuietly(file);
  }
}

function removeQuietly(file: string) {
  fs.rm(file, { force: true }, () => undefined);
}

/**
 * Spool files older than any request can live (a crash or SIGKILL mid-upload leaves them). Younger
 * ones may belong to another process sharing DATA_DIR, so they stay.
 */
function sweepStaleSpoolFiles(dir: string, olderThanMs = 60 * 60 * 1000) {
  fs.readdir(dir, (err, names) => {
    if (err) return;
    for (const name of names.filter((n) => n.startsWith('upload_'))) {
      const file = path.join(dir, name);
      fs.stat(file, (statErr, st) => {
        if (!statErr && Date.now() - st.mtimeMs > olderThanMs) removeQuietly(file);
      });
    }
  });
}

/**
 * multer's failures as answers: its limits go to the error handler (413); a body cut off or
 * malformed (busboy's plain errors, a dropped connection) is the client's 400; errors from the
 * disk (an `errno`) stay server errors: a full disk (ENOSPC, EDQUOT) is the error handler's 507,
 * EACCES a 500.
 */
function uploadError(err: unknown): unknown {
  if (err instanceof ApiError) return err;
  if (err instanceof multer.MulterError) {
    if (err.code.startsWith('LIMIT_')) return err;
    return new ApiError('invalid_request', `The multipart body is malformed: ${err.message}.`, [{ path: '/body', message: err.message }]);
  }
  if (err instanceof UploadAbandoned || (err as { code?: string }).code === 'ECONNRESET') {
    return new ApiError('invalid_request', 'The request body was incomplete.');
  }
  if (err instanceof Error && (err as NodeJS.ErrnoException).errno === undefined) {
    return new ApiError('invalid_request', 'The multipart body is malformed or incomplete.', [{ path: '/body', message: err.message }]);
  }
  return err;
}

/**
 * busboy (under multer 2) reads a plain `filename="..."` as latin1, but browsers and fetch send
 * raw UTF-8 bytes there (RFC 7578). Re-read the name as UTF-8 when its bytes are valid UTF-8; a
 * name that already holds characters beyond latin1 (from an RFC 5987 `filename*`) is kept.
 */
export function utf8FileName(name: string): string {
  if (![...name].some((c) => c.charCodeAt(0) > 0x7f) || [...name].some((c) => c.charCodeAt(0) > 0xff)) return name;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(name, 'latin1'));
  } catch {
    return name; // genuinely latin1
  }
}

/**
 * After the body is parsed, the Content-Type is cut to its media type for the OpenAPI validator:
 * express-openapi-validator compiles and caches per Content-Type string and never evicts, so a
 * client minting `application/json; x=<unique>` on every request would grow memory without bound.
 * multipart keeps its boundary (the validator strips it itself).
 */
export const canonicalContentType: RequestHandler = (req, _res, next) => {
  const type = req.headers['content-type'];
  if (type && !/^multipart\/form-data\b/i.test(type)) req.headers['content-type'] = type.split(';')[0].trim().toLowerCase();
  next();
};

