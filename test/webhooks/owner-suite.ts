import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { deliveryEnv, deliveryOf, Receiver, startReceiver, waitFor, workerPool } from './helpers';
import { M, manageHarness, memberWithToken } from '../manage/helpers';

/**
 * A suite's management-API harness that delivers to a receiver of its own, with an owner of its
 * first site (email `owner@example.com`) holding a management token, and a worker pool woken by
 * every committed event: made in beforeAll, closed in afterAll. Read its fields inside tests.
 */
export function ownerDeliverySuite() {
  let receiver: Receiver;
  let h: Harness;
  let owner: { id: string; token: string };
  const pool = workerPool(() => h);
  beforeAll(async () => {
    receiver = await startReceiver();
    h = await manageHarness({ env: deliveryEnv(receiver, { delaysMs: [50] }), onEvents: () => pool.wake() });
    owner = await memberWithToken(h, h.site.id, 'owner@example.com', 'owner');
    pool.start();
  });
  afterAll(async () => {
    await pool.stopAll();
    await h.close();
    await receiver.close();
  });
  return {
    get receiver() {
      return receiver;
    },
    get h() {
      return h;
    },
    get owner() {
      return owner;
    },
    pool,
    /** A /manage/v1 call with the owner's token. */
    api(method: 'get' | 'put' | 'patch' | 'post', path: string, body?: object) {
      const r = request(h.app)[method](`${M}${path}`).set('Authorization', `Bearer ${owner.token}`);
      return body ? r.send(body) : r;
    },
    /** A visitor writes; the id of its `message.created` event once its delivery is `done`. */
    async messageEvent(siteId: string, visitor: string, done: 'delivered' | 'failed'): Promise<string> {
      const said = await h.visitorSay(siteId, visitor, `hello from ${visitor}`);
      const [{ id }] = await h.runtime.db('events').where({ conversation_id: said.conversation.id, name: 'message.created' }).select('id');
      await waitFor(`${id} ${done}`, async () => (await deliveryOf(h, id))?.status === done);
      return id;
    },
  };
}
