/**
 * The preview an inbox row shows of a conversation's last message (docs/manage.md, "Inbox rows"):
 * plain text on one line, markdown taken off (the words a reader sees, not the marks), at most
 * PREVIEW_MAX_GRAPHEMES characters as a person counts them (an emoji is one, never cut in half),
 * and the files' names when the message is only files. Pure: computed once when the message is
 * written (and by migration 027 for older ones), stored beside the conversation.
 */

export const PREVIEW_MAX_GRAPHEMES = 140;
/** Also bounded in code points (the column's length): a line of combining marks counts one grapheme each. */
export const PREVIEW_MAX_CODE_POINTS = 250;

/** How much of a message the preview reads: far more than it shows, even under long link addresses. */
export const PREVIEW_SOURCE_MAX = 2_000;

const segmenter = new Intl.Segmenter('en', { granularity: 'grapheme' });

/** The words of a markdown text without its marks: code kept as text, links and images by their text. */
export function stripMarkdown(md: string): string {
  // Escaped punctuation reads as itself: held aside as private-use characters while the marks go.
  const held = md.replace(/\\([!-/:-@[-`{-~])/g, (_m, c: string) => String.fromCharCode(0xe000 + c.charCodeAt(0)));
  return (
    held
      // Fenced code: its content stays (a reader asked about that code), the fences and language go.
      .replace(/^ {0,3}(```|~~~)[^\n]*\n([\s\S]*?)(?:^ {0,3}\1[^\n]*$|(?![\s\S]))/gm, (_m, _f, code: string) => `${code}\n`)
      // Images by their alternative text (or "Image"), links by their text.
      .replace(/!\[([^\]]*)\]\([^)]*\)/g, (_m, alt: string) => (alt.trim() ? alt : 'Image'))
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<((?:https?:\/\/|mailto:)[^>\s]+)>/g, '$1')
      // Inline code: the code, without its backticks.
      .replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_m, _t, code: string) => code.trim())
      // Line starts: headings, quotes, list bullets and numbers, rules.
      .replace(/^ {0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+(?:\[[ xX]\]\s+)?|\d{1,9}[.)]\s+)/gm, '')
      .replace(/^ {0,3}(?:[-*_]\s*){3,}$/gm, '')
      // Emphasis and strike-through marks around words.
      .replace(/(\*\*|__|~~)(?=\S)([\s\S]*?\S)\1/g, '$2')
      .replace(/(^|[^\w*])([*_])(?=\S)([^*_\n]*?\S)\2(?!\w)/g, '$1$3')
      .replace(/[\ue021-\ue07e]/g, (c) => String.fromCharCode(c.charCodeAt(0) - 0xe000))
  );
}

/** One line: every run of white space (line breaks, tabs, no-break spaces) made one space, ends trimmed. */
export function oneLine(text: string): string {
  return text.replace(/\s+/gu, ' ').trim();
}

/** At most `graphemes` characters as a person counts them (and PREVIEW_MAX_CODE_POINTS code points), "…" when cut. */
export function bounded(text: string, graphemes = PREVIEW_MAX_GRAPHEMES): string {
  let out = '';
  let count = 0;
  let points = 0;
  for (const { segment } of segmenter.segment(text)) {
    const size = [...segment].length;
    if (count === graphemes || points + size > PREVIEW_MAX_CODE_POINTS - 1) return `${out.trimEnd()}…`;
    out += segment;
    count++;
    points += size;
  }
  return out;
}

/** "report.pdf", "report.pdf and 2 more files": what a message of files alone says. */
export function filesLabel(names: readonly string[]): string {
  if (!names.length) return '';
  const first = oneLine(names[0]) || 'a file';
  return names.length === 1 ? first : `${first} and ${names.length - 1} more file${names.length === 2 ? '' : 's'}`;
}

/**
 * The stored preview of a message: its text (markdown stripped when it is markdown) on one line and
 * bounded; the files' names when it has no words. Who wrote it ("You:", an agent's name) is added
 * when a row is read, since it depends on who reads.
 */
export function messagePreview(message: { content: string; format: 'plain' | 'markdown'; attachmentNames: readonly string[] }): string {
  // The start is enough for 140 characters, and keeps the work of the marks' patterns small for a long message.
  const start = message.content.slice(0, PREVIEW_SOURCE_MAX);
  const words = oneLine(message.format === 'markdown' ? stripMarkdown(start) : start);
  return bounded(words || filesLabel(message.attachmentNames));
}
