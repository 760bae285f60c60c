import type { Command } from '../admin';
import { required } from '../args';

export const siteCommands: Record<string, Command> = {
  'site create': async (rt, args) => {
    const site = await rt.services.access.createSite(required(args, 'name'));
    return { json: site, text: `site ${site.id} "${site.name}" created` };
  },
  'site list': async (rt) => {
    const sites = await rt.services.access.listSites();
    return { json: { sites }, text: sites.map((s) => `${s.id}  ${s.name}`).join('\n') || '(no sites)' };
  },
};
