/**
 * The operator CLI: the dashboard's functions (docs/api.md, "Access keys and the operator CLI").
 * `npm run --silent admin -- <command> [--json]`. With --json every command prints exactly one
 * JSON object on stdout; errors go to stderr with a non-zero exit.
 */
import { loadConfig } from '../config';
import { openRuntime } from '../runtime';
import pino from 'pino';
import { parseArgs, CliError, commandName, closest, commandHelp, CLI_ENV } from './args';
import { createLogger } from '../platform/logger';
import { ApiError } from '../platform/errors';
import { commands } from './commands';

/** The global help: every command with its summary; `<command> --help` gives its options. */
function usage(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  return [
    'usage: npm run --silent admin -- <command> [options] [--json]',
    '       npm run --silent admin -- <command> --help   (its options and the settings it reads)',
    '',
    'commands:',
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    '',
    "settings read from the CLI's own environment (not the server's):",
    ...Object.keys(CLI_ENV).map((k) => `  ${k}`),
  ].join('\n');
}

async function main(argv: string[]) {
  const name = commandName(argv);
  const command = commands[name];
  if (!command) {
    if (argv.length === 0 || argv.includes('--help')) {
      process.stdout.write(usage() + '\n');
      return;
    }
    const near = closest(name, Object.keys(commands));
    throw new CliError(`unknown command "${name}"${near ? ` (did you mean "${near}"?)` : ''}; npm run --silent admin -- --help lists them`);
  }
  const args = parseArgs(argv.slice(name.split(' ').length), command.options);
  if (args.flags.help) {
    process.stdout.write(commandHelp(name, command) + '\n');
    return;
  }
  // Logs go to stderr so --json output stays one JSON object.
  const config = loadConfig();
  const runtime = await openRuntime(config, { logger: createLogger(config.logLevel, pino.destination(2)) });
  try {
    const result = await command.run(runtime, args);
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
