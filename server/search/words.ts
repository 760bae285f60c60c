/**
 * What a member typed into the inbox's search, as the words both engines match (pure; the unit
 * tier checks it, test/search/words.unit.test.ts).
 *
 * A word is a run of letters, digits and `_` (how InnoDB's parser and the FTS5 tokenizer of
 * server/db/fulltext.ts split text), lower-cased and NFKC-normalised; everything else separates
 * words, so quotes and operators of either syntax (`+-"*()~<>@`) never reach the engine. Words
 * shorter than MIN_WORD_CHARS are dropped: InnoDB does not index them (`innodb_ft_min_token_size`
 * 3), and SQLite drops them too, so both engines find the same conversations.
 */
export const MIN_WORD_CHARS = 3;
/** InnoDB indexes no token longer than this (`innodb_ft_max_token_size`). */
export const MAX_WORD_CHARS = 84;
/** More words narrow nothing a person needs; each costs a look-up in the index. */
export const MAX_WORDS = 8;

export function searchWords(text: string): string[] {
  const words: string[] = [];
  for (const [raw] of text
    .normalize('NFKC')
    .toLowerCase()
    .matchAll(/[\p{L}\p{N}\p{M}_]+/gu)) {
    const chars = [...raw];
    if (chars.length < MIN_WORD_CHARS) continue;
    const word = chars.slice(0, MAX_WORD_CHARS).join('');
    if (!words.includes(word)) words.push(word);
    if (words.length === MAX_WORDS) break;
  }
  return words;
}
