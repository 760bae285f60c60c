import { CliError, Command, required, SITE_OPTION } from '../args';
import { IDENTITY_MODES } from '../../access/service';
import type { IdentityMode } from '../../access/store';
import type { Runtime } from '../../runtime';
import type { VisitorFileSettings } from '../../media/visitor-files';
import { DAYS, type BusinessHours, type Day, type HoursChange, type Week } from '../../sites/business-hours';

type SiteLine = { id: string; name: string; allowedOrigins: string[]; identityMode: string };

function siteLine(s: SiteLine & { visitorFiles: VisitorFileSettings }): string {
  const origins = s.allowedOrigins.length ? s.allowedOrigins.join(',') : '(no allowed origins: the chat window is off)';
  return `${s.id}  ${s.name}  origins: ${origins}  identity: ${s.identityMode}  ${visitorFilesText(s.visitorFiles)}`;
}

const visitorFilesText = (v: VisitorFileSettings) => `files: ${v.enabled ? `on (${v.types ? v.types.join(',') : 'any type'})` : 'off'}`;

/** The sites with their visitor-file setting beside the window settings. */
async function sitesWithFiles(rt: Runtime) {
  const sites = await rt.services.access.listSites();
  return Promise.all(sites.map(async (s) => ({ ...s, visitorFiles: await rt.services.visitorFiles.settings(s.id) })));
}

/** `--visitor-files on|off` and `--visitor-file-types image/*,application/pdf` ("" or "any": every type). */
async function updateVisitorFiles(rt: Runtime, siteId: string, files: string | true | undefined, types: string | true | undefined) {
  if (files === undefined && types === undefined) return;
  if (files !== undefined && files !== 'on' && files !== 'off') throw new CliError('--visitor-files is on or off');
  if (types === true) throw new CliError('--visitor-file-types needs a value');
  await rt.services.visitorFiles.update(siteId, { enabled: files === undefined ? undefined : files === 'on', types }, (trx) =>
    rt.services.siteAdmin.byOperator('site.visitor_files_changed')(trx, siteId, siteId),
  );
}

/**
 * `--week "mon-fri 09:00-12:00,13:00-17:00; sat 10:00-14:00"`: days or day ranges, each with its
 * ranges; a day not named is a day off. The ranges are checked as the API checks them.
 */
export function parseWeek(text: string): Week {
  const week = Object.fromEntries(DAYS.map((d) => [d, []])) as unknown as Week;
  for (const part of text
    .split(';')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z]{3})(?:-([a-z]{3}))?\s+(.+)$/i.exec(part);
    const from = m && DAYS.indexOf(m[1].toLowerCase() as Day);
    const to = m && DAYS.indexOf((m[2] ?? m[1]).toLowerCase() as Day);
    if (!m || from! < 0 || to! < from!) throw new CliError(`--week: "${part}" is not "mon-fri 09:00-17:00"`);
    const ranges = m[3].split(',').map((r) => r.trim().split('-') as [string, string]);
    if (ranges.some((r) => r.length !== 2)) throw new CliError(`--week: "${m[3]}" is not "09:00-17:00"`);
    for (let d = from!; d <= to!; d++) week[DAYS[d]] = ranges;
  }
  return week;
}

const presenceText = (h: BusinessHours) =>
  h.awayWhenNoAgentOnline ? 'away while no member has the inbox open' : 'not away for members being offline (replies come through the API)';
const hoursText = (h: BusinessHours) => `${hoursOnlyText(h)}\n${presenceText(h)}`;
const hoursOnlyText = (h: BusinessHours) =>
  h.enabled
    ? `hours (${h.timeZone}): ${DAYS.map((d) => `${d} ${h.week[d].map((r) => r.join('-')).join(',') || 'off'}`).join('; ')}${h.awayMessage ? `\naway message: ${h.awayMessage}` : ''}`
    : 'no business hours (away only when no member has the inbox open)';

