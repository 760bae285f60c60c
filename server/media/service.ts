import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { newId } from '../platform/ids';
import { hmacHex, safeEqual } from '../platform/crypto';
import { ApiError, notFound } from '../platform/errors';
import type { components } from '../../sdk/src/generated/api';
import { AttachmentRow, MediaStore } from './store';
import type { BlobStore } from './blob-store';
import { servedContentType } from './inert';

export type Attachment = components['schemas']['Attachment'];

/** A file received but not yet attached to a message. */
export interface IncomingFile {
  /** Where the upload was spooled (removed after it is stored). */
  tempPath?: string;
  /** Or the bytes themselves (CLI, seed). */
  buffer?: Buffer;
  originalName: string;
  mimeType: string;
}

export interface MediaServiceOptions {
  /** Where the bytes live (blob-store.ts). */
  blobs: BlobStore;
  /** Bytes one file may hold (MAX_ATTACHMENT_BYTES); the upload itself is refused earlier. */
  maxFileBytes: number;
  publicUrl: string;
  linkKey: Buffer;
  linkTtlSeconds: number;
  /** `redirect`: downloads answer 302 to the store's presigned URL (MEDIA_DOWNLOAD). */
  download: 'redirect' | 'stream';
  now?: () => number;
}

/** A presigned URL only has to last until the client follows the redirect. */
export const PRESIGNED_TTL_SECONDS = 60;

/**
 * Characters a name shows wrongly or not at all: controls (Cc, C0 and C1), format characters (Cf:
 * the bidi embeddings, overrides and isolates U+202A-202E and U+2066-2069, the marks U+200E, U+200F
 * and U+061C, zero-width characters, the BOM), line and paragraph separators, and lone surrogates.
 * `invoice\u202Efdp.exe` would otherwise read as "invoiceexe.pdf".
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/** Keeps a file name readable but harmless: no path, no invisible, control or quote characters, bounded length. */
export function safeFileName(name: string): string {
  const base = path.basename(name.replace(INVISIBLE, '').replace(/\\/g, '/'));
  const cleaned = base
    .replace(/["\\/<>:|?*]/g, '_')
    .replace(/^\.+/, '')
    .trim();
  // 200 characters as the document counts them (code points): slicing UTF-16 units could cut an
  // emoji in half and store a name the answer schema then refuses.
  return Array.from(cleaned || 'file')
    .slice(0, 200)
    .join('');
}

const MIME_PATTERN = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/i;
/** The `mime_type` column holds 255 characters (MariaDB refuses more; SQLite would keep them). */
const MAX_MIME_LENGTH = 255;

/** The file's type as sent when it is a plain, storable MIME type; anything else is octet-stream. */
export function storableMimeType(sent: string): string {
  return sent.length <= MAX_MIME_LENGTH && MIME_PATTERN.test(sent) ? sent.toLowerCase() : 'application/octet-stream';
}

export function createMediaService(store: MediaStore, opts: MediaServiceOptions) {
  const now = opts.now ?? Date.now;
  const { blobs } = opts;
  const sign = (id: string, expires: number) => hmacHex(opts.linkKey, `${id}.${expires}`);

  const service = {
    /** The signed link (`mediaLink` in openapi/openapi.yaml): opens without a key until `expires`. */
    signedUrl(id: string): string {
      const expires = Math.floor(now() / 1000) + opts.linkTtlSeconds;
      return `${opts.publicUrl}/api/v1/media/${id}?expires=${expires}&signature=${sign(id, expires)}`;
    },

    verifyLink(id: string, expires: number | undefined, signature: string | undefined): void {
      const bad = new ApiError('unauthorized', 'The media link signature is invalid or expired.');
      if (expires === undefined || !signature) throw bad;
      if (!safeEqual(sign(id, expires), signature)) throw bad;
      if (expires * 1000 < now()) throw bad;
    },

    toDto(row: AttachmentRow): Attachment {
      return { id: row.id, name: row.name, mimeType: row.mime_type, size: row.size, url: service.signedUrl(row.id) };
    },

    /**
     * Stores received files (blob-store.ts) before the database transaction; the rows are inserted
     * inside it. If the transaction fails, `discard` removes the files again.
     */
    async persist(siteId: string, files: IncomingFile[]): Promise<AttachmentRow[]> {
      const rows: AttachmentRow[] = [];
      try {
        for (const file of files) {
          const id = newId('med');
          const hash = createHash('sha256');
          let size = 0;
          const source = file.buffer ? Readable.from([file.buffer]) : fs.createReadStream(file.tempPath!);
          source.on('data', (chunk: Buffer) => {
            hash.update(chunk);
            size += chunk.length;
          });
          const mimeType = storableMimeType(file.mimeType);
          await blobs.put(id, source, { maxBytes: opts.maxFileBytes, contentType: servedContentType(mimeType) });
          if (file.tempPath) await fs.promises.rm(file.tempPath, { force: true });
          rows.push({
            id,
            site_id: siteId,
            message_id: null,
            name: safeFileName(file.originalName),
            mime_type: mimeType,
            size,
            sha256: hash.digest('hex'),
            storage_key: id,
            created_at: now(),
          });
        }
      } catch (err) {
        await service.discard(rows);
        throw err;
      }
      return rows;
    },

    /**
     * Removes stored files whose rows are gone or were never committed. Best effort: a store that
     * fails now leaves them to the orphan sweep (maintenance.ts), and the caller's own outcome stands.
     */
    async discard(rows: AttachmentRow[]) {
      if (rows.length === 0) return;
      await blobs.remove(rows.map((r) => r.storage_key)).catch(() => undefined);
    },

    /** Finds a file of the site (another site's file is not found) whose bytes are stored. */
    async open(siteId: string | null, id: string) {
      const row = siteId ? await store.find(siteId, id) : await store.findById(id);
      if (!row || !row.message_id) throw notFound('Attachment');
      // On local disk a missing file is found at no cost, before an If-None-Match is answered; a
      // bucket is asked only when the bytes are needed (read, redirectUrl).
      if (blobs.kind === 'local' && !(await blobs.exists(row.storage_key))) throw notFound('Attachment');
      return row;
    },

    /** The stored bytes of an attachment found by `open`; 404 when they are gone. */
    async read(row: AttachmentRow): Promise<Readable> {
      const body = await blobs.get(row.storage_key);
      if (!body) throw notFound('Attachment');
      return body;
    },

    /**
     * A presigned URL of the store serving the file itself with our headers, when downloads are
     * answered by redirect (MEDIA_DOWNLOAD=redirect); undefined: stream it ourselves.
     */
    async redirectUrl(row: AttachmentRow, headers: { contentDisposition: string; contentType: string }): Promise<string | undefined> {
      if (opts.download !== 'redirect' || !blobs.presign) return undefined;
      // Checked first, so a removed file is 404 and a store that is down 503, as when streamed.
      if (!(await blobs.exists(row.storage_key))) throw notFound('Attachment');
      return blobs.presign(row.storage_key, { ttlSeconds: PRESIGNED_TTL_SECONDS, ...headers });
    },
  };
  return service;
}

export type MediaService = ReturnType<typeof createMediaService>;
