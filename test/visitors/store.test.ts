import { createHarness, Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

test('records what a visitor says of itself; a page never overwrites what the server vouched for', async () => {
  const store = h.runtime.services.visitors.store;
  const site = h.site.id;
  expect(await store.find(site, 'v-a')).toBeUndefined();
  await store.record(site, 'v-a', { name: 'Page Name', email: 'page@example.com', verified: false }, 1000);
  expect(await store.find(site, 'v-a')).toMatchObject({ name: 'Page Name', nameVerified: false, firstSeenAt: 1000, lastSeenAt: 1000 });
  await store.record(site, 'v-a', { name: 'Ada Lovelace', verified: true }, 2000);
  await store.record(site, 'v-a', { name: 'Mallory', email: 'm@example.com', verified: false }, 3000);
  const found = await store.find(site, 'v-a');
  expect(found).toMatchObject({ name: 'Ada Lovelace', nameVerified: true, email: 'm@example.com', emailVerified: false, firstSeenAt: 1000, lastSeenAt: 3000 });
  // Another site's visitor of the same id is another visitor.
  expect(await store.find(`${site}x`, 'v-a')).toBeUndefined();
  const many = await store.findMany(site, ['v-a', 'v-none', 'v-a']);
  expect([...many.keys()]).toEqual(['v-a']);
  expect(await store.remove(site, 'v-a')).toBe(true);
  expect(await store.find(site, 'v-a')).toBeUndefined();
});

test('two first claims at once leave one row', async () => {
  const store = h.runtime.services.visitors.store;
  await Promise.all([
    store.record(h.site.id, 'v-race', { name: 'One', verified: false }, 10),
    store.record(h.site.id, 'v-race', { name: 'Two', verified: false }, 10),
  ]);
  const rows = await h.runtime.db('visitors').where({ site_id: h.site.id, id: 'v-race' });
  expect(rows).toHaveLength(1);
  expect(['One', 'Two']).toContain(rows[0].name);
});
