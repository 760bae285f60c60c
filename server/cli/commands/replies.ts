import fs from 'node:fs';
import { CliError, Command, Parsed, required, requiredSite, SITE_OPTION } from '../args';
import { CLI_ACTOR } from '../../accounts/common';

const REPLY_OPTION = { name: 'reply', value: 'R', help: "the shared reply's id (shared-reply list shows them)" };
const TITLE_OPTION = { name: 'title', value: 'T', help: 'one line, 1 to 60 characters, unique in the site without regard to case' };
const BODY_OPTION = { name: 'body', value: 'B', help: 'the text (markdown, placeholders such as {visitor.name|there}); or --body-file' };
const BODY_FILE_OPTION = { name: 'body-file', value: 'F', help: 'read the text from a file (UTF-8), for text of several lines' };

/** The text from --body or --body-file (exactly one of them when `needed`). */
function bodyOf(args: Parsed, needed: boolean): string | undefined {
  const inline = args.flags.body;
  const file = args.flags['body-file'];
  if (inline !== undefined && file !== undefined) throw new CliError('give --body or --body-file, not both');
  if (typeof file === 'string') return readText(file);
  if (typeof inline === 'string') return inline;
  if (needed) throw new CliError('--body (or --body-file) is required');
  return undefined;
}

function readText(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** An import file: `[{title, body}, ...]` or `{"replies": [...]}` (the management API's body). */
function importFile(file: string): { title: string; body: string }[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readText(file));
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError(`${file} is not JSON: ${(err as Error).message}`);
  }
  const list = Array.isArray(parsed) ? parsed : (parsed as { replies?: unknown } | null)?.replies;
  const valid =
    Array.isArray(list) &&
    list.length > 0 &&
    list.length <= 200 &&
    list.every(
      (r) => typeof r === 'object' && r !== null && typeof (r as { title?: unknown }).title === 'string' && typeof (r as { body?: unknown }).body === 'string',
    );
  if (!valid) throw new CliError(`${file}: expected 1 to 200 replies as [{"title": "...", "body": "..."}] or {"replies": [...]}`);
  return list as { title: string; body: string }[];
}

/** A site's shared replies (docs/manage.md, "Shared replies"): the owners' list, kept by the operator and audited as such. */
export const sharedReplyCommands: Record<string, Command> = {
  'shared-reply list': {
    summary: "Lists a site's shared replies, by title.",
    options: [SITE_OPTION],
    run: async (rt, args) => {
      const replies = await rt.services.replies.list(await requiredSite(rt, args));
      return {
        json: { replies },
        text: replies.length ? replies.map((r) => `${r.id}  ${r.title}  (${r.body.length} characters)`).join('\n') : '(no shared replies)',
      };
    },
  },

  'shared-reply add': {
    summary: 'Adds a shared reply to a site.',
    options: [SITE_OPTION, TITLE_OPTION, BODY_OPTION, BODY_FILE_OPTION],
    run: async (rt, args) => {
      const siteId = await requiredSite(rt, args);
      const reply = await rt.services.replies.create(CLI_ACTOR, siteId, { title: required(args, 'title'), body: bodyOf(args, true)! });
      return { json: reply, text: `shared reply ${reply.id} "${reply.title}" added to ${siteId}` };
    },
  },

  'shared-reply edit': {
    summary: "Changes a shared reply's title, text or both.",
    options: [SITE_OPTION, REPLY_OPTION, { ...TITLE_OPTION, help: `the new title: ${TITLE_OPTION.help}` }, BODY_OPTION, BODY_FILE_OPTION],
    run: async (rt, args) => {
      const siteId = await requiredSite(rt, args);
      const title = typeof args.flags.title === 'string' ? args.flags.title : undefined;
      const body = bodyOf(args, false);
      if (title === undefined && body === undefined) throw new CliError('nothing to change: give --title, --body or --body-file');
      const reply = await rt.services.replies.update(CLI_ACTOR, siteId, required(args, 'reply'), { title, body });
      return { json: reply, text: `shared reply ${reply.id} "${reply.title}" changed` };
    },
  },

  'shared-reply remove': {
    summary: 'Deletes a shared reply.',
    options: [SITE_OPTION, REPLY_OPTION],
    run: async (rt, args) => {
      const siteId = await requiredSite(rt, args);
      const id = required(args, 'reply');
      await rt.services.replies.remove(CLI_ACTOR, siteId, id);
      return { json: { id, deleted: true }, text: `shared reply ${id} deleted` };
    },
  },

  'shared-reply import': {
    summary: 'Adds many shared replies from a JSON file; those that cannot be added are listed with the reason.',
    options: [SITE_OPTION, { name: 'file', value: 'F', help: 'JSON: [{"title": "...", "body": "..."}] or {"replies": [...]}, 1 to 200' }],
    run: async (rt, args) => {
      const siteId = await requiredSite(rt, args);
      const result = await rt.services.replies.import(CLI_ACTOR, siteId, importFile(required(args, 'file')));
      const skipped = result.skipped.map((s) => `  skipped "${s.title}": ${s.reason} (${s.message})`);
      return { json: result, text: [`${result.imported.length} shared replies added to ${siteId}`, ...skipped].join('\n') };
    },
  },
};
