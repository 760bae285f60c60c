/**
 * The conversation lists' one filter (server/conversations/filter.ts), the search's words
 * (server/search/words.ts), the engines' query strings (server/db/fulltext.ts) and a card's text
 * (server/search/service.ts): pure rules, no database.
 */
import { conversationFilter, listIndexFor } from '../../server/conversations/filter';
import { searchWords, MAX_WORDS } from '../../server/search/words';
import { booleanModeQuery, fts5Query } from '../../server/db/fulltext';
import { cardText } from '../../server/search/card';
import { friendlyName } from '../../server/visitors/display-name';

const ME = 'usr_00000000000000000000000001';

describe('searchWords', () => {
  test('words are runs of letters, digits and _, lower-cased, 3 characters or more, each once', () => {
    expect(searchWords('Where is my ORDER #1234?')).toEqual(['where', 'order', '1234']);
    expect(searchWords('bob@example.com')).toEqual(['bob', 'example', 'com']);
    expect(searchWords('conv_01m8fjezcnas')).toEqual(['conv_01m8fjezcnas']);
    expect(searchWords('order order Order')).toEqual(['order']);
  });

  test("operators and quotes of either engine's syntax never survive", () => {
    for (const hostile of ['+-"*()~<>@', '"order', 'order*', '-order +x', 'NEAR(a b)', 'a OR b', "it's", '\\"; drop table', '\u0000abc']) {
      for (const w of searchWords(hostile)) expect(w).toMatch(/^[\p{L}\p{N}\p{M}_]+$/u);
    }
    expect(searchWords('+-"*()~<>@')).toEqual([]);
  });

  test('unicode: accents and other scripts are words; NFKC folds compatibility forms', () => {
    expect(searchWords('Café crème')).toEqual(['café', 'crème']);
    expect(searchWords('ｏｒｄｅｒ')).toEqual(['order']);
    expect(searchWords('заказ 注文番号')).toEqual(['заказ', '注文番号']);
    expect(searchWords('😀😀😀 ok')).toEqual([]);
  });

  test('at most MAX_WORDS words, each at most 84 characters', () => {
    expect(searchWords(Array.from({ length: 20 }, (_, i) => `word${i}`).join(' '))).toHaveLength(MAX_WORDS);
    expect([...searchWords('x'.repeat(500))[0]]).toHaveLength(84);
  });
});

test('the engines take every word as a required prefix', () => {
  expect(booleanModeQuery(['order', '1234'])).toBe('+order* +1234*');
  expect(fts5Query(['order', '1234'])).toBe('"order"* "1234"*');
});

describe('conversationFilter', () => {
  test('built once from the query; absent fields stay absent (the cursor is bound to its JSON)', () => {
    expect(conversationFilter({})).toEqual({});
    expect(conversationFilter({ state: 'open', updatedAfter: '2026-01-01T00:00:00.000Z' })).toEqual({
      state: 'open',
      updatedAfter: Date.parse('2026-01-01T00:00:00.000Z'),
    });
    expect(conversationFilter({ assignee: 'any', unread: false }, ME)).toEqual({});
  });

  test("the inbox's member filters, the tag and the search", () => {
    expect(conversationFilter({ assignee: 'me', unread: true, tag: 'tag_x', q: 'Order  #12 status' }, ME)).toEqual({
      assigneeId: ME,
      unreadFor: ME,
      tagId: 'tag_x',
      words: ['order', 'status'],
    });
    expect(conversationFilter({ assignee: 'unassigned' }, ME)).toEqual({ assigneeId: null });
  });

  test('a search with no word left, or a bad time, is a clear 400', () => {
    for (const q of ['a', 'hi', '+-"*()~<>@', ' ']) {
      expect(() => conversationFilter({ q })).toThrow(expect.objectContaining({ code: 'invalid_request' }));
    }
    expect(() => conversationFilter({ createdAfter: 'yesterday' })).toThrow(expect.objectContaining({ code: 'invalid_request' }));
  });

  test('a member filter needs the member', () => {
    expect(() => conversationFilter({ assignee: 'me' })).toThrow(/without a member/);
  });
});

test('listIndexFor: the index that starts with the equality filters, the one a search walks too', () => {
  expect(listIndexFor({})).toBe('conversations_site_created_updated');
  expect(listIndexFor({ unreadFor: ME, tagId: 't' })).toBe('conversations_site_created_updated');
  expect(listIndexFor({ state: 'open' })).toBe('conversations_site_state_created_updated');
  expect(listIndexFor({ state: 'open', assigneeId: null })).toBe('conversations_site_assignee_created');
  expect(listIndexFor({ state: 'open', words: ['order'] })).toBe('conversations_site_state_created_updated');
});

test("a card holds the conversation's id, the visitor's id, the name the inbox shows and the email", () => {
  const c = { id: 'conv_1', visitor_id: 'vis_2' };
  expect(cardText(c, { name: 'Ada Lovelace', nameVerified: true, email: 'ada@example.com' })).toBe('conv_1 vis_2 Ada Lovelace ada@example.com');
  expect(cardText(c, undefined)).toBe(`conv_1 vis_2 ${friendlyName('vis_2')}`);
});
