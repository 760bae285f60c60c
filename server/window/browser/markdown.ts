/**
 * The chat window's markdown: a small parser to a syntax tree of allow-listed nodes, and a
 * renderer that builds DOM nodes from that tree with createElement/createTextNode only. There is
 * no HTML in the language: `<script>` or `<img onerror>` in a message is text, shown as typed.
 * Links keep only http(s) and mailto targets; anything else (javascript:, data:, relative) is text.
 *
 * Any string parses in time linear in its length: every block takes at least one line, quotes and
 * inline markup nest at most MAX_NESTING deep (deeper markers stay text), and every look-ahead of
 * the inline scan resumes where the previous one of its kind stopped.
 */

export type Inline =
  | { type: 'text'; value: string }
  | { type: 'code'; value: string }
  | { type: 'strong' | 'em'; children: Inline[] }
  | { type: 'link'; href: string; children: Inline[] }
  | { type: 'break' };

export type Block =
  | { type: 'paragraph'; children: Inline[] }
  | { type: 'heading'; children: Inline[] }
  | { type: 'code_block'; value: string }
  | { type: 'quote'; children: Block[] }
  | { type: 'list'; ordered: boolean; items: Block[][] };

/**
 * The work of one parse, in characters read (by the block rules and by the inline scan and its
 * look-aheads). Tests pass one in to bound it by the input's length; callers may ignore it.
 */
export interface Meter {
  steps: number;
}

/** Quote levels, and emphasis or links inside each other: markers deeper than this are text. */
export const MAX_NESTING = 4;

const SAFE_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);

/** The link target if it is absolute http(s) or mailto, else null (the link becomes text). */
export function safeHref(raw: string): string | null {
  const text = raw.trim();
  // Control characters and spaces are how `java\tscript:` tricks start; such a target is refused.
  if (!text || /[\u0000-\u0020\u007f]/.test(text)) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
}

/**
 * `src.indexOf(needle, from)` for scans whose `from` never decreases (per needle): an answer still
 * at or after `from` is the answer again, so all the look-aheads for one needle read `src` once in
 * total; searching afresh at every opener would read it once per opener (`[` a million times: 13 s).
 */
class LookAhead {
  /** Per needle, the last search's start and answer. */
  private readonly last = new Map<string, { from: number; found: number }>();
  constructor(
    private readonly src: string,
    private readonly meter: Meter,
  ) {}

  find(needle: string, from: number): number {
    if (from >= this.src.length) return -1;
    let memo = this.last.get(needle);
    if (memo && from >= memo.from && (memo.found < 0 || memo.found >= from)) return memo.found;
    const found = this.src.indexOf(needle, from);
    this.meter.steps += (found < 0 ? this.src.length : found) - from + 1;
    if (!memo) this.last.set(needle, (memo = { from, found }));
    memo.from = from;
    memo.found = found;
    return found;
  }
}

