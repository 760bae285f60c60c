/**
 * The operator CLI: the dashboard's functions (docs/api.md, "Access keys and the operator CLI").
 * `npm run --silent admin -- <command> [--json]`. With --json every command prints exactly one
 * JSON object on stdout; errors go to stderr with a non-zero exit.
 */
import { loadConfig } from '../config';
import { openRuntime } from '../runtime';
import { parseArgs, CliError, Command } from './args';
import { ApiError } from '../platform/errors';
import { siteCommands } from './commands/sites';
import { keyCommands } from './commands/keys';
import { chatCommands } from './commands/chat';
import { webhookCommands } from './commands/webhooks';
import { visitorCommands } from './commands/visitors';
import { accountCommands } from './commands/accounts';
import { tagCommands } from './commands/tags';

const commands: Record<string, Command> = {
  ...siteCommands,
  ...keyCommands,
  ...chatCommands,
  ...webhookCommands,
  ...visitorCommands,
  ...accountCommands,
  ...tagCommands,
};

const USAGE = `usage: npm run --silent admin -- <command> [options] [--json]

commands:
  site create --name N
  site list
  site update --site S [--allowed-origins A,B] [--identity-mode off|optional|enforce] [--identity-secret rotate]
              [--visitor-files on|off] [--visitor-file-types image/*,application/pdf]
  key create --site S --scopes conversations:read,conversations:write,media:read [--label L]
  key list --site S
  key revoke K
  visitor say --site S --visitor V --content C [--file F]...
  visitor revoke --site S (--visitor V | --all)
  visitor delete --site S --visitor V
  agent say --conversation C --content C
  tag list --site S
  tag add --site S --name N
  tag rename --site S --tag T --name N
  tag remove --site S --tag T
  account create --email E [--password-stdin]
  account list
  member add --site S --email E --role owner|agent
  setup link
${Object.keys(commands)
  .filter((c) => c.startsWith('webhook'))
  .map((c) => `  ${c} ...`)
  .join('\n')}`;

async function main(argv: string[]) {
  const args = parseArgs(argv);
  const name = args.positional.slice(0, 2).join(' ');
  const command = commands[name];
  if (args.flags.help) {
    process.stdout.write(USAGE + '\n');
    return;
  }
  if (!command) throw new CliError(`unknown command "${name}"\n${USAGE}`);
  // Logs go to stderr so --json output stays one JSON object.
  const runtime = await openRuntime(loadConfig());
  try {
    const result = await command(runtime, { ...args, positional: args.positional.slice(2) });
    process.stdout.write(args.flags.json ? JSON.stringify(result.json) + '\n' : result.text + '\n');
  } finally {
    await runtime.close();
  }
}

/**
 * How every failure reads on stderr, whichever command it came from: a service's error with its
 * code (the API's codes) and the problems it lists, anything else by its message.
 */
function formatError(err: unknown): string {
  if (err instanceof ApiError) {
    const details = (err.details ?? []).map((d) => `\n  ${d.path}: ${d.message}`).join('');
    return `error: ${err.code}: ${err.message}${details}`;
  }
  return `error: ${err instanceof Error ? err.message : String(err)}`;
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(formatError(err) + '\n');
  process.exit(1);
});
