/** The `@email` parser of internal notes (server/notes/mentions.ts): pure, no database. */
import { MAX_MENTIONS, mentionedEmails } from '../../server/notes/mentions';

describe('mentionedEmails', () => {
  test.each([
    ['at the start', '@ana@example.com please look', ['ana@example.com']],
    ['after a space, a bracket or a comma', 'cc (@ana@example.com),@bo@example.org', ['ana@example.com', 'bo@example.org']],
    ['lower-cased, each once, in order written', '@Bo@Example.ORG then @ana@example.com and @bo@example.org', ['bo@example.org', 'ana@example.com']],
    ['trailing punctuation is not part of it', 'ask @ana@example.com. Or @bo@example.org!', ['ana@example.com', 'bo@example.org']],
    ['subdomains and plus addresses', '@first.last+tag@mail.example.co.uk', ['first.last+tag@mail.example.co.uk']],
    ['an address without @ before it is no mention', 'write to ana@example.com', []],
    ['an @ inside a word is no mention', 'mail@ana@example.com and x@@ana@example.com', []],
    ['a domain needs a dot', '@ana@localhost', []],
    ['a lone @ or an @handle is no mention', '@ @ana hello@', []],
    ['inside a markdown link text', '[@ana@example.com](https://example.com)', ['ana@example.com']],
    ['not inside inline code', 'use `@ana@example.com` or ``@bo@example.org``; but @cy@example.net', ['cy@example.net']],
    ['not inside a fenced block', '```\n@ana@example.com\n```\n~~~md\n@bo@example.org\n~~~\n@cy@example.net', ['cy@example.net']],
    ['an unclosed fence hides the rest', '```\n@ana@example.com', []],
    ['an unclosed backtick is just a character', 'a ` b @ana@example.com', ['ana@example.com']],
  ])('%s', (_what, text, expected) => {
    expect(mentionedEmails(text)).toEqual(expected);
  });

  test('in plain text, backticks are characters: code is not skipped', () => {
    expect(mentionedEmails('see `@ana@example.com`', 'plain')).toEqual(['ana@example.com']);
    expect(mentionedEmails('```\n@ana@example.com\n```', 'plain')).toEqual(['ana@example.com']);
  });

  test(`at most ${MAX_MENTIONS} addresses are taken`, () => {
    const text = Array.from({ length: MAX_MENTIONS + 5 }, (_, i) => `@m${i}@example.com`).join(' ');
    const found = mentionedEmails(text);
    expect(found).toHaveLength(MAX_MENTIONS);
    expect(found[MAX_MENTIONS - 1]).toBe(`m${MAX_MENTIONS - 1}@example.com`);
  });

  test("hostile texts of a note's full length give sane answers (near-addresses, runs of backticks, of hyphens)", () => {
    expect(mentionedEmails('@a.'.repeat(3333))).toEqual([]);
    expect(mentionedEmails('@a@' + 'a'.repeat(9990))).toEqual([]);
    // An address past 254 characters is no account's.
    expect(mentionedEmails('@a@' + 'a1-'.repeat(3300) + 'b.io')).toEqual([]);
    expect(mentionedEmails('@a@' + 'a1-'.repeat(80) + 'b.io')).toEqual([`a@${'a1-'.repeat(80)}b.io`]);
    expect(mentionedEmails('x`'.repeat(5000) + ' @ana@example.com')).toEqual(['ana@example.com']);
    // A line of backticks opens a fence that never closes: what follows is code.
    expect(mentionedEmails('`'.repeat(5000) + '@ana@example.com')).toEqual([]);
  });
});
