import { Command, required } from '../args';
import { CLI_ACTOR } from '../../accounts/common';

/** A site's tags (docs/manage.md, "Tags"): the owners' list in the dashboard, by the operator, audited as such. */
export const tagCommands: Record<string, Command> = {
  'tag list': async (rt, args) => {
    const siteId = required(args, 'site');
    await rt.services.access.getSite(siteId); // 404 for a site that does not exist
    const tags = await rt.services.tags.list(siteId);
    return { json: { tags }, text: tags.length ? tags.map((t) => `${t.id}  ${t.name}`).join('\n') : '(no tags)' };
  },

  'tag add': async (rt, args) => {
    const siteId = required(args, 'site');
    await rt.services.access.getSite(siteId);
    const tag = await rt.services.tags.create(CLI_ACTOR, siteId, { name: required(args, 'name') });
    return { json: tag, text: `tag ${tag.id} "${tag.name}" added to ${siteId}` };
  },

  'tag rename': async (rt, args) => {
    const siteId = required(args, 'site');
    await rt.services.access.getSite(siteId);
    const tag = await rt.services.tags.rename(CLI_ACTOR, siteId, required(args, 'tag'), { name: required(args, 'name') });
    return { json: tag, text: `tag ${tag.id} renamed "${tag.name}"` };
  },

  'tag remove': async (rt, args) => {
    const siteId = required(args, 'site');
    await rt.services.access.getSite(siteId);
    const id = required(args, 'tag');
    await rt.services.tags.remove(CLI_ACTOR, siteId, id);
    return { json: { id, deleted: true }, text: `tag ${id} deleted (and taken off its conversations)` };
  },
};
