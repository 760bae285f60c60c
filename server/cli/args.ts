import type { Runtime } from '../runtime';

/** A usage mistake: printed as is, with no code. */
export class CliError extends Error {}

/** One CLI command: what to print, `json` with --json, `text` otherwise. */
export type Command = (rt: Runtime, args: Parsed) => Promise<{ json: unknown; text: string }>;

export interface Parsed {
  positional: string[];
  flags: Record<string, string | true>;
  /** Flags that may repeat (--file a --file b). */
  lists: Record<string, string[]>;
}

/** Minimal `--flag value` / `--flag=value` / `--switch` parser; no dependency needed. */
export function parseArgs(argv: string[]): Parsed {
  const out: Parsed = { positional: [], flags: {}, lists: {} };
  const switches = new Set(['json', 'help', 'failed', 'all', 'password-stdin']);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      out.positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(2, eq) : a.slice(2);
    let value: string | true;
    if (eq > 0) value = a.slice(eq + 1);
    else if (switches.has(name)) value = true;
    else {
      if (i + 1 >= argv.length) throw new CliError(`--${name} needs a value`);
      value = argv[++i];
    }
    out.flags[name] = value;
    if (typeof value === 'string') (out.lists[name] ??= []).push(value);
  }
  return out;
}

export function required(args: Parsed, name: string): string {
  const v = args.flags[name];
  if (typeof v !== 'string' || v === '') throw new CliError(`--${name} is required`);
  return v;
}
