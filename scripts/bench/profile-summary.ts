/**
 * Sums a V8 .cpuprofile (node --cpu-prof) into the few lines a performance question needs:
 *
 *   npx tsx scripts/bench/profile-summary.ts .bench/profiles/CPU.*.cpuprofile [--top=25] [--focus=text]
 *
 * For each profile (or all of them together with --merge), it prints
 * - self time by category: idle, GC, program (native code V8 does not attribute), our own code
 *   (dist/ or server/), each npm package, and Node's own modules;
 * - self time attributed to the nearest JavaScript owner: time spent in Node's internals or native
 *   code (socket writes, TLS, hashing) is charged to the first frame up the stack that is our code or
 *   a package, so "socket writes" shows up as "mysql2" or "express" — whoever asked for them;
 * - inclusive time per owner (a sample counts once for every owner anywhere on its stack);
 * - the top functions by self time (name, owner, file:line).
 * A .heapprofile (node --heap-prof) is summed by live bytes instead, by owner and function.
 * Percentages are of the busy time (all samples minus idle) unless --of-all is given.
 * --focus=text keeps only samples with a frame whose function name or URL contains the text;
 * --owner=name only the samples charged to that owner (e.g. --owner=mysql2: what of mysql2 costs);
 * --skip=ms drops the first milliseconds of each profile (the process's start-up).
 */
import fs from 'node:fs';
import path from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const SPECIAL = new Set(['(idle)', '(garbage collector)', '(program)', '(root)']);

/** Who owns a frame: a package name, "own code", "node:<module>", or a special bucket. */
export function ownerOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) {
    if (SPECIAL.has(functionName)) return functionName;
    return '(native)';
  }
  if (url.startsWith('node:')) {
    const mod = url.slice(5).replace(/^internal\//, 'internal/');
    return `node:${mod
      .split('/')
      .slice(0, mod.startsWith('internal/') ? 2 : 1)
      .join('/')}`;
  }
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (/\/(dist\/)?(server|scripts|sdk)\//.test(url)) return 'own code';
  return url;
}

/** An owner that is JavaScript someone chose to call (ours or a package), not Node's machinery. */
const isUserLand = (owner: string) => !owner.startsWith('node:') && !owner.startsWith('(');

export interface Summary {
  totalMs: number;
  idleMs: number;
  busyMs: number;
  selfByOwner: Map<string, number>;
  attributedByOwner: Map<string, number>;
  inclusiveByOwner: Map<string, number>;
  selfByFunction: Map<string, number>;
}

function add(map: Map<string, number>, key: string, ms: number) {
  map.set(key, (map.get(key) ?? 0) + ms);
}

export interface Filter {
  /** Keep samples with a frame whose function name or URL contains this. */
  focus?: string;
  /** Keep samples charged to this owner (see the second table). */
  owner?: string;
  /** Drop the first this many milliseconds of each profile (start-up: module loading, schema compiling). */
  skipMs?: number;
}

export function summarise(profiles: CpuProfile[], filter: Filter = {}): Summary {
  const { focus, owner: onlyOwner, skipMs = 0 } = filter;
  const s: Summary = {
    totalMs: 0,
    idleMs: 0,
    busyMs: 0,
    selfByOwner: new Map(),
    attributedByOwner: new Map(),
    inclusiveByOwner: new Map(),
    selfByFunction: new Map(),
  };
  for (const profile of profiles) {
    const byId = new Map<number, ProfileNode>();
    const parent = new Map<number, number>();
    for (const n of profile.nodes) {
      byId.set(n.id, n);
      for (const c of n.children ?? []) parent.set(c, n.id);
    }
    const stackCache = new Map<number, { owners: Set<string>; attributed: string; matches: boolean }>();
    const stackOf = (id: number) => {
      let cached = stackCache.get(id);
      if (cached) return cached;
      const owners = new Set<string>();
      let attributed = '';
      let matches = !focus;
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const frame = byId.get(at)!.callFrame;
        const owner = ownerOf(frame);
        owners.add(owner);
        if (!attributed && isUserLand(owner)) attributed = owner;
        if (focus && (frame.functionName.includes(focus) || frame.url.includes(focus))) matches = true;
      }
      const self = ownerOf(byId.get(id)!.callFrame);
      if (SPECIAL.has(self)) attributed = self;
      else if (!attributed) attributed = `${self} (no JS caller)`;
      cached = { owners, attributed, matches };
      stackCache.set(id, cached);
      return cached;
    };
    let elapsedMs = 0;
    for (let i = 0; i < profile.samples.length; i++) {
      const ms = (profile.timeDeltas[i] ?? 0) / 1000;
      elapsedMs += ms;
      if (elapsedMs < skipMs) continue;
      const id = profile.samples[i];
      const node = byId.get(id);
      if (!node) continue;
      const stack = stackOf(id);
      if (!stack.matches || (onlyOwner && stack.attributed !== onlyOwner)) continue;
      s.totalMs += ms;
      const frame = node.callFrame;
      const owner = ownerOf(frame);
      if (owner === '(idle)') {
        s.idleMs += ms;
        continue;
      }
      add(s.selfByOwner, owner, ms);
      add(s.attributedByOwner, stack.attributed, ms);
      for (const o of stack.owners) add(s.inclusiveByOwner, o, ms);
      const file = frame.url ? `${path.basename(frame.url)}:${frame.lineNumber + 1}` : '';
      add(s.selfByFunction, `${frame.functionName || '(anonymous)'}  [${owner}${file ? ' ' + file : ''}]`, ms);
    }
  }
  s.busyMs = s.totalMs - s.idleMs;
  return s;
}

