import type { Knex } from 'knex';
import * as m001 from './001_core';
import * as m002 from './002_events';
import * as m003 from './003_idempotency_lease_token';
import * as m004 from './004_window';
import * as m005 from './005_read_path';
import * as m006 from './006_window_revocation';
import * as m007 from './007_visitor_files';
import * as m008 from './008_accounts';
import * as m009 from './009_key_creators';
import * as m010 from './010_event_address_roll';
import * as m011 from './011_inbox';
import * as m012 from './012_setup_link';
import * as m013 from './013_idempotency_replays';
import * as m014 from './014_invitation_list';
import * as m015 from './015_delivery_unsent_reason';
import * as m016 from './016_invitation_attempts';
import * as m017 from './017_security_log';
import * as m018 from './018_people';
import * as m019 from './019_tags';
import * as m021 from './021_notes';
import * as m025 from './025_seen';
import * as m024 from './024_shared_replies';
import * as m023 from './023_visitor_context';
import * as m026 from './026_search';
import * as m027 from './027_rows';
import * as m028 from './028_master_key_check';
import * as m029 from './029_site_feed_rows';
import * as m030 from './030_mail';
import * as m031 from './031_password_resets';
import * as m032 from './032_email_links';
import * as m033 from './033_agent_alerts';
import * as m034 from './034_away';
import * as m037 from './037_away_presence';
import * as m036 from './036_attachment_count_unknown';

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/** Migrations are imported, not globbed, so they run the same under tsx, ts-jest and compiled JS. */
const migrations: Record<string, Migration> = {
  '001_core': m001,
  '002_events': m002,
  '003_idempotency_lease_token': m003,
  '004_window': m004,
  '005_read_path': m005,
  '006_window_revocation': m006,
  '007_visitor_files': m007,
  '008_accounts': m008,
  '009_key_creators': m009,
  '010_event_address_roll': m010,
  '011_inbox': m011,
  '012_setup_link': m012,
  '013_idempotency_replays': m013,
  '014_invitation_list': m014,
  '015_delivery_unsent_reason': m015,
  '016_invitation_attempts': m016,
  '017_security_log': m017,
  '018_people': m018,
  '019_tags': m019,
  '021_notes': m021,
  '024_shared_replies': m024,
  '023_visitor_context': m023,
  '025_seen': m025,
  '026_search': m026,
  '027_rows': m027,
  '028_master_key_check': m028,
  '029_site_feed_rows': m029,
  '030_mail': m030,
  '031_password_resets': m031,
  '032_email_links': m032,
  '033_agent_alerts': m033,
  '034_away': m034,
  '036_attachment_count_unknown': m036,
  '037_away_presence': m037,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(migrations).sort(),
  getMigrationName: (name) => name,
  getMigration: async (name) => migrations[name],
};
