/**
 * An incremental reader of the few HTML tags the embed check needs (`<script>`, `<meta>`, `<base>`),
 * fed the page as it arrives so reading can stop as soon as the snippet is seen. It tokenises the way
 * a browser does where it matters here: comments hide tags, a script's content is not markup, quoted
 * attribute values may hold `>`, the first of two equal attributes wins, and character references
 * in values are decoded. It is not a full HTML parser: markup written later by JavaScript (a tag
 * manager) is invisible to it, as it is to any fetch of the page.
 */

export interface Tag {
  name: 'script' | 'meta' | 'base';
  attrs: Record<string, string>;
}

/** A tag this long without its `>` is not a tag worth waiting for (the loader's is under 200 bytes). */
const MAX_TAG_CHARS = 16 * 1024;
/** Text before this position is dropped once scanned, so memory stays bounded by what is pending. */
const COMPACT_AFTER = 64 * 1024;

const NAMED: Record<string, string> = { amp: '&', quot: '"', apos: "'", lt: '<', gt: '>', nbsp: '\u00a0' };

/** Character references in an attribute value (numeric ones and the few named ones URLs and ids use). */
export function decodeEntities(value: string): string {
  if (!value.includes('&')) return value;
  return value.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,6});?/gi, (whole, ref: string) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : '\ufffd';
    }
    return NAMED[ref.toLowerCase()] ?? whole;
  });
}

const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\f' || c === '\r';

/**
 * The attributes of a start tag whose name ends at `from`, and the index after its `>`; null when
 * the text ends before the tag does (more data is needed).
 */
export function parseAttributes(text: string, from: number): { attrs: Record<string, string>; end: number } | null {
  const attrs: Record<string, string> = {};
  let i = from;
  for (;;) {
    while (i < text.length && (isSpace(text[i]) || text[i] === '/')) i++;
    if (i >= text.length) return null;
    if (text[i] === '>') return { attrs, end: i + 1 };
    const nameStart = i;
    i++; // a first `=` belongs to the name
    while (i < text.length && !isSpace(text[i]) && text[i] !== '/' && text[i] !== '>' && text[i] !== '=') i++;
    const name = text.slice(nameStart, i).toLowerCase();
    while (i < text.length && isSpace(text[i])) i++;
    if (i >= text.length) return null;
    let value = '';
    if (text[i] === '=') {
      i++;
      while (i < text.length && isSpace(text[i])) i++;
      if (i >= text.length) return null;
      const quote = text[i];
      if (quote === '"' || quote === "'") {
        const close = text.indexOf(quote, i + 1);
        if (close < 0) return null;
        value = text.slice(i + 1, close);
        i = close + 1;
      } else {
        const start = i;
        while (i < text.length && !isSpace(text[i]) && text[i] !== '>') i++;
        if (i >= text.length) return null;
        value = text.slice(start, i);
      }
    }
    if (!(name in attrs)) attrs[name] = decodeEntities(value);
  }
}

export interface HtmlScanner {
  /** Scans the new text; returns the tags completed by it, in document order. */
  feed(chunk: string): Tag[];
}

const TAG_START = /<(script|meta|base)(?=[\s/>])/iy;
const SCRIPT_END = /<\/script/gi;

export function createHtmlScanner(): HtmlScanner {
  let text = '';
  let pos = 0;
  let inScript = false;

  return {
    feed(chunk) {
      text += chunk;
      const found: Tag[] = [];
      for (;;) {
        if (inScript) {
          SCRIPT_END.lastIndex = pos;
          const m = SCRIPT_END.exec(text);
          if (!m) {
            pos = Math.max(pos, text.length - '</script'.length);
            break;
          }
          pos = m.index + m[0].length;
          inScript = false;
          continue;
        }
        const lt = text.indexOf('<', pos);
        if (lt < 0) {
          pos = text.length;
          break;
        }
        if (text.length - lt < 8) {
          pos = lt; // too short to tell what it starts
          break;
        }
        if (text.startsWith('<!--', lt)) {
          const close = text.indexOf('-->', lt + 4);
          if (close < 0) {
            pos = lt;
            break;
          }
          pos = close + 3;
          continue;
        }
        TAG_START.lastIndex = lt;
        const m = TAG_START.exec(text);
        if (!m) {
          pos = lt + 1;
          continue;
        }
        const parsed = parseAttributes(text, lt + m[0].length);
        if (!parsed) {
          if (text.length - lt > MAX_TAG_CHARS) {
            pos = lt + 1;
            continue;
          }
          pos = lt;
          break;
        }
        const name = m[1].toLowerCase() as Tag['name'];
        found.push({ name, attrs: parsed.attrs });
        pos = parsed.end;
        if (name === 'script') inScript = true;
      }
      if (pos > COMPACT_AFTER) {
        text = text.slice(pos);
        pos = 0;
      }
      return found;
    },
  };
}
