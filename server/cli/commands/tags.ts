import { Command, required, requiredSite, SITE_OPTION } from '../args';
import { CLI_ACTOR } from '../../accounts/common';

const TAG_OPTION = { name: 'tag', value: 'T', help: "the tag's id (tag list shows them)" };
const NAME_OPTION = { name: 'name', value: 'N', help: 'the name: 1 to 50 characters, unique in the site without regard to case' };

/** A site's tags (docs/manage.md, "Tags"): the owners' list in the dashboard, by the operator, audited as such. */
export const tagCommands: Record<string, Command> = {
  'tag list': {
    summary: "Lists a site's tags.",
    options: [SITE_OPTION],
    run: async (rt, args) => {
      const siteId = await requiredSite(rt, args);
      const tags = await rt.services.tags.list(siteId);
      return { json: { tags }, text: tags.length ? tags.map((t) => `${t.id}  ${t.name}`).join('\n') : '(no tags)' };
    },
  },

  'tag add': {
    summary: 'Adds a tag to a site.',
    options: [SITE_OPTION, NAME_OPTION],
    run: async (rt, args) => {
      const siteId = await requiredSite(rt, args);
      const tag = await rt.services.tags.create(CLI_ACTOR, siteId, { name: required(args, 'name') });
      return { json: tag, text: `tag ${tag.id} "${tag.name}" added to ${siteId}` };
    },
  },

  'tag rename': {
    summary: 'Renames a tag; conversations carrying it show the new name.',
    options: [SITE_OPTION, TAG_OPTION, NAME_OPTION],
    run: async (rt, args) => {
      const siteId = await requiredSite(rt, args);
      const tag = await rt.services.tags.rename(CLI_ACTOR, siteId, required(args, 'tag'), { name: required(args, 'name') });
      return { json: tag, text: `tag ${tag.id} renamed "${tag.name}"` };
    },
  },

  'tag remove': {
    summary: 'Deletes a tag and takes it off its conversations.',
    options: [SITE_OPTION, TAG_OPTION],
    run: async (rt, args) => {
      const siteId = await requiredSite(rt, args);
      const id = required(args, 'tag');
      await rt.services.tags.remove(CLI_ACTOR, siteId, id);
      return { json: { id, deleted: true }, text: `tag ${id} deleted (and taken off its conversations)` };
    },
  },
};
