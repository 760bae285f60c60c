import type { Knex } from 'knex';
import { forUpdate, withNumericColumns } from '../db/knex';
import { ApiError, ErrorDetail } from '../platform/errors';
import {
  chargeSite,
  NO_USAGE,
  parseTypePatterns,
  released,
  secondsUntilNextUtcDay,
  SiteQuota,
  siteRoom,
  SiteUsage,
  typeAllowed,
  VisitorFileLimits,
} from './quota';
import { storableMimeType } from './service';
import { runInTransaction } from '../db/transaction';

/** A site's row of `site_visitor_files` (migration 007); none means files on, any type, nothing stored. */
interface VisitorFilesRow {
  site_id: string;
  files_enabled: boolean | number;
  allowed_types: string | null;
  stored_bytes: number;
  usage_day: number;
  day_bytes: number;
  updated_at: number;
}

const COLUMNS = ['site_id', 'files_enabled', 'allowed_types', 'stored_bytes', 'usage_day', 'day_bytes', 'updated_at'] as const;

export interface VisitorFileSettings {
  enabled: boolean;
  /** MIME patterns (`image/*`, `application/pdf`); null: any type. */
  types: string[] | null;
}

const mapRow = (row: VisitorFilesRow) => withNumericColumns(row, ['stored_bytes', 'usage_day', 'day_bytes', 'updated_at']);
const settingsOf = (row: VisitorFilesRow | undefined): VisitorFileSettings => ({
  enabled: row ? Boolean(row.files_enabled) : true,
  types: row?.allowed_types ? row.allowed_types.split(',') : null,
});
const usageOf = (row: VisitorFilesRow | undefined): SiteUsage =>
  row ? { storedBytes: row.stored_bytes, day: row.usage_day, dayBytes: row.day_bytes } : NO_USAGE;

/** A site's row before anything was set or stored: files on, any type. */
const newRow = (siteId: string, at: number): VisitorFilesRow => ({
  site_id: siteId,
  files_enabled: true,
  allowed_types: null,
  stored_bytes: 0,
  usage_day: 0,
  day_bytes: 0,
  updated_at: at,
});

const FILE_DETAIL = (message: string): ErrorDetail[] => [{ path: '/body/file', message }];

export const filesOffError = () =>
  new ApiError('unsupported_media_type', 'This site does not take files from visitors.', FILE_DETAIL('files from visitors are off for this site'));

/** Files refused by the site's setting: before a byte of them is written. */
export function checkFileAllowed(settings: VisitorFileSettings, declaredType: string): void {
  if (!settings.enabled) throw filesOffError();
  const type = storableMimeType(declaredType);
  if (!typeAllowed(settings.types, type)) {
    throw new ApiError(
      'unsupported_media_type',
      `Files of type ${type} are not accepted here; this site takes ${settings.types!.join(', ')}.`,
      FILE_DETAIL(`type ${type} is not allowed for this site`),
    );
  }
}

/** A site quota that has no room: 507 while the site's stored bytes are at their limit, 429 until the next UTC day. */
export function siteQuotaError(quota: SiteQuota, now: number): ApiError {
  if (quota === 'stored')
    return new ApiError('insufficient_storage', "The site's storage for files from visitors is full; older files make room as they expire.");
  return new ApiError('quota_exceeded', 'The site has taken its quota of files from visitors for today; try again tomorrow.', undefined, {
    'Retry-After': String(secondsUntilNextUtcDay(now)),
  });
}

/**
 * The visitor-file setting of each site (on or off, allowed types) and its quotas: what a site may
 * still take (checked before an upload is read) and the charge, in the transaction that stores the
 * files, against the counters of `site_visitor_files` under a row lock.
 */
