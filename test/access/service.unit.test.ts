import { createAccessService, IDENTITY_SECRET_PREFIX, KEY_PREFIX, MAX_ALLOWED_ORIGINS } from '../../server/access/service';
import { sha256Hex } from '../../server/platform/crypto';
import { fakeAccessStore } from '../fakes/fake-access-store';

/** The access service's rules (sites, keys, origins, identity secrets, revocations) against the in-memory store. No database. */
function setup() {
  let clock = 1_800_000_000_000;
  const store = fakeAccessStore();
  const service = createAccessService(store, () => clock, Buffer.alloc(32, 7));
  return { store, service, tick: (ms: number) => (clock += ms), now: () => clock };
}
const code = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (err: { code?: string }) => err.code ?? 'no code',
  );

describe('sites', () => {
  test('a site name is trimmed, and 1 to 200 characters', async () => {
    const { service } = setup();
    expect((await service.createSite('  Shop  ')).name).toBe('Shop');
    expect(await code(service.createSite('   '))).toBe('invalid_request');
    expect(await code(service.createSite('x'.repeat(201)))).toBe('invalid_request');
    expect(await service.hasSites()).toBe(true);
  });

  test('allowed origins are normalised, deduplicated, capped, and https (http only on loopback)', async () => {
    const { service } = setup();
    const site = await service.createSite('Shop');
    expect(await service.setAllowedOrigins(site.id, ['https://Shop.Example:443', 'https://shop.example/', 'http://localhost:5173'])).toEqual([
      'http://localhost:5173',
      'https://shop.example',
    ]);
    expect(await service.isOriginAllowed(site.id, 'https://shop.example')).toBe(true);
    for (const bad of ['http://shop.example', 'https://*.shop.example', 'https://shop.example/path', 'https://user:pw@shop.example', 'ftp://shop.example']) {
      expect(await code(service.setAllowedOrigins(site.id, [bad]))).toBe('invalid_request');
    }
    const many = Array.from({ length: MAX_ALLOWED_ORIGINS + 1 }, (_, i) => `https://s${i}.example`);
    expect(await code(service.setAllowedOrigins(site.id, many))).toBe('invalid_request');
    expect(await service.allowedOrigins(site.id)).toEqual(['http://localhost:5173', 'https://shop.example']); // a refused list changes nothing
    expect(await code(service.setAllowedOrigins('ws_missing', ['https://shop.example']))).toBe('not_found');
  });
});

describe('keys', () => {
  test('a key is shown once; only its fingerprint is stored', async () => {
    const { service, store } = setup();
    const site = await service.createSite('Shop');
    const created = await service.createKey(site.id, ['conversations:read'], 'crm');
    expect(created.key.startsWith(KEY_PREFIX)).toBe(true);
    const [row] = [...store.rows.keys.values()];
    expect(row.fingerprint).toBe(sha256Hex(created.key));
    expect(JSON.stringify(row)).not.toContain(created.key);
    expect(await service.listKeys(site.id)).toEqual([
      expect.objectContaining({ id: created.id, prefix: created.key.slice(0, 12), scopes: ['conversations:read'], label: 'crm', revokedAt: null }),
    ]);
    expect(await code(service.createKey('ws_missing', ['conversations:read']))).toBe('not_found');
  });

  test('authentication answers the key, its site and its rights; anything else is unauthorized', async () => {
    const { service } = setup();
    const site = await service.createSite('Shop');
    const { id, key } = await service.createKey(site.id, ['conversations:read', 'media:read']);
    expect(await service.authenticate(key)).toEqual({ keyId: id, siteId: site.id, scopes: ['conversations:read', 'media:read'] });
    const other = key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a');
    for (const wrong of [other, key.slice(KEY_PREFIX.length), '', KEY_PREFIX + 'x'.repeat(300)]) {
      expect(await code(service.authenticate(wrong))).toBe('unauthorized');
    }
  });

  test('a revoked key is refused at the very next request, and revoking again keeps the first time', async () => {
    const { service, tick } = setup();
    const site = await service.createSite('Shop');
    const { id, key } = await service.createKey(site.id, ['conversations:read']);
    await service.authenticate(key);
    const first = await service.revokeKey(id);
    expect(await code(service.authenticate(key))).toBe('unauthorized');
    tick(5000);
    expect(await service.revokeKey(id)).toEqual(first);
    expect(await code(service.revokeKey('key_missing'))).toBe('not_found');
  });

  test('lastUsedAt moves at most once a minute', async () => {
    const { service, store, tick, now } = setup();
    const site = await service.createSite('Shop');
    const { id, key } = await service.createKey(site.id, ['conversations:read']);
    const touches = jest.spyOn(store, 'touchKey');
    const t0 = now();
    await service.authenticate(key);
    tick(59_000);
    await service.authenticate(key);
    expect(store.rows.keys.get(id)!.last_used_at).toBe(t0);
    expect(touches).toHaveBeenCalledTimes(1); // a fresh lastUsedAt costs no write at all
    tick(2000);
    await service.authenticate(key);
    expect(store.rows.keys.get(id)!.last_used_at).toBe(t0 + 61_000);
  });
});

