import { CliError, Command, required } from '../args';
import { IDENTITY_MODES } from '../../access/service';
import type { IdentityMode } from '../../access/store';
import type { Runtime } from '../../runtime';
import type { VisitorFileSettings } from '../../media/visitor-files';

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

export const siteCommands: Record<string, Command> = {
  'site create': async (rt, args) => {
    const site = await rt.services.access.createSite(required(args, 'name'), rt.services.siteAdmin.byOperator('site.created'));
    return { json: site, text: `site ${site.id} "${site.name}" created` };
  },
  'site list': async (rt) => {
    const sites = await sitesWithFiles(rt);
    return { json: { sites }, text: sites.map(siteLine).join('\n') || '(no sites)' };
  },
  /**
   * The chat window's settings of a site:
   *   --allowed-origins https://a.example,https://b.example   (replaces the list; "" clears it)
   *   --identity-mode off|optional|enforce                    (makes a secret on first use, shown once)
   *   --identity-secret rotate                                (a new secret, shown once; the old one stops at once)
   *   --visitor-files on|off                                  (whether visitors may send files)
   *   --visitor-file-types image/*,application/pdf            (the types they may send; "" or any: every type)
   */
  'site update': async (rt, args) => {
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
      const actions = [...(mode !== undefined ? [`site.identity_mode_changed.${mode}`] : []), ...(secret === 'rotate' ? ['site.identity_secret_rotated'] : [])];
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
};
