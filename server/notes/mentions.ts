import { normaliseEmail } from '../accounts/passwords';

/** A note names at most this many members; mentions past it notify nobody (a note is not a mailing list). */
export const MAX_MENTIONS = 20;

/**
 * `@` then an address: a local part of the characters people's addresses use, then a domain of
 * dot-separated labels (letters, digits, inner hyphens). A trailing dot or other punctuation ends
 * it ("ask @ana@example.com." names ana@example.com).
 */
const MENTION = /@([A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+)/g;
/** What may stand right before the `@` of a mention: anything but a character of an address (so `a@b@c.com` names nobody). */
const ADDRESS_CHAR = /[A-Za-z0-9._%+\-@]/;

/**
 * Code in a markdown note says something about an address, it does not call anyone: fenced blocks
 * (``` or ~~~) and inline code spans are blanked before looking (same length, so nothing shifts).
 */
function withoutCode(text: string): string {
  const blank = (s: string) => s.replace(/[^\n]/g, ' ');
  let fence: string | null = null;
  const lines = text.split('\n').map((line) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== null) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = null;
      return blank(line);
    }
    if (marker) {
      fence = marker;
      return blank(line);
    }
    return line;
  });
  // An inline span: a run of backticks, then text, then a run of the same length.
  return lines.join('\n').replace(/(`+)(?!`)([\s\S]*?[^`])\1(?!`)/g, blank);
}

/**
 * The addresses a note's text mentions as `@email`, lower-cased as accounts store them, each once,
 * in the order written, at most MAX_MENTIONS. Pure: whether an address is a member of the site is
 * the service's question.
 */
export function mentionedEmails(text: string, format: 'plain' | 'markdown' = 'markdown'): string[] {
  const found: string[] = [];
  const scanned = format === 'markdown' ? withoutCode(text) : text;
  for (const m of scanned.matchAll(MENTION)) {
    const at = m.index ?? 0;
    if (at > 0 && ADDRESS_CHAR.test(scanned[at - 1])) continue;
    const email = normaliseEmail(m[1]);
    if (email.length > 254 || found.includes(email)) continue;
    found.push(email);
    if (found.length === MAX_MENTIONS) break;
  }
  return found;
}
