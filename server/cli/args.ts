import type { Runtime } from '../runtime';

/** A usage mistake: printed as is, with no code. */
export class CliError extends Error {}

/** What one CLI command does: what to print, `json` with --json, `text` otherwise. */
export type Run = (rt: Runtime, args: Parsed) => Promise<{ json: unknown; text: string }>;

/** One option of a command: with `value` it takes one (its placeholder in the help), without it is a switch. */
export interface OptionSpec {
  name: string;
  value?: string;
  help: string;
  /** May be given more than once (--file a --file b). */
  repeats?: boolean;
}

/**
 * One command, with the one definition of its options: the parser accepts exactly these (and the
 * global ones) and the help lists exactly these, so the two cannot drift apart.
 */
export interface Command {
  summary: string;
  /** Words after the command name, e.g. `<key id>`. */
  operands?: string;
  options: OptionSpec[];
  run: Run;
}

export interface Parsed {
  positional: string[];
  flags: Record<string, string | true>;
  /** Flags that may repeat (--file a --file b). */
  lists: Record<string, string[]>;
}

/** Options every command takes. */
export const GLOBAL_OPTIONS: OptionSpec[] = [
  { name: 'json', help: 'print exactly one JSON object on stdout' },
  { name: 'help', help: "print this command's usage and options" },
];

/**
 * The settings every command reads from the CLI's OWN environment (a process of its own: it does not
 * see the server's environment), with what each one does here.
 */
export const CLI_ENV: Record<string, string> = {
  DATABASE_URL: 'the database (unset: SQLite in DATA_DIR); the same as the server',
  DATA_DIR: 'the SQLite database, media files and the generated master.key; the same as the server',
  MASTER_KEY: "the server's master key, when it is set there (refused when it does not match the database)",
  DATABASE_CONNECT_TIMEOUT_SECONDS: 'how long to wait for MySQL/MariaDB to answer (default 60)',
  REDIS_URL: 'tells running servers of what the command changed (live updates)',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true: accept loopback and private event addresses (webhook set)',
  LOG_LEVEL: 'log level of messages on stderr (default info)',
};

/** The command name: the first two words, when both are words and not options. */
export function commandName(argv: string[]): string {
  return argv
    .slice(0, 2)
    .filter((a) => !a.startsWith('--'))
    .join(' ');
}

/**
 * `--flag value` / `--flag=value` / `--switch`, checked against the command's options: an unknown
 * option is named as such (with the closest known one), never taken for another's value.
 */
export function parseArgs(argv: string[], options: OptionSpec[] = []): Parsed {
  const known = new Map([...GLOBAL_OPTIONS, ...options].map((o) => [o.name, o]));
  const out: Parsed = { positional: [], flags: {}, lists: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      out.positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(2, eq) : a.slice(2);
    const spec = known.get(name);
    if (!spec) {
      const near = closest(name, [...known.keys()]);
      throw new CliError(`unknown option --${name}${near ? ` (did you mean --${near}?)` : ''}`);
    }
    let value: string | true;
    if (!spec.value) {
      if (eq > 0) throw new CliError(`--${name} takes no value`);
      value = true;
    } else if (eq > 0) value = a.slice(eq + 1);
    else {
      if (i + 1 >= argv.length || argv[i + 1].startsWith('--')) throw new CliError(`--${name} needs a value (--${name} ${spec.value})`);
      value = argv[++i];
    }
    if (typeof value === 'string' && !spec.repeats && out.lists[name]) throw new CliError(`--${name} is given twice`);
    out.flags[name] = value;
    if (typeof value === 'string') (out.lists[name] ??= []).push(value);
  }
  return out;
}

/** The known name within two edits of a mistyped one (a missing, extra, changed or swapped letter). */
export function closest(name: string, candidates: string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const c of candidates) {
    const d = editDistance(name, c);
    if (d <= 2 && d < name.length && (!best || d < best.distance)) best = { name: c, distance: d };
  }
  return best?.name;
}

/** Damerau-Levenshtein distance (optimal string alignment). */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** A command's own help: usage, every option, and the settings it reads from its environment. */
export function commandHelp(name: string, command: Command): string {
  const width = Math.max(...[...command.options, ...GLOBAL_OPTIONS].map((o) => optionLabel(o).length));
  const lines = (opts: OptionSpec[]) => opts.map((o) => `  ${optionLabel(o).padEnd(width)}  ${o.help}`).join('\n');
  const env = Object.keys(CLI_ENV).map((k) => `  ${k.padEnd(32)}  ${CLI_ENV[k]}`);
  return [
    `usage: npm run --silent admin -- ${name}${command.operands ? ' ' + command.operands : ''}${command.options.length ? ' [options]' : ''} [--json]`,
    '',
    command.summary,
    ...(command.options.length ? ['', 'options:', lines(command.options)] : []),
    '',
    'every command:',
    lines(GLOBAL_OPTIONS),
    '',
    "settings read from the CLI's own environment (not the server's):",
    ...env,
  ].join('\n');
}

function optionLabel(o: OptionSpec): string {
  return `--${o.name}${o.value ? ' ' + o.value : ''}${o.repeats ? ' (repeatable)' : ''}`;
}

export function required(args: Parsed, name: string): string {
  const v = args.flags[name];
  if (typeof v !== 'string' || v === '') throw new CliError(`--${name} is required`);
  return v;
}

/** `--site`, checked to exist (the site's 404 otherwise), for commands that act within one site. */
export async function requiredSite(rt: Runtime, args: Parsed): Promise<string> {
  const siteId = required(args, 'site');
  await rt.services.access.getSite(siteId);
  return siteId;
}

/** An option's value when it was given. */
export function optional(args: Parsed, name: string): string | undefined {
  const v = args.flags[name];
  return typeof v === 'string' ? v : undefined;
}

/** The option most commands take. */
export const SITE_OPTION: OptionSpec = { name: 'site', value: 'S', help: 'the site (ws_...)' };
