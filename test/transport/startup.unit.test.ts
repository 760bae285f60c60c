/** The pure parts of start-up: how long the database is waited for, and what of its URL a message shows. */
import { connectBackoffMs, redactedDatabaseUrl } from '../../server/db/knex';

test('the wait for the database grows and then stays at 4 s', () => {
  expect([1, 2, 3, 4, 5, 10].map(connectBackoffMs)).toEqual([500, 1000, 2000, 4000, 4000, 4000]);
});

test('a DATABASE_URL in a message has its password masked, however malformed the URL', () => {
  expect(redactedDatabaseUrl('mysql//chat:s3cret@db/chat')).toBe('mysql//chat:***@db/chat');
  expect(redactedDatabaseUrl('mysql://chat:pa:ss/w@rd@db:3306/chat')).toBe('mysql://chat:***@db:3306/chat');
  expect(redactedDatabaseUrl('mysql:/db/chat')).toBe('mysql:/db/chat');
  expect(redactedDatabaseUrl('mysql://chat@db/chat')).toBe('mysql://chat@db/chat');
});
