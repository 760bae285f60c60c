import { invalid } from './errors';

/**
 * Characters a one-line name shows wrongly or not at all: controls (Cc), format characters (Cf: the
 * bidi overrides and isolates that make "Support\u202Etroppus" read otherwise, zero-width
 * characters, the BOM), line and paragraph separators and lone surrogates. The zero-width joiner
 * is kept, since emoji sequences (👩‍💻) are made with it.
 */
const INVISIBLE_IN_A_LINE = /(?!\u200D)[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** Characters text of several lines must not carry: the same, but tabs and line breaks are text. */
const INVISIBLE_IN_TEXT = /(?![\t\n\u200D])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** Length as the documents count it: code points (an emoji is one, not two UTF-16 units). */
export const codePoints = (s: string) => [...s].length;

/**
 * A one-line name as typed, checked and made canonical: NFC, trimmed, 1 to `max` code points, no
 * invisible or control characters. `path` is the field in the error's details (`/body/title`).
 */
export function checkLine(raw: string, opts: { what: string; max: number; path: string }): string {
  const value = raw.normalize('NFC').trim();
  const refuse = (message: string) => invalid(`${opts.what} ${message}.`, [{ path: opts.path, message }]);
  if (!value) throw refuse('must not be empty');
  if (codePoints(value) > opts.max) throw refuse(`must be at most ${opts.max} characters`);
  if (INVISIBLE_IN_A_LINE.test(value)) throw refuse('must not contain control or invisible characters');
  return value;
}

/**
 * Text of several lines (a reply's body), checked: CR LF made LF, NFC, not blank, at most `max`
 * code points, no control or invisible characters but tabs and line breaks. Not trimmed: markdown
 * may start with indentation.
 */
export function checkText(raw: string, opts: { what: string; max: number; path: string }): string {
  const value = raw.replace(/\r\n?/g, '\n').normalize('NFC');
  const refuse = (message: string) => invalid(`${opts.what} ${message}.`, [{ path: opts.path, message }]);
  if (!value.trim()) throw refuse('must not be empty');
  if (codePoints(value) > opts.max) throw refuse(`must be at most ${opts.max} characters`);
  if (INVISIBLE_IN_TEXT.test(value)) throw refuse('must not contain control or invisible characters');
  return value;
}