export function formatSummary(s: Summary, top = 25, ofAll = false): string {
  const base = ofAll ? s.totalMs : s.busyMs;
  const pct = (ms: number) => `${((100 * ms) / (base || 1)).toFixed(1).padStart(5)} %`;
  const table = (title: string, map: Map<string, number>, n: number) => {
    const rows = [...map].sort((a, b) => b[1] - a[1]).slice(0, n);
    return [`${title}`, ...rows.map(([k, ms]) => `  ${pct(ms)}  ${ms.toFixed(0).padStart(7)} ms  ${k}`)].join('\n');
  };
  return [
    `samples: ${s.totalMs.toFixed(0)} ms, idle ${s.idleMs.toFixed(0)} ms, busy ${s.busyMs.toFixed(0)} ms (percentages of ${ofAll ? 'all' : 'busy'} time)`,
    table('self time by owner:', s.selfByOwner, top),
    table('self time charged to the nearest JS owner (Node internals and native code go to their caller):', s.attributedByOwner, top),
    table('inclusive time by owner (anywhere on the stack):', s.inclusiveByOwner, top),
    table('top functions by self time:', s.selfByFunction, top),
  ].join('\n\n');
}

interface HeapNode {
  callFrame: CallFrame;
  selfSize: number;
  children: HeapNode[];
}

/**
 * A sampling heap profile (node --heap-prof): bytes by owner (nearest JavaScript owner, as above)
 * and by function. Node writes the samples of objects still live when the process ends (what the
 * RSS is made of), not the allocation rate: for the garbage collector's work use the CPU profile.
 */
export function formatHeapSummary(root: HeapNode, top = 25): string {
  const byOwner = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  const walk = (node: HeapNode, attributed: string) => {
    const owner = ownerOf(node.callFrame);
    const charged = isUserLand(owner) ? owner : attributed;
    if (node.selfSize) {
      total += node.selfSize;
      add(byOwner, charged || owner, node.selfSize);
      const file = node.callFrame.url ? `${path.basename(node.callFrame.url)}:${node.callFrame.lineNumber + 1}` : '';
      add(byFunction, `${node.callFrame.functionName || '(anonymous)'}  [${charged || owner}${file ? ' ' + file : ''}]`, node.selfSize);
    }
    for (const c of node.children ?? []) walk(c, charged);
  };
  walk(root, '');
  const table = (title: string, map: Map<string, number>) =>
    [
      title,
      ...[...map]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([k, b]) => `  ${((100 * b) / (total || 1)).toFixed(1).padStart(5)} %  ${(b / 1048576).toFixed(1).padStart(8)} MiB  ${k}`),
    ].join('\n');
  return [
    `sampled allocations: ${(total / 1048576).toFixed(1)} MiB`,
    table('by owner (charged to the nearest JS owner):', byOwner),
    table('by function:', byFunction),
  ].join('\n\n');
}

function main(argv: string[]) {
  const files = argv.filter((a) => !a.startsWith('--'));
  const opt = (name: string) =>
    argv
      .find((a) => a.startsWith(`--${name}=`))
      ?.split('=')
      .slice(1)
      .join('=');
  const top = Number(opt('top') ?? 25);
  const filter: Filter = { focus: opt('focus'), owner: opt('owner'), skipMs: Number(opt('skip') ?? 0) };
  const ofAll = argv.includes('--of-all');
  if (!files.length) {
    process.stderr.write(
      'usage: tsx scripts/bench/profile-summary.ts FILE.cpuprofile... [--top=25] [--focus=text] [--owner=name] [--skip=ms] [--merge] [--of-all]\n',
    );
    process.exit(2);
  }
  const heap = files.filter((f) => f.endsWith('.heapprofile'));
  for (const f of heap) process.stdout.write(`== ${f}\n${formatHeapSummary((JSON.parse(fs.readFileSync(f, 'utf8')) as { head: HeapNode }).head, top)}\n\n`);
  files.splice(0, files.length, ...files.filter((f) => !f.endsWith('.heapprofile')));
  if (!files.length) return;
  const load = (f: string) => JSON.parse(fs.readFileSync(f, 'utf8')) as CpuProfile;
  if (argv.includes('--merge')) {
    process.stdout.write(`${files.length} profiles merged\n${formatSummary(summarise(files.map(load), filter), top, ofAll)}\n`);
    return;
  }
  for (const f of files) process.stdout.write(`== ${f}\n${formatSummary(summarise([load(f)], filter), top, ofAll)}\n\n`);
}

if (require.main === module) main(process.argv.slice(2));
