import type { RequestHandler } from 'express';
import express from 'express';
import multer from 'multer';
import path from 'node:path';
import fs from 'node:fs';
import { ApiError } from '../platform/errors';
import { ulidBody } from '../platform/ids';

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
 * limits from DECISIONS. Leftover spool files are removed when the answer is sent.
 */
export function multipartBody(dataDir: string, maxFileBytes: number): RequestHandler {
  const tmp = path.join(dataDir, 'tmp');
  fs.mkdirSync(tmp, { recursive: true });
  const upload = multer({
    storage: multer.diskStorage({ destination: tmp, filename: (_req, _file, cb) => cb(null, `upload_${ulidBody()}`) }),
    // busboy flags a file that reaches the limit, so allow one byte more and check `size` below.
    limits: { fileSize: maxFileBytes + 1, files: 10, fields: 10, fieldSize: 64 * 1024, parts: 30, headerPairs: 100 },
  }).any();
  return (req, res, next) => {
    if (!req.is('multipart/form-data')) return next();
    res.on('close', () => {
      for (const f of (req.files as Express.Multer.File[] | undefined) ?? []) fs.rm(f.path, { force: true }, () => undefined);
    });
    upload(req, res, (err?: unknown) => {
      if (err) return next(err);
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
