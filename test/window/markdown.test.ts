/**
 * The chat window's markdown parser against hostile messages (issue 16): every input ends, in work
 * linear in its length. A parser that loops on one API reply (a quote five levels deep, a line
 * separator in a heading) freezes every visitor's window that shows it, and one that scans ahead
 * afresh at each `[` spends 13 s on a million of them. No database here.
 */
import vm from 'node:vm';
import fc from 'fast-check';
import { Block, Inline, MAX_NESTING, Meter, parseMarkdown, safeHref } from '../../server/window/browser/markdown';

/**
 * One parse that cannot hang the test run: the vm's watchdog ends a synchronous loop after `ms` of
 * wall time (the parser runs in this realm; only the call goes through the script, and the limit
 * holds for all it calls). That limit is a liveness bound, far above any parse's time even on a busy
 * machine; the answer's `ms` is the process's CPU time for the parse, which other jobs on a busy
 * machine do not inflate the way they inflate wall time, and which the tests only compare with
 * another parse of the same run.
 */
const guarded = new vm.Script('result = parse(src, meter)');
const sandbox = vm.createContext({ parse: parseMarkdown, src: '', meter: undefined as Meter | undefined, result: undefined as Block[] | undefined });
function parse(src: string, { ms = 20_000, meter }: { ms?: number; meter?: Meter } = {}): { blocks: Block[]; ms: number } {
  Object.assign(sandbox, { src, meter, result: undefined });
  const start = process.cpuUsage();
  guarded.runInContext(sandbox, { timeout: ms });
  const cpu = process.cpuUsage(start);
  return { blocks: sandbox.result as Block[], ms: (cpu.user + cpu.system) / 1000 };
}

/**
 * Work per character of input the parser may do: rules and look-aheads read each character a bounded
 * number of times per nesting level (at most 15 seen over random and nested inputs). A scan that
 * starts afresh at each opener exceeds it on any run of a few hundred openers.
 */
const STEPS_PER_CHAR = 64;

/** The growth check's sizes: ten parses of SMALL characters read as much as one parse of LARGE. */
const LARGE = 1_000_000;
const SMALL = 100_000;
/**
 * How much more CPU time one parse of LARGE characters may take than ten parses of SMALL: about 1
 * when the work is linear in the length (0.9 to 1.9 measured, on a busy machine too), about 10 when
 * it is quadratic (10.2 and 11.1 measured with look-aheads that start afresh and are not counted).
 */
const MAX_GROWTH = 3;

/**
 * Whether `unit` repeated to a million characters parses in work linear in its length, in one
 * comparable line, with the tree. Two measures: the parser's own count of steps (exact, but blind to
 * work it does not count), then CPU time against the same run's parses of a tenth of the input, ten
 * times over: the best of each side over up to three rounds, since noise only adds time; a round
 * within MAX_GROWTH ends it, while a quadratic parser fails every round.
 */
function linearity(unit: string): { blocks: Block[]; verdict: string } {
  const large = unit.repeat(Math.ceil(LARGE / unit.length));
  const small = unit.repeat(Math.ceil(SMALL / unit.length));
  const verdict = (problem?: string) => `${JSON.stringify(unit)}: ${problem ?? 'linear'}`;
  parse(small); // warm-up: the first parse of a shape compiles the parser's paths for it
  const best = { large: Infinity, small: Infinity };
  let blocks: Block[] = [];
  for (let round = 0; round < 3; round++) {
    const meter: Meter = { steps: 0 };
    const parsed = parse(large, { meter });
    blocks = parsed.blocks;
    if (meter.steps > STEPS_PER_CHAR * (large.length + 1)) return { blocks, verdict: verdict(`${(meter.steps / large.length).toFixed(1)} steps a character`) };
    let smallMs = 0;
    for (let k = 0; k < LARGE / SMALL; k++) smallMs += parse(small, { meter: { steps: 0 } }).ms;
    best.large = Math.min(best.large, parsed.ms);
    best.small = Math.min(best.small, smallMs);
    if (best.large <= MAX_GROWTH * best.small) return { blocks, verdict: verdict() };
  }
  return { blocks, verdict: verdict(`${(best.large / best.small).toFixed(1)} times the CPU time of ten parses of a tenth`) };
}

/** A guarded parse's tree and its work in steps. */
function metered(src: string): { blocks: Block[]; steps: number } {
  const meter: Meter = { steps: 0 };
  return { blocks: parse(src, { meter }).blocks, steps: meter.steps };
}

