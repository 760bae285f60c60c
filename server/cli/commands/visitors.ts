import { CliError, Command, required, requiredSite, SITE_OPTION } from '../args';
import { CLI_ACTOR } from '../../accounts/common';

export const visitorCommands: Record<string, Command> = {
  /**
   * Voids the chat window's access of one visitor (--visitor V) or of every visitor of the site
   * (--all): their visitor credentials and open sessions are refused at their next request.
   */
  'visitor revoke': {
    summary: "Voids the chat window's access of one visitor, or of every visitor of the site.",
    options: [SITE_OPTION, { name: 'visitor', value: 'V', help: "the visitor's id" }, { name: 'all', help: 'every visitor of the site' }],
    run: async (rt, args) => {
      const siteId = required(args, 'site');
      const visitor = args.flags.visitor;
      const all = args.flags.all === true;
      if (all === (visitor !== undefined)) throw new CliError('give --visitor V or --all');
      if (visitor === true || visitor === '') throw new CliError('--visitor needs a value');
      // The management API's revocation, by the operator (audited as such).
      const r = await rt.services.siteAdmin.revokeVisitors(CLI_ACTOR, siteId, all ? null : (visitor as string));
      const who = r.visitorId === null ? `every visitor of ${r.siteId}` : `visitor ${r.visitorId} of ${r.siteId}`;
      return { json: r, text: `${who}: window credentials and sessions begun at or before ${r.revokedBefore} are void` };
    },
  },

  /**
   * Deletes a visitor's data (docs/window.md, "Deleting a visitor's data"): its conversations,
   * messages, files, context, name, email and attributes, in short batches; audited as the
   * operator. Run it again to finish a run that was cut short.
   */
  'visitor delete': {
    summary: "Deletes a visitor's data: conversations, messages, files, context and attributes.",
    options: [SITE_OPTION, { name: 'visitor', value: 'V', help: "the visitor's id" }],
    run: async (rt, args) => {
      const visitorId = required(args, 'visitor');
      const siteId = await requiredSite(rt, args);
      const r = await rt.services.visitors.deletion.deleteVisitor(CLI_ACTOR, siteId, visitorId);
      const counts = Object.entries(r.removed)
        .map(([what, n]) => `${what} ${n}`)
        .join(', ');
      return { json: r, text: `visitor ${r.visitorId} of ${r.siteId}: data deleted (${counts})` };
    },
  },
};
