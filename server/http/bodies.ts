import type { Request, RequestHandler, Response } from 'express';
import express from 'express';
import busboy from 'busboy';
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

/** A file part of a multipart body, spooled whole to disk. */
export interface UploadedFile {
  /** The part's field name (always `file` once handed to a route). */
  fieldname: string;
  /** The name the client gave, read as UTF-8 where its bytes are (see utf8FileName). */
  originalname: string;
  /** The part's Content-Transfer-Encoding, as sent (`7bit` when none). */
  encoding: string;
  /** The part's declared type (`text/plain` when none). */
  mimetype: string;
  /** The spool file; removed once the request is answered. */
  path: string;
  size: number;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      uploadGuard?: UploadGuard;
      /** The file parts of a multipart body, in the order they came (multipartBody). */
      uploadedFiles?: UploadedFile[];
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

/** A multipart body's limits beyond the file size (docs/api.md: Errors, 413 payload_too_large). */
const LIMITS = { files: 10, fields: 10, fieldSize: 64 * 1024, parts: 30 };

/** A limit of the multipart body passed: 413, naming which. */
const overLimit = (what: string) => new ApiError('payload_too_large', `The upload is over a limit (${what}): at most 10 files of 20 MiB each.`);

/**
 * multipart/form-data for replies with files: text parts become `req.body`, file parts are
 * spooled to DATA_DIR/tmp (never whole in memory) and listed in `req.uploadedFiles`, within the
 * limits docs/api.md lists (Errors: 413 payload_too_large). Every spool file a request wrote is
 * removed when its answer is sent or its connection goes away, including a file that was still
 * being written (see RequestSpool).
 */
export function multipartBody(dataDir: string, maxFileBytes: number): RequestHandler {
  const tmp = path.join(dataDir, 'tmp');
  fs.mkdirSync(tmp, { recursive: true });
  sweepStaleSpoolFiles(tmp);
  return (req, res, next) => {
    if (!req.is('multipart/form-data')) return next();
    receiveMultipart(req, res, next, tmp, maxFileBytes);
  };
}

function receiveMultipart(req: Request, res: Response, next: (err?: unknown) => void, tmp: string, maxFileBytes: number): void {
  let parser: busboy.Busboy;
  try {
    // busboy flags a file that reaches `fileSize`, so it is one byte over the largest file taken.
    parser = busboy({ headers: req.headers, limits: { ...LIMITS, fileSize: maxFileBytes + 1 } });
  } catch (err) {
    // no boundary, or a Content-Type busboy cannot read
    return next(uploadError(err));
  }
  const body: Record<string, string | string[]> = Object.create(null);
  req.body = body;
  // In the order the parts came; a slot is filled once its file is on disk.
  const files: (UploadedFile | undefined)[] = [];
  const spool = new RequestSpool(tmp, req.uploadGuard, () => settle());
  let failure: unknown;
  let parsed = false;
  let settled = false;
  let handedOver = false;

  /**
   * The request fails: the parser gets no more of the body (the rest is read and dropped, so the
   * connection can carry the answer), what is being written stops and what was written goes,
   * and the answer waits only for that. Parts the parser still hands out are drained, never
   * spooled. A failure after the files were handed over is the route's, not ours.
   */
  const fail = (err: unknown) => {
    if (failure !== undefined || handedOver) return;
    failure = err;
    req.unpipe(parser);
    req.resume();
    // Destroyed once busboy has left the chunk it is parsing: it still works on the part it
    // reported from (it marks a file truncated after its 'limit'). Its destroy ends that part.
    process.nextTick(() => {
      spool.release(err);
      parser.destroy();
    });
    settle();
  };

  /** Answers once nothing of the request is still being written or removed. */
  const settle = () => {
    if (settled || spool.busy) return;
    if (failure !== undefined) {
      if (!spool.released) return; // release is due on the next tick
      settled = true;
      return next(uploadError(failure));
    }
    if (!parsed) return;
    settled = true;
    handedOver = true;
    const received = files as UploadedFile[];
    const wrong = received.find((f) => f.fieldname !== 'file');
    if (wrong)
      return next(
        new ApiError('invalid_request', `Unexpected file field "${wrong.fieldname}"; send files as "file".`, [
          { path: `/body/${wrong.fieldname}`, message: 'unexpected file field' },
        ]),
      );
    req.uploadedFiles = received;
    next();
  };

  parser.on('field', (name: string | undefined, value, info) => {
    if (failure !== undefined) return;
    if (name === undefined) return fail(missingFieldName());
    if (info.valueTruncated) return fail(overLimit('Field value too long'));
    // A name sent twice is a list (the validator then refuses it where one value is expected).
    const before = body[name];
    body[name] = before === undefined ? value : Array.isArray(before) ? [...before, value] : [before, value];
  });

  parser.on('file', (name: string | undefined, part, info) => {
    // A part is destroyed with the request's failure, which it reports as an 'error'.
    part.on('error', () => undefined);
    if (failure !== undefined) return void part.resume();
    if (name === undefined) {
      part.resume();
      return fail(missingFieldName());
    }
    // A file input left empty: a part without a file name, taken as no file at all.
    if (!info.filename) return void part.resume();
    const slot = files.push(undefined) - 1;
    const originalname = utf8FileName(info.filename);
    part.once('limit', () => fail(overLimit('File too large')));
    spool.write(part, info.mimeType, (err, spooled) => {
      if (err) return fail(err);
      files[slot] = { fieldname: name, originalname, encoding: info.encoding, mimetype: info.mimeType, ...spooled! };
    });
  });

  parser.on('filesLimit', () => fail(overLimit('Too many files')));
  parser.on('fieldsLimit', () => fail(overLimit('Too many fields')));
  parser.on('partsLimit', () => fail(overLimit('Too many parts')));
  // Stays for the parser's lifetime: busboy reports a malformed part header without stopping,
  // and reports its own destroy again; either without a listener would crash the process.
  parser.on('error', fail);
  parser.once('finish', () => {
    parsed = true;
    settle();
  });
  req.on('error', fail);

  // The answer was sent: the spool files go (a route that stored them has moved them already).
  res.once('finish', () => spool.release());
  res.once('close', () => {
    if (!handedOver) {
      // A client that drops the connection mid-upload: the part being written never ends.
      fail(new UploadAbandoned());
    } else if (res.writableEnded) {
      spool.release();
    } else {
      // The files were handed to the route, which is still working with them; it may answer the
      // gone connection later, and Node then emits nothing ('finish' needs a connection), so
      // the spool watches for the answer.
      const watch = setInterval(() => {
        if (!res.writableEnded) return;
        clearInterval(watch);
        spool.release();
      }, 500);
      watch.unref();
    }
  });

  req.pipe(parser);
}

const missingFieldName = () =>
  new ApiError('invalid_request', 'The multipart body is malformed: Field name missing.', [{ path: '/body', message: 'Field name missing' }]);

/** Raised into the file streams of a request whose connection is gone. */
class UploadAbandoned extends Error {
  constructor() {
    super('The client went away during the upload.');
  }
}

/**
 * The spool files of one request. Each part is written with `pipeline`, so a part cut off or
 * destroyed closes its write stream and reports; its path is known from the moment the file is
 * created, so nothing it wrote can stay behind.
 */
class RequestSpool {
  private readonly written = new Set<string>();
  private readonly inFlight = new Set<Readable>();
  /** Removals of written files not yet done. */
  private removing = 0;
  released = false;
  /** File bytes of the request so far, over all its parts. */
  private total = 0;

