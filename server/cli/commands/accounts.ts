import { CliError, Command, required, SITE_OPTION } from '../args';
import { randomBase62 } from '../../platform/crypto';
import { CLI_ACTOR } from '../../accounts/common';
import { ROLES, Role } from '../../accounts/store';

/** Everything on stdin, without its trailing line break (`printf '%s' "$PW" |` or `echo "$PW" |` alike). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/**
 * Accounts of the management API, and the first owner of a site: `account create` then
 * `member add --role owner`. The password never appears on the command line (where `ps` and the
 * shell's history would show it): it is read from stdin with --password-stdin, or generated and
 * printed once.
 */
export const accountCommands: Record<string, Command> = {
  'account create': {
    summary: 'Makes an account of the management API; the password is generated and shown once, or read from stdin.',
    options: [
      { name: 'email', value: 'E', help: 'its sign-in email' },
      { name: 'password-stdin', help: 'read the password from stdin instead of generating one' },
    ],
    run: async (rt, args) => {
      const email = required(args, 'email');
      const fromStdin = args.flags['password-stdin'] === true;
      const password = fromStdin ? await readStdin() : randomBase62(18);
      const account = await rt.services.accounts.registry.create(email, password);
      const json = fromStdin ? { account } : { account, password };
      const text =
        `account ${account.id} <${account.email}> created` +
        (fromStdin ? '' : `\n\n  password: ${password}\n\nThis is the only time the password is shown; only its hash is stored.`);
      return { json, text };
    },
  },
  'account list': {
    summary: 'Lists the accounts and their sites.',
    options: [],
    run: async (rt) => {
      const accounts = await rt.services.accounts.registry.list();
      return {
        json: { accounts },
        text: accounts.map((a) => `${a.id}  ${a.email}  ${a.sites.map((s) => `${s.id}:${s.role}`).join(',') || '(no sites)'}`).join('\n') || '(no accounts)',
      };
    },
  },
  /**
   * A new setup link while no account exists (the one a start prints, for when it expired or
   * several instances printed theirs): the earlier link stops.
   */
  'setup link': {
    summary: 'Prints a new one-time link for the first owner while no account exists.',
    options: [],
    run: async (rt) => {
      const link = await rt.services.accounts.setup.issueLink();
      if (!link) throw new CliError('an account exists already: its owners invite the others (or: account create, member add)');
      return { json: link, text: `one-time setup link for the first owner, valid until ${link.expiresAt}:\n\n  ${link.url}\n` };
    },
  },
  'member add': {
    summary: 'Gives an account a role on a site.',
    options: [
      SITE_OPTION,
      { name: 'email', value: 'E', help: "the account's verified email" },
      { name: 'role', value: 'owner|agent', help: 'the role on the site' },
    ],
    run: async (rt, args) => {
      const role = required(args, 'role');
      if (!ROLES.includes(role as Role)) throw new CliError(`--role is one of ${ROLES.join(', ')}`);
      const member = await rt.services.accounts.members.add(CLI_ACTOR, required(args, 'site'), required(args, 'email'), role as Role);
      return { json: member, text: `${member.email} (${member.accountId}) is ${member.role} of ${member.siteId}` };
    },
  },
};
