import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { newId } from '../platform/ids';
import { hmacHex, safeEqual } from '../platform/crypto';
import { ApiError, notFound } from '../platform/errors';
import type { components } from '../../sdk/src/generated/api';
import { AttachmentRow, MediaStore } from './store';

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
  dataDir: string;
  publicUrl: string;
  linkKey: Buffer;
  linkTtlSeconds: number;
  now?: () => number;
}

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
  const dir = path.join(opts.dataDir, 'media');
  fs.mkdirSync(dir, { recursive: true });
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
     * Moves received files into DATA_DIR/media before the database transaction; the rows are
     * inserted inside it. If the transaction fails, `discard` removes the files again.
     */
    async persist(siteId: string, files: IncomingFile[]): Promise<AttachmentRow[]> {
      const rows: AttachmentRow[] = [];
      try {
        for (const file of files) {
          const id = newId('med');
          const target = path.join(dir, id);
          const hash = createHash('sha256');
          let size = 0;
          const source = file.buffer ? Readable.from([file.buffer]) : fs.createReadStream(file.tempPath!);
          source.on('data', (chunk: Buffer) => {
            hash.update(chunk);
            size += chunk.length;
          });
          try {
            await pipeline(source, fs.createWriteStream(target, { flags: 'wx', mode: 0o600 }));
          } catch (err) {
            // A disk that filled up mid-copy leaves part of the file: it goes with the failure.
            await fs.promises.rm(target, { force: true });
            throw err;
          }
          if (file.tempPath) await fs.promises.rm(file.tempPath, { force: true });
          rows.push({
            id,
            site_id: siteId,
            message_id: null,
            name: safeFileName(file.originalName),
            mime_type: storableMimeType(file.mimeType),
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

    async discard(rows: AttachmentRow[]) {
      await Promise.all(rows.map((r) => fs.promises.rm(path.join(dir, r.storage_key), { force: true })));
    },

    /** Finds a file of the site (another site's file is not found) and where its bytes are. */
    async open(siteId: string | null, id: string) {
      const row = siteId ? await store.find(siteId, id) : await store.findById(id);
      if (!row || !row.message_id) throw notFound('Attachment');
      const file = path.join(dir, row.storage_key);
      if (!fs.existsSync(file)) throw notFound('Attachment');
      return { row, file };
    },
  };
  return service;
}

export type MediaService = ReturnType<typeof createMediaService>;