describe('identity verification', () => {
  test('turning it on makes a secret, shown once; later changes of mode keep it', async () => {
    const { service } = setup();
    const site = await service.createSite('Shop');
    const on = await service.setIdentity(site.id, { mode: 'enforce' });
    expect(on.identitySecret?.startsWith(IDENTITY_SECRET_PREFIX)).toBe(true);
    expect(on).toMatchObject({ identityMode: 'enforce', identitySecretSet: true });
    expect(await service.setIdentity(site.id, { mode: 'optional' })).toEqual({ identityMode: 'optional', identitySecretSet: true });
    expect(await service.setIdentity(site.id, { mode: 'off' })).toEqual({ identityMode: 'off', identitySecretSet: true });
    const access = await service.windowAccess(site.id, 'https://shop.example', 'v1');
    expect(access?.identitySecret()).toBe(on.identitySecret);
    const [listed] = await service.listSites();
    expect(listed).toMatchObject({ identityMode: 'off', identitySecretSet: true });
    expect(JSON.stringify(listed)).not.toContain(on.identitySecret!);
  });

  test('rotation answers a new secret and a new generation; the old secret no longer opens', async () => {
    const { service } = setup();
    const site = await service.createSite('Shop');
    const first = await service.setIdentity(site.id, { mode: 'enforce' });
    const before = await service.windowAccess(site.id, '', 'v1');
    const rotated = await service.setIdentity(site.id, { rotateSecret: true });
    const after = await service.windowAccess(site.id, '', 'v1');
    expect(rotated.identityMode).toBe('enforce');
    expect(rotated.identitySecret).not.toBe(first.identitySecret);
    expect(after?.identityGeneration).not.toBe(before?.identityGeneration);
    expect(after?.identitySecret()).toBe(rotated.identitySecret);
  });

  test("a bad mode or an unknown site is refused; without the master key it is a wiring error, not the caller's", async () => {
    const { service } = setup();
    const site = await service.createSite('Shop');
    expect(await code(service.setIdentity(site.id, { mode: 'always' as never }))).toBe('invalid_request');
    expect(await code(service.setIdentity('ws_missing', { mode: 'enforce' }))).toBe('not_found');
    const keyless = createAccessService(fakeAccessStore());
    const other = await keyless.createSite('Other');
    await expect(keyless.setIdentity(other.id, { mode: 'enforce' })).rejects.toThrow('master key');
  });
});

describe('the window access read', () => {
  test('no site answers null; the origin must be listed exactly', async () => {
    const { service } = setup();
    expect(await service.windowAccess('ws_missing', 'https://shop.example', 'v1')).toBeNull();
    const site = await service.createSite('Shop');
    await service.setAllowedOrigins(site.id, ['https://shop.example']);
    const access = await service.windowAccess(site.id, 'https://shop.example', 'v1');
    expect(access).toMatchObject({ originAllowed: true, identityMode: 'off', identityGeneration: null, revokedBefore: null });
    expect(access?.identitySecret()).toBeNull();
    expect((await service.windowAccess(site.id, 'https://evil.example', 'v1'))?.originAllowed).toBe(false);
  });

  test('revocations: one visitor or all; the later of the two applies; a time never moves back', async () => {
    const { service, tick, now } = setup();
    const site = await service.createSite('Shop');
    const one = await service.revokeVisitors(site.id, 'v1');
    expect(one).toEqual({ siteId: site.id, visitorId: 'v1', revokedBefore: new Date(now()).toISOString() });
    tick(1000);
    const all = await service.revokeVisitors(site.id, null);
    expect((await service.windowAccess(site.id, '', 'v1'))?.revokedBefore).toBe(now());
    expect((await service.windowAccess(site.id, '', 'v2'))?.revokedBefore).toBe(now());
    tick(-5000); // a clock stepping back (another instance's) cannot shorten a revocation
    expect(await service.revokeVisitors(site.id, null)).toEqual(all);
    expect(await code(service.revokeVisitors(site.id, 'has space'))).toBe('invalid_request');
    expect(await code(service.revokeVisitors('ws_missing', 'v1'))).toBe('not_found');
  });
});
