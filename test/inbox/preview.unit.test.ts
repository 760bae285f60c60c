import {
  bounded,
  filesLabel,
  messagePreview,
  oneLine,
  PREVIEW_MAX_CODE_POINTS,
  PREVIEW_MAX_GRAPHEMES,
  PREVIEW_SOURCE_MAX,
  stripMarkdown,
} from '../../server/inbox/preview';

const md = (content: string, attachmentNames: string[] = []) => messagePreview({ content, format: 'markdown', attachmentNames });
const plain = (content: string, attachmentNames: string[] = []) => messagePreview({ content, format: 'plain', attachmentNames });

describe('the preview of a row', () => {
  test('markdown marks go, the words stay', () => {
    expect(md('# Order **#1234** is _late_')).toBe('Order #1234 is late');
    expect(md('> quoted\n\n- one\n- two\n1. three')).toBe('quoted one two three');
    expect(md('~~old~~ new, *very* new, __bold__')).toBe('old new, very new, bold');
    expect(md('a\n\n---\n\nb')).toBe('a b');
    expect(md('- [x] done\n- [ ] todo')).toBe('done todo');
    expect(md('2 * 3 * 4 and snake_case_name')).toBe('2 * 3 * 4 and snake_case_name');
    expect(md('1\\. not a list \\*star\\*')).toBe('1. not a list *star*');
  });

  test('code is kept as text, fences and backticks go', () => {
    expect(md('Try `npm ci` then:\n```sh\nnpm   test\n```\ndone')).toBe('Try npm ci then: npm test done');
    expect(md('```\nunclosed fence\nstill code')).toBe('unclosed fence still code');
    expect(md('``a ` b``')).toBe('a ` b');
  });

  test('links by their text, images by their alternative text', () => {
    expect(md('See [the docs](https://example.com/docs "Docs") now')).toBe('See the docs now');
    expect(md('![a cat](https://example.com/cat.png)')).toBe('a cat');
    expect(md('![](https://example.com/x.png) here')).toBe('Image here');
    expect(md('<https://example.com/a>')).toBe('https://example.com/a');
  });

  test('plain text keeps its characters, markdown-looking or not', () => {
    expect(plain('**not bold** <b>x</b> [a](b)')).toBe('**not bold** <b>x</b> [a](b)');
  });

  test('white space of every kind collapses to one line', () => {
    expect(plain('  hello\r\n\n\tworld\u00a0 again  ')).toBe('hello world again');
    expect(oneLine('\n\n')).toBe('');
  });

  test('a long text is cut at a grapheme with an ellipsis, emoji whole', () => {
    const long = 'word '.repeat(100);
    const cut = plain(long);
    expect([...new Intl.Segmenter().segment(cut)].length).toBeLessThanOrEqual(PREVIEW_MAX_GRAPHEMES + 1);
    expect(cut.endsWith('word…')).toBe(true);
    const family = '👨‍👩‍👧‍👦';
    const emoji = plain(family.repeat(200));
    expect(emoji.endsWith(`${family}…`)).toBe(true);
    expect([...emoji].length).toBeLessThanOrEqual(PREVIEW_MAX_CODE_POINTS);
    expect(plain('Thanks 👍🏽')).toBe('Thanks 👍🏽');
    expect(bounded('abc', 3)).toBe('abc');
    expect(bounded('abcd', 3)).toBe('abc…');
  });

  test('combining marks cannot make a preview longer than its column', () => {
    const zalgo = `a${'\u0301'.repeat(600)}`;
    expect([...plain(zalgo)].length).toBeLessThanOrEqual(PREVIEW_MAX_CODE_POINTS);
  });

  test('a message of files alone says their names', () => {
    expect(plain('', ['invoice.pdf'])).toBe('invoice.pdf');
    expect(plain('  ', ['a.png', 'b.png'])).toBe('a.png and 1 more file');
    expect(filesLabel(['a', 'b', 'c'])).toBe('a and 2 more files');
    expect(plain('See attached', ['a.png'])).toBe('See attached');
    expect(filesLabel([])).toBe('');
  });

  test('only the start of a very long message is read', () => {
    const long = `${'x'.repeat(PREVIEW_SOURCE_MAX)}**tail**`;
    expect(md(long)).not.toContain('tail');
    expect(md('**a'.repeat(4000)).length).toBeLessThanOrEqual(PREVIEW_MAX_CODE_POINTS);
  });

  test('stripMarkdown leaves plain words alone', () => {
    expect(stripMarkdown('hello world')).toBe('hello world');
  });
});