const text = (value: string): Inline => ({ type: 'text', value });
const para = (...children: Inline[]): Block => ({ type: 'paragraph', children });
const quote = (...children: Block[]): Block => ({ type: 'quote', children });
const nested = (levels: number, inner: Block): Block => (levels === 0 ? inner : quote(nested(levels - 1, inner)));

/** The depth of quotes inside quotes in a tree, and every node in it (to check the allow-list). */
function quoteDepth(blocks: Block[]): number {
  let depth = 0;
  for (const b of blocks) if (b.type === 'quote') depth = Math.max(depth, 1 + quoteDepth(b.children));
  return depth;
}
function* nodes(blocks: Block[]): Generator<Block | Inline> {
  for (const b of blocks) {
    yield b;
    if (b.type === 'quote') yield* nodes(b.children);
    if (b.type === 'list') for (const item of b.items) yield* nodes(item);
    if (b.type === 'paragraph' || b.type === 'heading') yield* inlines(b.children);
  }
}
function* inlines(list: Inline[]): Generator<Inline> {
  for (const n of list) {
    yield n;
    if (n.type === 'strong' || n.type === 'em' || n.type === 'link') yield* inlines(n.children);
  }
}

/** Every Unicode line terminator; each ends a line. */
const TERMINATORS = ['\r\n', '\r', '\n', '\v', '\f', '\x85', '\u2028', '\u2029'];
/** Markdown-significant characters and tokens, links safe and not, and ordinary text. */
const MARKUP = [
  '[',
  ']',
  '(',
  ')',
  '](',
  '*',
  '**',
  '_',
  '__',
  '`',
  '```',
  '~~~',
  '#',
  '# ',
  '###### ',
  '>',
  '> ',
  '-',
  '- ',
  '+ ',
  '1. ',
  '2) ',
  '\\',
  '!',
  ' ',
  '  ',
  '\t',
  '\u00a0',
  'a',
  'b c',
  '.',
  'h',
  'http://e.example/x',
  'https://a.b/c.',
  'mailto:x@y.z',
  'javascript:alert(1)',
  'data:text/html,x',
  '<script>',
];
const piece = fc.constantFrom(...MARKUP, ...TERMINATORS);
/** Short mixes of pieces, long runs of one piece, and concatenations of both. */
const markdownish = fc.oneof(
  fc.array(piece, { maxLength: 60 }).map((a) => a.join('')),
  fc.tuple(fc.array(piece, { minLength: 1, maxLength: 4 }), fc.integer({ min: 1, max: 3000 })).map(([unit, n]) => unit.join('').repeat(n)),
  fc
    .array(fc.tuple(fc.array(piece, { minLength: 1, maxLength: 3 }), fc.integer({ min: 1, max: 300 })), { maxLength: 6 })
    .map((runs) => runs.map(([u, n]) => u.join('').repeat(n)).join('')),
);
const ALLOWED = new Set(['paragraph', 'heading', 'code_block', 'quote', 'list', 'text', 'code', 'strong', 'em', 'link', 'break']);

