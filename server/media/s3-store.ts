import { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { ApiError } from '../platform/errors';
import { BlobStore, sizeLimit, storeUnavailable } from './blob-store';

export interface S3StoreOptions {
  bucket: string;
  region: string;
  endpoint?: string;
  forcePathStyle: boolean;
  /** Prepended to every key (`chat/media/`), so one bucket can hold other things too. */
  prefix: string;
  /** A request to the store that sends or receives nothing for this long fails (and the client gets 503). */
  timeoutMs: number;
}

/** Multipart part size: the S3 minimum. With one part in flight, an upload holds at most two parts in memory. */
export const PART_BYTES = 5 * 1024 * 1024;

/** Only keys our media ids could be are ever swept, whatever else shares the bucket and prefix. */
const MEDIA_KEY = /^med_[0-9A-Za-z_]+$/;

const NOT_FOUND = new Set(['NoSuchKey', 'NotFound']);
const isNotFound = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return NOT_FOUND.has(e.name ?? '') || e.$metadata?.httpStatusCode === 404;
};

/** Our own refusals (a size limit) pass through; anything the store or the network did is a 503. */
function unavailableUnlessOurs(err: unknown): never {
  if (err instanceof ApiError) throw err;
  throw storeUnavailable();
}

/**
 * MEDIA_STORE=s3: an S3-compatible bucket (AWS S3, MinIO, R2; s3rver in tests). Credentials come from
 * the SDK's default chain (AWS_* variables, ~/.aws files, instance roles). Checksums only where an
 * operation requires them: servers other than AWS may keep the SDK's default CRC32 framing as part
 * of the body (docs/operations.md, Media storage).
 */
export function createS3BlobStore(opts: S3StoreOptions): BlobStore {
  const common = {
    region: opts.region,
    endpoint: opts.endpoint,
    forcePathStyle: opts.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // One retry: a store that is down answers 503 within a couple of time-outs, not after the
    // SDK's growing back-off.
    maxAttempts: 2,
  } as const;
  // Idle time-outs: a store that stops sending or taking bytes fails the request, while a large
  // transfer that keeps moving is never cut.
  const client = new S3Client({ ...common, requestHandler: { connectionTimeout: opts.timeoutMs, socketTimeout: opts.timeoutMs } });
  // Streamed downloads (MEDIA_DOWNLOAD=stream) wait for the answer's headers only: its body then goes
  // at the pace of our client, who may pause longer than the idle time-out (backpressure), and it is
  // closed with the client's connection.
  const reader = new S3Client({
    ...common,
    requestHandler: { connectionTimeout: opts.timeoutMs, requestTimeout: opts.timeoutMs, throwOnRequestTimeout: true },
  });
  const Bucket = opts.bucket;
  const full = (key: string) => opts.prefix + key;

  return {
    kind: 's3',
    async put(key, source, { maxBytes, contentType }) {
      const limited = sizeLimit(maxBytes);
      source.on('error', (err) => limited.destroy(err));
      const upload = new Upload({
        client,
        params: { Bucket, Key: full(key), Body: source.pipe(limited), ContentType: contentType },
        partSize: PART_BYTES,
        queueSize: 1,
        // A failed multipart upload is aborted, so its parts are not kept (and billed) by the store.
        leavePartsOnError: false,
      });
      try {
        await upload.done();
      } catch (err) {
        source.destroy();
        unavailableUnlessOurs(err);
      }
    },
    async get(key) {
      try {
        const out = await reader.send(new GetObjectCommand({ Bucket, Key: full(key) }));
        return out.Body as Readable;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        unavailableUnlessOurs(err);
      }
    },
    async exists(key) {
      try {
        await client.send(new HeadObjectCommand({ Bucket, Key: full(key) }));
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        unavailableUnlessOurs(err);
      }
    },
    async remove(keys) {
      // One DeleteObject per key, a few at once: DeleteObjects always carries a checksum some
      // S3-compatible servers refuse (PITFALLS.md, Object storage).
      const queue = [...keys];
      const worker = async () => {
        for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
          try {
            await client.send(new DeleteObjectCommand({ Bucket, Key: full(key) }));
          } catch (err) {
            if (!isNotFound(err)) unavailableUnlessOurs(err);
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(8, queue.length) }, worker));
    },
    async *listOlderThan(before) {
      let ContinuationToken: string | undefined;
      do {
        const page = await client.send(new ListObjectsV2Command({ Bucket, Prefix: opts.prefix || undefined, ContinuationToken })).catch(unavailableUnlessOurs);
        const keys = (page.Contents ?? [])
          .filter((o) => o.Key && o.LastModified && o.LastModified.getTime() < before)
          .map((o) => o.Key!.slice(opts.prefix.length))
          .filter((k) => MEDIA_KEY.test(k));
        if (keys.length) yield keys;
        ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (ContinuationToken);
    },
    async presign(key, { ttlSeconds, contentDisposition, contentType }) {
      const command = new GetObjectCommand({ Bucket, Key: full(key), ResponseContentDisposition: contentDisposition, ResponseContentType: contentType });
      return getSignedUrl(client, command, { expiresIn: ttlSeconds });
    },
    async check(withinMs) {
      try {
        await client.send(new HeadBucketCommand({ Bucket }), { abortSignal: AbortSignal.timeout(withinMs) });
        return 'ok';
      } catch (err) {
        const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
        const why = e.$metadata?.httpStatusCode ?? (e.name === 'AbortError' || e.name === 'TimeoutError' ? 'timeout' : (e.name ?? 'error'));
        return `does not answer (${why})`;
      }
    },
  };
}
