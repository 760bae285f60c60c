import fs from 'node:fs';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApiError } from '../platform/errors';

/** How a presigned link should answer: the headers our own download would send. */
export interface PresignOptions {
  ttlSeconds: number;
  contentDisposition: string;
  contentType: string;
}

/**
 * Where media bytes live (MEDIA_STORE): the one interface the media service, the download route,
 * retention, visitor-data deletion and the orphan sweep use, so none of them knows whether a file is
 * on this machine's disk or in an S3-compatible bucket. Keys are attachments' `storage_key`.
 */
export interface BlobStore {
  readonly kind: 'local' | 's3';
  /** Stores the stream under `key`; more than `maxBytes` fails, and a failed put leaves nothing behind. */
  put(key: string, source: Readable, opts: { maxBytes: number; contentType: string }): Promise<void>;
  /** The stored bytes, or undefined when there is no such object. */
  get(key: string): Promise<Readable | undefined>;
  exists(key: string): Promise<boolean>;
  /** Removes these keys; a key already gone is no error. */
  remove(keys: string[]): Promise<void>;
  /** Keys last written before `before` (ms), a page at a time: the orphan sweep's candidates. */
  listOlderThan(before: number): AsyncIterable<string[]>;
  /** A short-lived URL that serves the object itself; undefined where the store has none (local disk). */
  presign?(key: string, opts: PresignOptions): Promise<string>;
  /** `ok`, or what is wrong in a few words (never a secret), within `withinMs`: /readyz. */
  check(withinMs: number): Promise<string>;
}

/** The answer when the media store fails or does not answer in time: retried later, never a 500 or a hang. */
export function storeUnavailable(): ApiError {
  return new ApiError('service_unavailable', 'The media store is not answering; retry later.', undefined, { 'Retry-After': '5' });
}

/** Passes bytes through until more than `maxBytes` went by, then fails the stream. */
export function sizeLimit(maxBytes: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > maxBytes) done(new ApiError('payload_too_large', `A file is larger than ${maxBytes} bytes.`));
      else done(null, chunk);
    },
  });
}

/** The names of the files in `dir` last written before `before` (ms); none when it does not exist. */
export function listOlderThan(dir: string, before: number): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((name) => {
    try {
      return fs.statSync(path.join(dir, name)).mtimeMs < before;
    } catch {
      return false;
    }
  });
}

/** The default store: one file per key in DATA_DIR/media, written once (`wx`), readable by this user only. */
export function createLocalBlobStore(dataDir: string): BlobStore {
  const dir = path.join(dataDir, 'media');
  fs.mkdirSync(dir, { recursive: true });
  const fileOf = (key: string) => path.join(dir, key);
  return {
    kind: 'local',
    async put(key, source, opts) {
      const target = fileOf(key);
      try {
        await pipeline(source, sizeLimit(opts.maxBytes), fs.createWriteStream(target, { flags: 'wx', mode: 0o600 }));
      } catch (err) {
        // A disk that filled up mid-copy leaves part of the file: it goes with the failure.
        await fs.promises.rm(target, { force: true });
        throw err;
      }
    },
    async get(key) {
      const file = fileOf(key);
      if (!fs.existsSync(file)) return undefined;
      return fs.createReadStream(file);
    },
    async exists(key) {
      return fs.existsSync(fileOf(key));
    },
    async remove(keys) {
      await Promise.all(keys.map((key) => fs.promises.rm(fileOf(key), { force: true })));
    },
    async *listOlderThan(before) {
      const names = listOlderThan(dir, before);
      for (let i = 0; i < names.length; i += 500) yield names.slice(i, i + 500);
    },
    async check() {
      return 'ok';
    },
  };
}
