import { CliError, Command, required } from '../args';
import { IDENTITY_MODES } from '../../access/service';
import type { IdentityMode } from '../../access/store';

type SiteLine = { id: string; name: string; allowedOrigins: string[]; identityMode: string };

function siteLine(s: SiteLine): string {
  const origins = s.allowedOrigins.length ? s.allowedOrigins.join(',') : '(no allowed origins: the chat window is off)';
  return `${s.id}  ${s.name}  origins: ${origins}  identity: ${s.identityMode}`;
}

export const siteCommands: Record<string, Command> = {
  'site create': async (rt, args) => {
    const site = await rt.services.access.createSite(required(args, 'name'));
    return { json: site, text: `site ${site.id} "${site.name}" created` };
  },
  'site list': async (rt) => {
    const sites = await rt.services.access.listSites();
    return { json: { sites }, text: sites.map(siteLine).join('\n') || '(no sites)' };
  },
  /**
   * The chat window's settings of a site:
   *   --allowed-origins https://a.example,https://b.example   (replaces the list; "" clears it)
   *   --identity-mode off|optional|enforce                    (makes a secret on first use, shown once)
   *   --identity-secret rotate                                (a new secret, shown once; the old one stops at once)
   */
  'site update': async (rt, args) => {
    const siteId = required(args, 'site');
    const access = rt.services.access;
    const origins = args.flags['allowed-origins'];
    const mode = args.flags['identity-mode'];
    const secret = args.flags['identity-secret'];
    if (origins === undefined && mode === undefined && secret === undefined) {
      throw new CliError('give --allowed-origins, --identity-mode or --identity-secret rotate');
    }
    if (origins === true) throw new CliError('--allowed-origins needs a value');
    if (mode !== undefined && !IDENTITY_MODES.includes(mode as IdentityMode)) throw new CliError(`--identity-mode is one of ${IDENTITY_MODES.join(', ')}`);
    if (secret !== undefined && secret !== 'rotate') throw new CliError('--identity-secret takes only "rotate"');
    if (typeof origins === 'string') {
      await access.setAllowedOrigins(siteId, origins.split(',').map((o) => o.trim()).filter(Boolean));
    }
    let identitySecret: string | undefined;
    if (mode !== undefined || secret !== undefined) {
      const r = await access.setIdentity(siteId, { mode: mode as IdentityMode | undefined, rotateSecret: secret === 'rotate' });
      identitySecret = r.identitySecret;
    }
    const site = (await access.listSites()).find((s) => s.id === siteId)!;
    const json = identitySecret ? { ...site, identitySecret } : site;
    const shown = identitySecret ? `\nidentity secret (shown once, keep it on your server): ${identitySecret}` : '';
    return { json, text: siteLine(site) + shown };
  },
};