  constructor(
    private readonly dir: string,
    private readonly guard: UploadGuard | undefined,
    /** Called whenever a write or a removal ends (see `busy`). */
    private readonly changed: () => void,
  ) {}

  /** Parts being written or files being removed: the request's answer waits for them. */
  get busy(): boolean {
    return this.inFlight.size > 0 || this.removing > 0;
  }

  /** Writes one part to a new spool file; `cb` gets its path and size, or why it is not there. */
  write(part: Readable, mimeType: string, cb: (error: unknown, file?: { path: string; size: number }) => void): void {
    if (this.released) {
      part.resume();
      return cb(new UploadAbandoned());
    }
    try {
      this.guard?.checkPart(mimeType);
    } catch (err) {
      part.resume();
      return cb(err);
    }
    const target = path.join(this.dir, `upload_${ulidBody()}`);
    this.inFlight.add(part);
    const out = fs.createWriteStream(target, { flags: 'wx', mode: 0o600 });
    const finished = (err: unknown, file?: { path: string; size: number }) => {
      this.inFlight.delete(part);
      cb(err, file);
      this.changed();
    };
    const done = (err: NodeJS.ErrnoException | null) => {
      if (!err && this.released) {
        // the request was given up while the last bytes were flushed: nobody will read this file
        return this.remove(target, () => finished(new UploadAbandoned()));
      }
      if (!err) {
        this.written.add(target);
        return finished(null, { path: target, size: out.bytesWritten });
      }
      // The write stream may still be open (or opening) when pipeline reports: remove the file
      // only once its descriptor is closed, so a late open cannot re-create it after the removal.
      const removeAndReport = () => fs.rm(target, { force: true }, () => finished(err));
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

  /** Stops the parts still being written (their files go as they close) and removes the rest. */
  release(reason: unknown = new UploadAbandoned()): void {
    if (this.released) return;
    this.released = true;
    const stop = reason instanceof Error ? reason : new UploadAbandoned();
    for (const part of this.inFlight) part.destroy(stop);
    for (const file of this.written) this.remove(file, this.changed);
    this.written.clear();
    this.changed();
  }

  private remove(file: string, then: () => void): void {
    this.removing++;
    fs.rm(file, { force: true }, () => {
      this.removing--;
      then();
    });
  }
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
        if (!statErr && Date.now() - st.mtimeMs > olderThanMs) fs.rm(file, { force: true }, () => undefined);
      });
    }
  });
}

/**
 * A failed upload as an answer: our own refusals (limits, the upload guard) as they are; a body
 * cut off or malformed (busboy's plain errors, a dropped connection) is the client's 400; errors
 * from the disk (an `errno`) stay server errors: a full disk (ENOSPC, EDQUOT) is the error
 * handler's 507, EACCES a 500.
 */
function uploadError(err: unknown): unknown {
  if (err instanceof ApiError) return err;
  if (err instanceof UploadAbandoned || (err as { code?: string }).code === 'ECONNRESET') {
    return new ApiError('invalid_request', 'The request body was incomplete.');
  }
  if (err instanceof Error && (err as NodeJS.ErrnoException).errno === undefined) {
    return new ApiError('invalid_request', 'The multipart body is malformed or incomplete.', [{ path: '/body', message: err.message }]);
  }
  return err;
}

/**
 * busboy reads a plain `filename="..."` as latin1 (its default `defParamCharset`), but browsers
 * and fetch send raw UTF-8 bytes there (RFC 7578). Re-read the name as UTF-8 when its bytes are
 * valid UTF-8; a name that already holds characters beyond latin1 (from an RFC 5987 `filename*`)
 * is kept.
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