export function createVisitorFiles(deps: { db: Knex; limits: VisitorFileLimits; now: () => number }) {
  const { db, limits, now } = deps;
  const find = async (conn: Knex, siteId: string, lock = false) => {
    const query = conn('site_visitor_files').where({ site_id: siteId }).first(COLUMNS);
    const row = (await (lock ? forUpdate(conn, query) : query)) as VisitorFilesRow | undefined;
    return row && mapRow(row);
  };

  return {
    limits,

    async settings(siteId: string): Promise<VisitorFileSettings> {
      return settingsOf(await find(db, siteId));
    },

    /** The setting and the bytes the site may still take now, in one read. */
    async state(siteId: string) {
      const row = await find(db, siteId);
      return { settings: settingsOf(row), room: siteRoom(usageOf(row), limits, now()) };
    },

    /**
     * The owner's change (CLI `site update --visitor-files on|off --visitor-file-types ...`, and
     * `PATCH /manage/v1/sites/{siteId}/visitor-files`). `types` is the comma-separated list ("" or
     * "any": every type); `also` runs in the change's transaction (the management API's audit entry).
     */
    async update(
      siteId: string,
      change: { enabled?: boolean; types?: string },
      also?: (trx: Knex.Transaction) => Promise<unknown>,
    ): Promise<VisitorFileSettings> {
      if (!(await db('sites').where({ id: siteId }).first('id'))) throw new ApiError('not_found', `Site ${siteId} not found.`);
      const types = change.types === undefined ? undefined : parseTypePatterns(change.types);
      const set: Partial<VisitorFilesRow> = { updated_at: now() };
      if (change.enabled !== undefined) set.files_enabled = change.enabled;
      if (types !== undefined) set.allowed_types = types === null ? null : types.join(',');
      const fresh: VisitorFilesRow = { ...newRow(siteId, now()), ...set };
      return runInTransaction(db, async (trx) => {
        await trx('site_visitor_files').insert(fresh).onConflict('site_id').merge(Object.keys(set));
        await also?.(trx);
        return settingsOf(await find(trx, siteId));
      });
    },

    /**
     * The same refusal as the window's, for a path that has its files in hand (`visitor say`), before
     * they are stored. A site's first files make its row here, outside the transaction that charges
     * them, so that transaction only ever updates a row it has locked.
     */
    async checkFiles(siteId: string, types: string[]): Promise<void> {
      if (types.length === 0) return;
      const row = await find(db, siteId);
      if (!row) await db('site_visitor_files').insert(newRow(siteId, now())).onConflict('site_id').ignore();
      const settings = settingsOf(row);
      for (const type of types) checkFileAllowed(settings, type);
    },

    /**
     * Counts `bytes` of visitor files against the site's quotas inside the transaction that stores
     * them (the row is locked until it commits, so simultaneous uploads cannot both take the last
     * room); refused, the transaction rolls back and the files are discarded.
     */
    async charge(trx: Knex.Transaction, siteId: string, bytes: number): Promise<void> {
      const row = await find(trx, siteId, true);
      const at = now();
      const charged = chargeSite(usageOf(row), bytes, limits, at);
      if (!charged.allowed) throw siteQuotaError(charged.quota, at);
      const counters = { stored_bytes: charged.usage.storedBytes, usage_day: charged.usage.day, day_bytes: charged.usage.dayBytes, updated_at: at };
      if (row) await trx('site_visitor_files').where({ site_id: siteId }).update(counters);
      else await trx('site_visitor_files').insert({ ...newRow(siteId, at), ...counters });
    },

    /** Removed files (retention) free their bytes of the site's stored total, in the removing transaction. */
    async release(trx: Knex.Transaction, siteId: string, bytes: number): Promise<void> {
      const row = await find(trx, siteId, true);
      if (!row) return;
      await trx('site_visitor_files')
        .where({ site_id: siteId })
        .update({ stored_bytes: released(usageOf(row), bytes).storedBytes, updated_at: now() });
    },
  };
}

export type VisitorFiles = ReturnType<typeof createVisitorFiles>;
