/**
 * `npm run bench -- [flags]` (each flag also as an environment variable, e.g. BENCH_ROUNDS=5):
 *   --parts=read,depth,writes,memory,scaleout,delivery,live,cross-live,inbox,inbox-live,markdown,search,start,media,agent-alerts,visitor,soak   which parts to run (default: all);
 *                                `--parts=dataset` only builds (or checks) the cached data sets
 *   --engine=mysql|sqlite|both   where the read, write, scale-out, live, inbox and search parts run (default mysql; depth runs on both)
 *   --rounds=3                   alternated rounds of service and baseline; medians are reported
 *   --seconds=10                 length of one timed run (after a 2 s warm-up)
 *   --messages=1000000           data-set size (the rest of the shape is fixed, see dataset.ts); the search part's message entries (at most 100,000 on SQLite)
 *   --depth-pages=1000           the deep page of the depth part
 *   --rebuild                    rebuild the cached data set
 *   --database-url=mysql://root@127.0.0.1:3306   the MariaDB server (no database name)
 *   --out=bench-results.md       where the results table is written besides stdout
 *   --quiet-wait=30              seconds to wait for a quiet machine before each timed run
 *   --soak-minutes=10            length of the soak part (reads held without a pause, one window a minute)
 *   --quick                      shorter delivery runs (scripts/bench/delivery.ts) and fewer inbox live messages (scripts/bench/inbox.ts)
 */
export type Part =
  | 'dataset'
  | 'read'
  | 'depth'
  | 'writes'
  | 'memory'
  | 'scaleout'
  | 'delivery'
  | 'live'
  | 'cross-live'
  | 'inbox'
  | 'inbox-live'
  | 'markdown'
  | 'search'
  | 'start'
  | 'media'
  | 'agent-alerts'
  | 'visitor'
  | 'soak';
export type Engine = 'mysql' | 'sqlite';
export const ALL_PARTS: Part[] = [
  'read',
  'depth',
  'writes',
  'memory',
  'scaleout',
  'delivery',
  'live',
  'cross-live',
  'inbox',
  'inbox-live',
  'markdown',
  'search',
  'start',
  'media',
  'agent-alerts',
  'visitor',
  'soak',
];

export interface BenchOptions {
  parts: Part[];
  engines: Engine[];
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  messages: number;
  depthPages: number;
  rebuild: boolean;
  mysqlServerUrl: string;
  out: string;
  quietWaitSeconds: number;
  quick: boolean;
  soakMinutes: number;
}

function flagValue(argv: string[], name: string): string | undefined {
  const envName = `BENCH_${name.toUpperCase().replace(/-/g, '_')}`;
  for (const arg of argv) {
    if (arg === `--${name}`) return 'true';
    if (arg.startsWith(`--${name}=`)) return arg.slice(name.length + 3);
  }
  return process.env[envName];
}

function positiveInt(text: string | undefined, fallback: number, name: string): number {
  if (text === undefined || text === '') return fallback;
  const n = Number(text.replace(/_/g, ''));
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got "${text}"`);
  return n;
}

export function parseOptions(argv: string[] = process.argv.slice(2)): BenchOptions {
  const known = [
    'parts',
    'engine',
    'rounds',
    'seconds',
    'warmup-seconds',
    'messages',
    'depth-pages',
    'rebuild',
    'database-url',
    'out',
    'quiet-wait',
    'quick',
    'soak-minutes',
  ];
  for (const arg of argv) {
    const name = arg.replace(/^--/, '').split('=')[0];
    if (!arg.startsWith('--') || !known.includes(name)) throw new Error(`unknown argument "${arg}"; known: ${known.map((k) => `--${k}`).join(' ')}`);
  }
  const partsText = flagValue(argv, 'parts');
  const parts = partsText ? (partsText.split(',').map((p) => p.trim()) as Part[]) : ALL_PARTS;
  for (const part of parts)
    if (part !== 'dataset' && !ALL_PARTS.includes(part)) throw new Error(`unknown part "${part}"; parts are dataset, ${ALL_PARTS.join(', ')}`);
  const engineText = flagValue(argv, 'engine') ?? 'mysql';
  if (!['mysql', 'sqlite', 'both'].includes(engineText)) throw new Error(`--engine is mysql, sqlite or both, got "${engineText}"`);
  const engines: Engine[] = engineText === 'both' ? ['mysql', 'sqlite'] : [engineText as Engine];
  return {
    parts,
    engines,
    rounds: positiveInt(flagValue(argv, 'rounds'), 3, 'rounds'),
    seconds: positiveInt(flagValue(argv, 'seconds'), 10, 'seconds'),
    warmupSeconds: positiveInt(flagValue(argv, 'warmup-seconds'), 2, 'warmup-seconds'),
    messages: positiveInt(flagValue(argv, 'messages'), 1_000_000, 'messages'),
    depthPages: positiveInt(flagValue(argv, 'depth-pages'), 1000, 'depth-pages'),
    rebuild: ['true', '1'].includes(flagValue(argv, 'rebuild') ?? ''),
    mysqlServerUrl: (flagValue(argv, 'database-url') ?? 'mysql://root@127.0.0.1:3306').replace(/\/+$/, ''),
    out: flagValue(argv, 'out') ?? 'bench-results.md',
    quietWaitSeconds: positiveInt(flagValue(argv, 'quiet-wait'), 30, 'quiet-wait'),
    quick: ['true', '1'].includes(flagValue(argv, 'quick') ?? ''),
    soakMinutes: positiveInt(flagValue(argv, 'soak-minutes'), 10, 'soak-minutes'),
  };
}
