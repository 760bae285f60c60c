import type { Knex } from 'knex';
import { DEFAULT_BUSINESS_HOURS, DAYS, type BusinessHours, type Week } from './business-hours';

/** A site's business hours (034_away.ts): the only reader and writer of `site_business_hours`. */
export function createBusinessHoursStore(db: Knex) {
  return {
    /** The site's hours; a site never set has none (always open). */
    async find(siteId: string, trx: Knex = db): Promise<BusinessHours> {
      const row = await trx('site_business_hours')
        .where({ site_id: siteId })
        .first('enabled', 'time_zone', 'week', 'away_message', 'away_when_no_agent_online');
      if (!row) return structuredClone(DEFAULT_BUSINESS_HOURS);
      const stored = JSON.parse(row.week) as Partial<Week>;
      const week = Object.fromEntries(DAYS.map((d) => [d, stored[d] ?? []])) as Week;
      return {
        enabled: Boolean(row.enabled),
        timeZone: row.time_zone,
        week,
        awayMessage: row.away_message,
        awayWhenNoAgentOnline: Boolean(row.away_when_no_agent_online),
      };
    },

    async save(trx: Knex.Transaction, siteId: string, hours: BusinessHours, at: number): Promise<void> {
      const row = {
        site_id: siteId,
        enabled: hours.enabled,
        time_zone: hours.timeZone,
        week: JSON.stringify(hours.week),
        away_message: hours.awayMessage,
        away_when_no_agent_online: hours.awayWhenNoAgentOnline,
        updated_at: at,
      };
      await trx('site_business_hours')
        .insert(row)
        .onConflict('site_id')
        .merge(['enabled', 'time_zone', 'week', 'away_message', 'away_when_no_agent_online', 'updated_at']);
    },
  };
}

export type BusinessHoursStore = ReturnType<typeof createBusinessHoursStore>;
