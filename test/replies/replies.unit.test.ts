/**
 * The pure rules of shared replies and names (issue 25): placeholders filled and checked, the text
 * checks of titles, bodies and display names, who the window says a reply is from, and how times
 * are written (relative within a week, dates beyond, the window's hour or date and hour).
 */
import { fillPlaceholders, unknownPlaceholders } from '../../server/replies/placeholders';
import { checkLine, checkText } from '../../server/platform/text';
import { checkDisplayName } from '../../server/accounts/profile';
import { replyAuthorName } from '../../server/window/authors';
import { exactTime, relative, shownTime } from '../../server/dashboard/browser/time-format';
import { timeText } from '../../server/window/browser/panel/time';
import { ApiError } from '../../server/platform/errors';

const given = { visitor: { name: 'María José Pérez', own: true }, agentName: 'Anna', siteName: 'Acme' };
const anonymous = { visitor: { name: 'Brave Otter', own: false }, agentName: 'Anna', siteName: 'Acme' };

test('placeholders are filled: the visitor’s name and first name, the agent’s and the site’s; a fallback only for a name the visitor never gave', () => {
  const body = 'Hi {visitor.firstName|there} ({visitor.name}), {agent.name} of {site.name}; {visitor.name|you}';
  expect(fillPlaceholders(body, given)).toBe('Hi María (María José Pérez), Anna of Acme; María José Pérez');
  expect(fillPlaceholders(body, anonymous)).toBe('Hi there (Brave Otter), Anna of Acme; you');
  // Without a fallback an anonymous visitor is its friendly name, whole (never "Brave").
  expect(fillPlaceholders('Hi {visitor.firstName}', anonymous)).toBe('Hi Brave Otter');
  // An empty fallback is allowed: "Hi{visitor.firstName| }" reads "Hi ".
  expect(fillPlaceholders('Hi {visitor.firstName|}!', anonymous)).toBe('Hi !');
  // Other braces are text, and what a value holds is never read as a placeholder again.
  expect(fillPlaceholders('{order} {{x}} {visitor} {visitor.}', given)).toBe('{order} {{x}} {visitor} {visitor.}');
  expect(fillPlaceholders('{visitor.name}', { ...given, visitor: { name: '{site.name}', own: true } })).toBe('{site.name}');
  // A fallback is one line without braces, at most 60 characters; longer is not a placeholder.
  expect(fillPlaceholders(`{visitor.name|${'x'.repeat(61)}}`, anonymous)).toBe(`{visitor.name|${'x'.repeat(61)}}`);
  expect(fillPlaceholders('{visitor.name|a\nb}', anonymous)).toBe('{visitor.name|a\nb}');
});

test('unknown fields of a known namespace are found (a typo never reaches a visitor); other braces are not', () => {
  expect(unknownPlaceholders('Hi {visitor.nmae} and {agent.nick|x}, {visitor.nmae} again')).toEqual(['visitor.nmae', 'agent.nick']);
  expect(unknownPlaceholders('{visitor.name} {visitor.firstName|there} {agent.name} {site.name} {order} {customer.name}')).toEqual([]);
});

test('a one-line name is NFC, trimmed, bounded in code points, with no control or invisible character', () => {
  const line = (raw: string, max = 10) => checkLine(raw, { what: 'The title', max, path: '/body/title' });
  expect(line('  Cafe\u0301  ')).toBe('Café');
  expect(line('😀'.repeat(10))).toBe('😀'.repeat(10));
  expect(line('👩‍💻 dev')).toBe('👩‍💻 dev'); // the zero-width joiner of an emoji sequence stays
  for (const bad of ['', '   ', 'x'.repeat(11), 'a\nb', 'a\tb', 'a\u0000b', 'a\u202Eb', 'a\u200Bb', 'a\u2066b', 'a\uFEFFb', 'a\u2029b', 'a\u0085b']) {
    expect(() => line(bad)).toThrow(ApiError);
  }
  try {
    line('a\u202Eb');
  } catch (err) {
    expect((err as ApiError).details).toEqual([{ path: '/body/title', message: 'must not contain control or invisible characters' }]);
  }
});

test('text keeps tabs, line breaks and leading indentation; CR LF becomes LF; blank or controlled text is refused', () => {
  const text = (raw: string) => checkText(raw, { what: 'The text', max: 20, path: '/body/body' });
  expect(text('  code\r\n\tnext\r')).toBe('  code\n\tnext\n');
  for (const bad of [' \n\t ', 'x'.repeat(21), 'ding\u0007', 'a\u202Eb', 'a\u0000']) expect(() => text(bad)).toThrow(ApiError);
});

test('a display name: null, empty or blank clears it; otherwise the one-line rules at 80', () => {
  expect([checkDisplayName(null), checkDisplayName(''), checkDisplayName('  ')]).toEqual([null, null, null]);
  expect(checkDisplayName(' Anna ')).toBe('Anna');
  expect(checkDisplayName('x'.repeat(80))).toHaveLength(80);
  expect(() => checkDisplayName('x'.repeat(81))).toThrow(ApiError);
  expect(() => checkDisplayName('Support\u202E')).toThrow(ApiError);
});

test('the window names a reply by its agent when the site shows names, else, or with no member, by the site', () => {
  const anna = { displayName: 'Anna', email: 'anna.k@example.com' };
  const unnamed = { displayName: null, email: 'b.smith@example.com' };
  expect(replyAuthorName({ siteName: 'Acme', agentNames: true }, anna)).toBe('Anna');
  expect(replyAuthorName({ siteName: 'Acme', agentNames: true }, unnamed)).toBe('b.smith');
  expect(replyAuthorName({ siteName: 'Acme', agentNames: true }, undefined)).toBe('Acme');
  expect(replyAuthorName({ siteName: 'Acme', agentNames: false }, anna)).toBe('Acme');
});

test('the dashboard writes times relative within a week, as a date beyond; the exact time is for the title', () => {
  const now = Date.parse('2026-11-26T12:00:00.000Z');
  const at = (ms: number) => new Date(now + ms).toISOString();
  expect(relative(at(-20_000), now)).toBe('just now');
  expect(relative(at(-3 * 60_000), now)).toBe('3 minutes ago');
  expect(shownTime(at(-5 * 3_600_000), now)).toBe('5 hours ago');
  expect(shownTime(at(-86_400_000), now)).toBe('yesterday');
  expect(shownTime(at(-6 * 86_400_000), now)).toBe('6 days ago');
  expect(shownTime(at(2 * 86_400_000), now)).toBe('in 2 days');
  // A week or more away: the date, with the year only when it is another one.
  expect(shownTime('2026-11-10T12:00:00.000Z', now, 'en-GB')).toBe('10 Nov');
  expect(shownTime('2025-03-04T12:00:00.000Z', now, 'en-GB')).toBe('4 Mar 2025');
  expect(shownTime('2027-01-30T12:00:00.000Z', now, 'en-GB')).toBe('30 Jan 2027');
  expect(exactTime('2026-11-10T12:00:00.000Z', 'en-GB')).toMatch(/^Tuesday,? 10 November 2026 at \d\d:00:00 \S/);
});

test('the window shows the hour for today’s messages, the date and hour for older ones', () => {
  const now = new Date(2026, 10, 26, 15, 0);
  expect(timeText(new Date(2026, 10, 26, 9, 5), now, 'en-GB')).toBe('09:05');
  expect(timeText(new Date(2026, 10, 25, 23, 59), now, 'en-GB')).toBe('25 Nov, 23:59');
  expect(timeText(new Date(2025, 2, 4, 8, 0), now, 'en-GB')).toBe('4 Mar 2025, 08:00');
});
