import { createHtmlScanner, decodeEntities, parseAttributes, Tag } from '../../server/sites/html-scan';

/** Every tag of `html` fed in pieces of `size` characters. */
function scan(html: string, size = html.length): Tag[] {
  const s = createHtmlScanner();
  const tags: Tag[] = [];
  for (let i = 0; i < html.length; i += size) tags.push(...s.feed(html.slice(i, i + size)));
  return tags;
}

const SNIPPET = '<script async src="https://chat.example.com/window/v1/loader.js" data-site="ws_abc"></script>';

describe('the HTML scanner', () => {
  test('finds script, meta and base tags with their attributes, whatever the chunking', () => {
    const html = `<!doctype html><html><head><base href="/shop/"><meta http-equiv="Content-Security-Policy" content="script-src 'self'">
      </head><body><p>Tea</p>${SNIPPET}</body></html>`;
    for (const size of [1, 2, 7, 64, html.length]) {
      const tags = scan(html, size);
      expect(tags.map((t) => t.name)).toEqual(['base', 'meta', 'script']);
      expect(tags[2].attrs).toEqual({ async: '', src: 'https://chat.example.com/window/v1/loader.js', 'data-site': 'ws_abc' });
      expect(tags[1].attrs.content).toBe("script-src 'self'");
    }
  });

  test('comments hide tags, script content is not markup', () => {
    const html = `<!-- ${SNIPPET} --><script>var s = '<script src="x/window/v1/loader.js" data-site="ws_no">';</script><p>`;
    const tags = scan(html, 5);
    expect(tags).toHaveLength(1);
    expect(tags[0].attrs).toEqual({});
  });

  test('quoted values may hold > and quotes of the other kind; unquoted values and entities', () => {
    const { attrs, end } = parseAttributes(`<script src='a>b"c' data-site=ws_1 data-x="&amp;&#x41;&#66;&lt;" defer>rest`, '<script'.length)!;
    expect(attrs).toEqual({ src: 'a>b"c', 'data-site': 'ws_1', 'data-x': '&AB<', defer: '' });
    expect(`<script src='a>b"c' data-site=ws_1 data-x="&amp;&#x41;&#66;&lt;" defer>rest`.slice(end)).toBe('rest');
    expect(parseAttributes('<script src="unterminated', 7)).toBeNull();
    expect(decodeEntities('a&unknown;b&#0;')).toBe('a&unknown;b\ufffd');
  });

  test('the first of two equal attributes wins; names are case-insensitive', () => {
    const [tag] = scan('<SCRIPT DATA-SITE="ws_1" data-site="ws_2" SRC="/l.js"></SCRIPT>');
    expect(tag.attrs).toEqual({ 'data-site': 'ws_1', src: '/l.js' });
  });

  test('a huge page without tags keeps little text pending', () => {
    const s = createHtmlScanner();
    for (let i = 0; i < 200; i++) expect(s.feed('<p>' + 'x'.repeat(10_000) + '</p>')).toEqual([]);
    expect(s.feed(SNIPPET)).toHaveLength(1);
  });

  test('<scripture> and <metadata> are not script or meta tags', () => {
    expect(scan('<scripture src="/window/v1/loader.js"><metadata content="x">')).toEqual([]);
  });
});
