import { friendlyName, memberDisplayName, visitorDisplayName } from '../../server/visitors/display-name';

test('a friendly name is two capitalised words, the same for the same id and spread across ids', () => {
  expect(friendlyName('vis_01abc')).toMatch(/^[A-Z][a-z]+ [A-Z][a-z]+$/);
  expect(friendlyName('vis_01abc')).toBe(friendlyName('vis_01abc'));
  const names = new Set(Array.from({ length: 500 }, (_, i) => friendlyName(`vis_${i}`)));
  // 500 ids over thousands of pairs: a handful of collisions at most, never a constant.
  expect(names.size).toBeGreaterThan(450);
});

test('the verified name wins, then the page-given one, then the friendly name', () => {
  expect(visitorDisplayName('v1', { name: 'Ada', nameVerified: true })).toEqual({ name: 'Ada', source: 'verified' });
  expect(visitorDisplayName('v1', { name: ' Bob ', nameVerified: false })).toEqual({ name: 'Bob', source: 'unverified' });
  expect(visitorDisplayName('v1', { name: '  ', nameVerified: true })).toEqual({ name: friendlyName('v1'), source: 'generated' });
  expect(visitorDisplayName('v1', undefined)).toEqual({ name: friendlyName('v1'), source: 'generated' });
});

test("a member is their display name, else their email's local part", () => {
  expect(memberDisplayName({ displayName: 'Grace H.', email: 'grace@example.com' })).toBe('Grace H.');
  expect(memberDisplayName({ displayName: null, email: 'grace@example.com' })).toBe('grace');
  expect(memberDisplayName({ displayName: ' ', email: 'odd' })).toBe('odd');
});