describe('the chat window markdown parser ends on every input, in linear time', () => {
  test('a fifth quote level and a heading holding a line separator: the inputs that hung the window', () => {
    const fiveDeep = [nested(MAX_NESTING, para(text('> x')))];
    expect(parse('>>>>> x').blocks).toEqual(fiveDeep);
    expect(parse('> > > > > x').blocks).toEqual(fiveDeep);
    expect(parse('# a\u2028b').blocks).toEqual([{ type: 'heading', children: [text('a')] }, para(text('b'))]);
    // Hundreds of levels: the first MAX_NESTING are quotes, the rest of the markers are text.
    expect(parse(`${'>'.repeat(500)} x`).blocks).toEqual([nested(MAX_NESTING, para(text(`${'>'.repeat(500 - MAX_NESTING)} x`)))]);
    expect(quoteDepth(parse(`${'> '.repeat(500)}x\n`.repeat(50)).blocks)).toBe(MAX_NESTING);
  });

  test.each(TERMINATORS.map((t) => [[...t].map((c) => `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`).join(' '), t]))(
    '%s ends a line, for the block rules as for the split',
    (_name, t) => {
      expect(parse(`# a${t}b`).blocks).toEqual([{ type: 'heading', children: [text('a')] }, para(text('b'))]);
      expect(parse(`a${t}b`).blocks).toEqual([para(text('a'), { type: 'break' }, text('b'))]);
      expect(parse(`> a${t}> b`).blocks).toEqual([quote(para(text('a'), { type: 'break' }, text('b')))]);
      expect(parse(`- a${t}- b`).blocks).toEqual([{ type: 'list', ordered: false, items: [[para(text('a'))], [para(text('b'))]] }]);
      expect(parse(`\`\`\`${t}<b>${t}\`\`\``).blocks).toEqual([{ type: 'code_block', value: '<b>' }]);
      expect(parse(`a${t}${t}b`).blocks).toEqual([para(text('a')), para(text('b'))]);
      expect(parse(`${'>'.repeat(9)}${t}${'> '.repeat(9)}x`).blocks).toEqual([
        nested(MAX_NESTING, para(text('>>>>>'), { type: 'break' }, text('> > > > > x'))),
      ]);
    },
  );

  test('a million `[`, or `[](` over a million characters, parse in work linear in their length', () => {
    for (const unit of ['[', '[](']) {
      const { blocks, verdict } = linearity(unit);
      expect(blocks).toEqual([para(text(unit.repeat(Math.ceil(LARGE / unit.length))))]);
      // Quadratic when every look-ahead starts afresh: 13 s and 7.6 s for a million characters.
      expect(verdict).toBe(`${JSON.stringify(unit)}: linear`);
    }
  });

  test('a million characters of any one markup run parse in work linear in their length', () => {
    const runs = [
      '*',
      '**a',
      '_ ',
      '`',
      '``a',
      'h ',
      '(http://',
      '>',
      '> ',
      '# ',
      '- ',
      '1. ',
      '\\',
      '[*_',
      '](',
      '[a](javascript:x)',
      '[a](',
      '\n',
      '\u2028>',
      '```\n',
    ];
    const verdicts = runs.map((unit) => linearity(unit).verdict);
    expect(verdicts).toEqual(runs.map((unit) => `${JSON.stringify(unit)}: linear`));
  });

  test('fast-check: any string of markup and line terminators parses, within a step bound linear in its length, into allow-listed nodes only', () => {
    fc.assert(
      fc.property(markdownish, (src) => {
        const { blocks, steps } = metered(src);
        expect(steps).toBeLessThanOrEqual(STEPS_PER_CHAR * (src.length + 1));
        expect(quoteDepth(blocks)).toBeLessThanOrEqual(MAX_NESTING);
        const refused = [...nodes(blocks)].filter((n) => !ALLOWED.has(n.type) || (n.type === 'link' && safeHref(n.href) !== n.href));
        expect(refused).toEqual([]);
      }),
      { numRuns: 1000, interruptAfterTimeLimit: 60_000, markInterruptAsFailure: true },
    );
  });

  test('fast-check: deep nesting (hundreds of quote levels, nested lists and emphasis) stays linear and capped', () => {
    const level = fc.constantFrom('>', '> ', ' >', '>\t');
    const deep = fc.tuple(
      fc.array(level, { minLength: 1, maxLength: 800 }),
      fc.constantFrom(...TERMINATORS),
      fc.integer({ min: 1, max: 20 }),
      fc.constantFrom('x', '- x', '# x', '```', '[*_x_*](https://e.example)'),
    );
    fc.assert(
      fc.property(deep, ([levels, t, lines, body]) => {
        const src = Array.from({ length: lines }, () => levels.join('') + body).join(t);
        const { blocks, steps } = metered(src);
        expect(quoteDepth(blocks)).toBe(Math.min(levels.length, MAX_NESTING));
        expect(steps).toBeLessThanOrEqual(STEPS_PER_CHAR * (src.length + 1));
      }),
      { numRuns: 100, interruptAfterTimeLimit: 60_000, markInterruptAsFailure: true },
    );
    const lists = fc.tuple(fc.integer({ min: 1, max: 500 }), fc.constantFrom('- ', '* ', '1. ', '> - '), fc.constantFrom(...TERMINATORS));
    fc.assert(
      fc.property(lists, ([depth, marker, t]) => {
        const src = Array.from({ length: depth }, (_, k) => `${' '.repeat(2 * k)}${marker}${'*_['.repeat(k)}item`).join(t);
        const { blocks, steps } = metered(src);
        expect(blocks.length).toBeGreaterThan(0);
        expect(steps).toBeLessThanOrEqual(STEPS_PER_CHAR * (src.length + 1));
      }),
      { numRuns: 100, interruptAfterTimeLimit: 60_000, markInterruptAsFailure: true },
    );
  });
});