export const siteCommands: Record<string, Command> = {
  'site create': {
    summary: 'Makes a site.',
    options: [{ name: 'name', value: 'N', help: 'its name' }],
    run: async (rt, args) => {
      const site = await rt.services.access.createSite(required(args, 'name'), rt.services.siteAdmin.byOperator('site.created'));
      return { json: site, text: `site ${site.id} "${site.name}" created` };
    },
  },
  'site list': {
    summary: 'Lists the sites with their chat window settings.',
    options: [],
    run: async (rt) => {
      const sites = await sitesWithFiles(rt);
      return { json: { sites }, text: sites.map(siteLine).join('\n') || '(no sites)' };
    },
  },
  /**
   * The chat window's settings of a site:
   *   --allowed-origins https://a.example,https://b.example   (replaces the list; "" clears it)
   *   --identity-mode off|optional|enforce                    (makes a secret on first use, shown once)
   *   --identity-secret rotate                                (a new secret, shown once; the old one stops at once)
   *   --visitor-files on|off                                  (whether visitors may send files)
   *   --visitor-file-types image/*,application/pdf            (the types they may send; "" or any: every type)
   */
  'site update': {
    summary: "Changes a site's chat window settings.",
    options: [
      SITE_OPTION,
      { name: 'allowed-origins', value: 'A,B', help: 'the origins the chat window may run on (replaces the list; "" clears it)' },
      { name: 'identity-mode', value: 'off|optional|enforce', help: 'identity verification (makes a secret on first use, shown once)' },
      { name: 'identity-secret', value: 'rotate', help: 'a new identity secret, shown once; the old one stops at once' },
      { name: 'visitor-files', value: 'on|off', help: 'whether visitors may send files' },
      { name: 'visitor-file-types', value: 'T,U', help: 'the types visitors may send, e.g. image/*,application/pdf ("" or any: every type)' },
    ],
    run: async (rt, args) => {
      const siteId = required(args, 'site');
      const access = rt.services.access;
      const origins = args.flags['allowed-origins'];
      const mode = args.flags['identity-mode'];
      const secret = args.flags['identity-secret'];
      const files = args.flags['visitor-files'];
      const fileTypes = args.flags['visitor-file-types'];
      if (origins === undefined && mode === undefined && secret === undefined && files === undefined && fileTypes === undefined) {
        throw new CliError('give --allowed-origins, --identity-mode, --identity-secret rotate, --visitor-files or --visitor-file-types');
      }
      if (origins === true) throw new CliError('--allowed-origins needs a value');
      if (mode !== undefined && !IDENTITY_MODES.includes(mode as IdentityMode)) throw new CliError(`--identity-mode is one of ${IDENTITY_MODES.join(', ')}`);
      if (secret !== undefined && secret !== 'rotate') throw new CliError('--identity-secret takes only "rotate"');
      await updateVisitorFiles(rt, siteId, files, fileTypes);
      if (typeof origins === 'string') {
        await access.setAllowedOrigins(
          siteId,
          origins
            .split(',')
            .map((o) => o.trim())
            .filter(Boolean),
          rt.services.siteAdmin.byOperator('site.origins_replaced'),
        );
      }
      let identitySecret: string | undefined;
      if (mode !== undefined || secret !== undefined) {
        const actions = [
          ...(mode !== undefined ? [`site.identity_mode_changed.${mode}`] : []),
          ...(secret === 'rotate' ? ['site.identity_secret_rotated'] : []),
        ];
        const r = await access.setIdentity(
          siteId,
          { mode: mode as IdentityMode | undefined, rotateSecret: secret === 'rotate' },
          rt.services.siteAdmin.byOperator(...actions),
        );
        identitySecret = r.identitySecret;
      }
      const site = (await sitesWithFiles(rt)).find((s) => s.id === siteId)!;
      const json = identitySecret ? { ...site, identitySecret } : site;
      const shown = identitySecret ? `\nidentity secret (shown once, keep it on your server): ${identitySecret}` : '';
      return { json, text: siteLine(site) + shown };
    },
  },
  /**
   * A site's business hours and away message (docs/window.md, Away):
   *   --time-zone Europe/Berlin --week "mon-fri 09:00-17:00; sat 10:00-12:00" --away-message "..."
   *   --off   (no hours: away only when no member has the inbox open)
   *   --away-when-no-agent-online no   (a site answered through the API: never away for that)
   * Without any option it prints them.
   */
  'site hours': {
    summary: "Shows or sets a site's business hours and away message.",
    options: [
      SITE_OPTION,
      { name: 'time-zone', value: 'Z', help: 'the IANA time zone of the hours, e.g. Europe/Berlin' },
      { name: 'week', value: 'W', help: 'e.g. "mon-fri 09:00-12:00,13:00-17:00; sat 10:00-14:00" (days not named are off; replaces the week)' },
      { name: 'away-message', value: 'M', help: 'shown in the chat window while away ("" for none)' },
      { name: 'off', help: 'no hours: the window is away only when no member has the inbox open' },
      { name: 'away-when-no-agent-online', value: 'yes|no', help: 'no: a site answered through the API is not away because no member is online' },
    ],
    run: async (rt, args) => {
      const siteId = required(args, 'site');
      const away = rt.services.visitors.replyEmails;
      const { 'time-zone': zone, week, 'away-message': message, off, 'away-when-no-agent-online': presence } = args.flags;
      let hours = await away.hours(siteId);
      if (presence !== undefined && presence !== 'yes' && presence !== 'no') throw new CliError('--away-when-no-agent-online is yes or no');
      if (presence !== undefined && zone === undefined && week === undefined && message === undefined && off === undefined) {
        hours = await away.updateHours({ manager: null, clientIp: null }, siteId, { ...hours, awayWhenNoAgentOnline: presence === 'yes' });
      } else if (zone !== undefined || week !== undefined || message !== undefined || off !== undefined) {
        if (zone === true || week === true || message === true) throw new CliError('--time-zone, --week and --away-message need a value');
        const next: HoursChange = {
          enabled: off === undefined,
          timeZone: zone ?? hours.timeZone,
          week: week === undefined ? hours.week : parseWeek(week),
          awayMessage: message === undefined ? hours.awayMessage : message,
          awayWhenNoAgentOnline: presence === undefined ? undefined : presence === 'yes',
        };
        hours = await away.updateHours({ manager: null, clientIp: null }, siteId, next);
      }
      return { json: hours, text: hoursText(hours) };
    },
  },
};
