import { createLocalPresence, createRedisPresence } from '../../server/inbox/presence';
import { createLogger } from '../../server/platform/logger';
import { freePort } from '../helpers/spawn';
import { startPrivateRedis, stopPrivateRedis, type PrivateRedis } from '../helpers/redis';
import { waitFor } from '../helpers/wait';

describe('inbox presence', () => {
  it('in process: an account is online while one of its streams is open', async () => {
    const presence = createLocalPresence();
    const a = presence.open('site_1', 'acc_a');
    const b = presence.open('site_1', 'acc_a');
    presence.open('site_2', 'acc_b');
    expect([...(await presence.online('site_1'))]).toEqual(['acc_a']);
    a();
    expect([...(await presence.online('site_1'))]).toEqual(['acc_a']);
    b();
    expect((await presence.online('site_1')).size).toBe(0);
    expect([...(await presence.online('site_2'))]).toEqual(['acc_b']);
  });

  describe('across instances (Redis)', () => {
    let redis: PrivateRedis | undefined;
    let url = '';
    beforeAll(async () => {
      const port = await freePort();
      redis = await startPrivateRedis(port, 'presence-secret');
      url = `redis://:presence-secret@127.0.0.1:${port}`;
    });
    afterAll(() => stopPrivateRedis(redis));

    it("sees another instance's streams, and a killed instance's entries lapse", async () => {
      const logger = createLogger('silent');
      const one = createRedisPresence({ redisUrl: url, logger, ttlMs: 600, refreshMs: 100, prefix: 'p1:' });
      const two = createRedisPresence({ redisUrl: url, logger, ttlMs: 600, refreshMs: 100, prefix: 'p1:' });
      try {
        const leave = one.open('s', 'acc_a');
        await waitFor('seen on the other instance', async () => (await two.online('s')).has('acc_a'));
        leave();
        await waitFor('gone on the other instance', async () => !(await two.online('s')).has('acc_a'));
        // An instance that stops refreshing (killed) is forgotten once its entries lapse.
        one.open('s', 'acc_b');
        await waitFor('seen', async () => (await two.online('s')).has('acc_b'));
        await one.close();
        await waitFor('lapsed', async () => !(await two.online('s')).has('acc_b'));
      } finally {
        await one.close();
        await two.close();
      }
    });
  });
});
