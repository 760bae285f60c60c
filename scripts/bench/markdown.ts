/**
 * The chat window's markdown parser on a million characters of one markup run each: the CPU time of
 * a parse beside a bare baseline that reads the same characters once (the split into lines and a
 * pass over every character), as a ratio. The tests only bound the parse's growth with its length
 * (test/window/markdown.test.ts); the absolute figure is here.
 */
import type { BenchContext } from './context';
import { BenchRow, median } from './measure';
import { parseMarkdown } from '../../server/window/browser/markdown';

const LENGTH = 1_000_000;
/** The run that took 13 s before look-aheads were shared, and the two that cost the parser most since. */
const RUNS = ['[', '*', '[*_'];
/** The parser's own line terminators (server/window/browser/markdown.ts). */
const LINE_BREAK = /\r\n|[\n\r\v\f\x85\u2028\u2029]/;

function cpuMs(run: () => unknown): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

/** Reads every character once, line by line: the least any parser of these lines does. */
function bareRead(src: string): number {
  let odd = 0;
  for (const line of src.split(LINE_BREAK)) for (let i = 0; i < line.length; i++) odd += line.charCodeAt(i) & 1;
  return odd;
}

/** One row per markup run; `length` is a million characters unless a test asks for fewer. */
export async function runMarkdownPart(ctx: BenchContext, length = LENGTH): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const unit of RUNS) {
    const src = unit.repeat(Math.ceil(length / unit.length));
    const note = await ctx.quiet();
    ctx.log(`markdown: ${JSON.stringify(unit)} x ${src.length / unit.length}`);
    parseMarkdown(src); // warm-up: the first parse of a shape compiles the parser's paths for it
    bareRead(src);
    const parse: number[] = [];
    const bare: number[] = [];
    for (let round = 0; round < Math.max(3, ctx.options.rounds); round++) {
      parse.push(cpuMs(() => parseMarkdown(src)));
      bare.push(cpuMs(() => bareRead(src)));
    }
    const [value, baseline] = [median(parse), median(bare)];
    rows.push({
      what: `markdown: parse ${length.toLocaleString('en-US')} characters of \`${unit}\` (chat window; baseline: split into lines, read each character once)`,
      value,
      unit: 'ms CPU',
      baseline,
      ratio: value / baseline,
      note: [`ratio = parse time / baseline time; rounds: ${parse.map((ms) => Math.round(ms)).join(', ')} ms`, note].filter(Boolean).join('; '),
    });
  }
  return rows;
}