const AUTOLINK = /(?:https?:\/\/|mailto:)[^\s<>()]+[^\s<>().,;:!?'"]/y;

// Inline parsing: a left-to-right scan; unmatched markers stay text.
export function parseInline(src: string, meter: Meter = { steps: 0 }): Inline[] {
  return inline(src, 0, meter);
}

function inline(src: string, depth: number, meter: Meter): Inline[] {
  const out: Inline[] = [];
  const ahead = new LookAhead(src, meter);
  // The text not yet in `out`: `text`, then the plain characters src.slice(plain, i).
  let text = '';
  let plain = 0;
  const flush = (at: number) => {
    text += src.slice(plain, at);
    if (text) out.push({ type: 'text', value: text });
    text = '';
  };
  let i = 0;
  for (; i < src.length; meter.steps++) {
    const c = src[i];
    if (c === '\\' && i + 1 < src.length && /[\\`*_[\]()#>!-]/.test(src[i + 1])) {
      text += src.slice(plain, i) + src[i + 1];
      plain = i += 2;
      continue;
    }
    if (c === '\n') {
      flush(i);
      out.push({ type: 'break' });
      plain = i += 1;
      continue;
    }
    if (c === '`') {
      const end = ahead.find('`', i + 1);
      if (end > i + 1) {
        flush(i);
        out.push({ type: 'code', value: src.slice(i + 1, end) });
        plain = i = end + 1;
        continue;
      }
    }
    if (depth < MAX_NESTING && (c === '*' || c === '_')) {
      const double = src[i + 1] === c;
      const marker = double ? c + c : c;
      const end = ahead.find(marker, i + marker.length + 1);
      if (end > i + marker.length && !/\s/.test(src[i + marker.length])) {
        flush(i);
        out.push({ type: double ? 'strong' : 'em', children: inline(src.slice(i + marker.length, end), depth + 1, meter) });
        plain = i = end + marker.length;
        continue;
      }
    }
    if (c === '[' && depth < MAX_NESTING) {
      const close = ahead.find('](', i + 1);
      const end = close >= 0 ? ahead.find(')', close + 2) : -1;
      if (close > i && end > close) {
        const label = src.slice(i + 1, close);
        const href = safeHref(src.slice(close + 2, end));
        flush(i);
        if (href) out.push({ type: 'link', href, children: inline(label, depth + 1, meter) });
        else for (const n of inline(label, depth + 1, meter)) out.push(n); // an unsafe target: its label only, as text
        plain = i = end + 1;
        continue;
      }
    }
    if ((c === 'h' || c === 'm') && (i === 0 || /[\s(]/.test(src[i - 1]))) {
      AUTOLINK.lastIndex = i;
      const m = AUTOLINK.exec(src);
      const href = m ? safeHref(m[0]) : null;
      if (m && href) {
        flush(i);
        out.push({ type: 'link', href, children: [{ type: 'text', value: m[0] }] });
        plain = i += m[0].length;
        continue;
      }
    }
    i++;
  }
  flush(i);
  return out;
}

/**
 * Every Unicode line terminator ends a line (CR LF as one). No line then holds one, so the block
 * patterns' `.` and `$`, which stop at some of them (LF, CR, U+2028, U+2029), always read a whole line.
 */
const LINE_BREAK = /\r\n|[\n\r\v\f\x85\u2028\u2029]/;

const FENCE = /^\s*(```|~~~)/;
const HEADING = /^\s*#{1,6}\s+(.*)$/;
const QUOTE = /^\s*>/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;

/** A block other than a paragraph: `opens` is the one test that both starts it and ends a paragraph. */
interface Rule {
  opens(line: string, depth: number): boolean;
  /** The block that starts at lines[i], and the index of the line after it. */
  take(lines: string[], i: number, depth: number, meter: Meter): [Block, number];
}

/** Quotes nest MAX_NESTING deep; below that a `>` line is a paragraph's text. */
function opensQuote(line: string, depth: number): boolean {
  return depth < MAX_NESTING && QUOTE.test(line);
}

/** Counts a line as read: every rule pays for the lines it looks at. */
function read(line: string, meter: Meter): string {
  meter.steps += line.length + 1;
  return line;
}

const RULES: Rule[] = [
  {
    opens: (line) => FENCE.test(line),
    take(lines, i, _depth, meter) {
      const fence = FENCE.exec(lines[i])![1];
      const body: string[] = [];
      i++;
      while (i < lines.length && !read(lines[i], meter).trim().startsWith(fence)) body.push(lines[i++]);
      return [{ type: 'code_block', value: body.join('\n') }, i + 1]; // past the closing fence (or the end)
    },
  },
  {
    opens: (line) => HEADING.test(line),
    take(lines, i, _depth, meter) {
      const text = HEADING.exec(lines[i])![1].replace(/\s#+\s*$/, '');
      return [{ type: 'heading', children: parseInline(text, meter) }, i + 1];
    },
  },
  {
    opens: opensQuote,
    take(lines, i, depth, meter) {
      const body: string[] = [];
      while (i < lines.length && opensQuote(read(lines[i], meter), depth)) body.push(lines[i++].replace(/^\s*> ?/, ''));
      return [{ type: 'quote', children: blocksOf(body, depth + 1, meter) }, i];
    },
  },
  {
    opens: (line) => LIST_ITEM.test(line),
    take(lines, i, _depth, meter) {
      const ordered = /\d/.test(LIST_ITEM.exec(lines[i])![2]);
      const items: Block[][] = [];
      while (i < lines.length) {
        const m = LIST_ITEM.exec(read(lines[i], meter));
        if (!m || /\d/.test(m[2]) !== ordered) break;
        const body = [m[3]];
        i++;
        // Indented continuation lines belong to the item.
        while (i < lines.length && /^\s{2,}\S/.test(read(lines[i], meter)) && !LIST_ITEM.test(lines[i])) body.push(lines[i++].trim());
        items.push([paragraph(body, meter)]);
      }
      return [{ type: 'list', ordered, items }, i];
    },
  },
];

function opener(line: string, depth: number, meter: Meter): Rule | undefined {
  read(line, meter);
  return RULES.find((rule) => rule.opens(line, depth));
}

function paragraph(lines: string[], meter: Meter): Block {
  return { type: 'paragraph', children: parseInline(lines.join('\n'), meter) };
}

/** The paragraph at lines[i], a line no rule opened: that line, then every non-blank line no rule opens. */
function paragraphAt(lines: string[], i: number, depth: number, meter: Meter): [Block, number] {
  const para = [lines[i++]];
  while (i < lines.length && read(lines[i], meter).trim() && !opener(lines[i], depth, meter)) para.push(lines[i++]);
  return [paragraph(para, meter), i];
}

export function parseMarkdown(src: string, meter: Meter = { steps: 0 }): Block[] {
  return blocksOf(src.split(LINE_BREAK), 0, meter);
}

function blocksOf(lines: string[], depth: number, meter: Meter): Block[] {
  const blocks: Block[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!read(line, meter).trim()) {
      i++;
      continue;
    }
    let [block, after] = opener(line, depth, meter)?.take(lines, i, depth, meter) ?? paragraphAt(lines, i, depth, meter);
    // The loop must advance: should a rule take no line, its line is shown as a paragraph instead.
    if (after <= i) [block, after] = [paragraph([line], meter), i + 1];
    blocks.push(block);
    i = after;
  }
  return blocks;
}

function renderInline(doc: Document, nodes: Inline[], into: Node) {
  for (const n of nodes) {
    switch (n.type) {
      case 'text':
        into.appendChild(doc.createTextNode(n.value));
        break;
      case 'code': {
        const el = doc.createElement('code');
        el.textContent = n.value;
        into.appendChild(el);
        break;
      }
      case 'strong':
      case 'em': {
        const el = doc.createElement(n.type);
        renderInline(doc, n.children, el);
        into.appendChild(el);
        break;
      }
      case 'link': {
        // Checked again here: the tree may come from anywhere, the renderer trusts nothing.
        const href = safeHref(n.href);
        if (!href) {
          renderInline(doc, n.children, into);
          break;
        }
        const a = doc.createElement('a');
        a.href = href;
        a.target = '_blank';
        a.rel = 'noopener noreferrer nofollow';
        renderInline(doc, n.children, a);
        into.appendChild(a);
        break;
      }
      case 'break':
        into.appendChild(doc.createElement('br'));
        break;
    }
  }
}

function renderBlocks(doc: Document, blocks: Block[], into: Node) {
  for (const b of blocks) {
    switch (b.type) {
      case 'paragraph':
      case 'heading': {
        const el = doc.createElement('p');
        if (b.type === 'heading') el.className = 'md-heading';
        renderInline(doc, b.children, el);
        into.appendChild(el);
        break;
      }
      case 'code_block': {
        const pre = doc.createElement('pre');
        const code = doc.createElement('code');
        code.textContent = b.value;
        pre.appendChild(code);
        into.appendChild(pre);
        break;
      }
      case 'quote': {
        const el = doc.createElement('blockquote');
        renderBlocks(doc, b.children, el);
        into.appendChild(el);
        break;
      }
      case 'list': {
        const el = doc.createElement(b.ordered ? 'ol' : 'ul');
        for (const item of b.items) {
          const li = doc.createElement('li');
          renderBlocks(doc, item, li);
          el.appendChild(li);
        }
        into.appendChild(el);
        break;
      }
    }
  }
}

/** A message's content as DOM nodes: markdown through the tree, `plain` as one text node. */
export function renderContent(doc: Document, content: string, format: string): DocumentFragment {
  const frag = doc.createDocumentFragment();
  if (format === 'markdown') renderBlocks(doc, parseMarkdown(content), frag);
  else {
    const p = doc.createElement('p');
    p.className = 'plain';
    p.textContent = content;
    frag.appendChild(p);
  }
  return frag;
}
