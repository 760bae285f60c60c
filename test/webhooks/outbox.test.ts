/**
 * The outbox tells the event channel of what a transaction wrote once it committed, and only
 * then: a rollback (thrown, or `trx.rollback()` without an error, which knex settles like a
 * commit), an attempt lost to another writer and retried, or a transaction not opened by
 * runInTransaction tells nobody anything. On both engines.
 */
import type { Knex } from 'knex';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { runInTransaction } from '../../server/db/transaction';
import { createOutbox, EmitInput } from '../../server/webhooks/outbox';
import type { CommittedEvent } from '../../server/delivery/channel';
import request from 'supertest';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

const nextTurns = () => new Promise((r) => setTimeout(r, 30));

/** An outbox whose channel records what it is told, synchronously. */
function recorded() {
  const told: CommittedEvent[][] = [];
  return { told, outbox: createOutbox({ publish: (events) => void told.push(events.filter((e): e is CommittedEvent => e.kind === 'event')) }) };
}

const input = (visitorId: string): EmitInput => ({
  siteId: h.site.id,
  name: 'conversation.closed',
  conversation: {
    id: `conv_${visitorId}`,
    state: 'closed',
    visitorId,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    lastMessageAt: null,
    closedAt: '2026-01-01T00:00:00.000Z',
  },
  message: null,
});
const eventRows = (ids: string[]) => h.runtime.db('events').whereIn('id', ids).pluck('id');

describe('the outbox tells the channel after the commit, and only then', () => {
  test('a commit tells once, with every event the transaction wrote and its site and visitor', async () => {
    const { told, outbox } = recorded();
    const at = Date.now();
    let toldInside = -1;
    const written = await runInTransaction(h.runtime.db, async (trx) => {
      const a = await outbox.emit(trx, input('ann'), at);
      const b = await outbox.emit(trx, input('bob'), at + 1);
      toldInside = told.length;
      return [a, b];
    });
    expect(toldInside).toBe(0); // nothing before the commit
    expect(told).toEqual([
      [
        { kind: 'event', id: written[0].id, siteId: h.site.id, visitorId: 'ann', createdAt: at },
        { kind: 'event', id: written[1].id, siteId: h.site.id, visitorId: 'bob', createdAt: at + 1 },
      ],
    ]);
    expect((await eventRows(written.map((e) => e.id))).sort()).toEqual(written.map((e) => e.id).sort());
  });

  test('a transaction that throws tells nothing, and its event is not written', async () => {
    const { told, outbox } = recorded();
    let id = '';
    await expect(
      runInTransaction(h.runtime.db, async (trx) => {
        id = (await outbox.emit(trx, input('carl'), Date.now())).id;
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    await nextTurns();
    expect(told).toEqual([]);
    expect(await eventRows([id])).toEqual([]);
  });

  test('trx.rollback() without an error (knex resolves it like a commit) tells nothing', async () => {
    const { told, outbox } = recorded();
    let id = '';
    await runInTransaction(h.runtime.db, async (trx) => {
      id = (await outbox.emit(trx, input('dora'), Date.now())).id;
      await trx.rollback();
    });
    await nextTurns();
    expect(told).toEqual([]);
    expect(await eventRows([id])).toEqual([]);
  });

  test('an attempt lost to another writer tells nothing; the retry that commits tells its own event once', async () => {
    const { told, outbox } = recorded();
    const ids: string[] = [];
    let attempt = 0;
    await runInTransaction(h.runtime.db, async (trx) => {
      attempt++;
      ids.push((await outbox.emit(trx, input(`eve${attempt}`), Date.now())).id);
      if (attempt === 1) throw Object.assign(new Error('lost to another writer'), { code: 'ER_LOCK_DEADLOCK' });
    });
    expect(attempt).toBe(2);
    await nextTurns();
    expect(told).toEqual([[expect.objectContaining({ id: ids[1], visitorId: 'eve2' })]]);
    expect(await eventRows(ids)).toEqual([ids[1]]);
  });

  test('an event written in a savepoint is told after the outermost commit', async () => {
    const { told, outbox } = recorded();
    let toldAfterSavepoint = -1;
    await runInTransaction(h.runtime.db, async (trx) => {
      await trx.transaction(async (inner) => {
        await outbox.emit(inner, input('fay'), Date.now());
      });
      toldAfterSavepoint = told.length;
    });
    expect(toldAfterSavepoint).toBe(0);
    expect(told).toEqual([[expect.objectContaining({ visitorId: 'fay' })]]);
  });

  test('a transaction not opened by runInTransaction is refused, and rolls back', async () => {
    const { told, outbox } = recorded();
    await expect(h.runtime.db.transaction((trx: Knex.Transaction) => outbox.emit(trx, input('gus'), Date.now()))).rejects.toThrow(/runInTransaction/);
    await nextTurns();
    expect(told).toEqual([]);
    expect(await h.runtime.db('events').where({ site_id: h.site.id }).andWhere('body', 'like', '%"gus"%').count({ n: '*' })).toEqual([{ n: 0 }]);
  });
});

describe('the writers go through it', () => {
  test("a visitor's first message is heard once, with both its events; a refused reply is not heard", async () => {
    const heard: (readonly CommittedEvent[] | null)[] = [];
    const off = h.runtime.services.channel.subscribe((events) => heard.push(events), ['event']);
    try {
      const said = await h.visitorSay(h.site.id, 'vis_outbox', 'hello');
      await nextTurns();
      expect(heard).toHaveLength(1);
      const events = heard[0]!;
      expect(events.map((e) => e.id.split(':')[0]).sort()).toEqual(['conversation.started', 'message.created']);
      for (const e of events) expect(e).toMatchObject({ siteId: h.site.id, visitorId: 'vis_outbox' });

      heard.length = 0;
      const convId = said.conversation.id;
      await request(h.app).post(`/api/v1/conversations/${convId}/close`).set(bearer(h.site.key)).expect(200);
      await nextTurns();
      expect(heard).toEqual([[expect.objectContaining({ siteId: h.site.id, visitorId: 'vis_outbox' })]]);

      heard.length = 0;
      const refused = await request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).send({ content: 'too late' });
      expect(refused.status).toBe(409);
      await request(h.app).post(`/api/v1/conversations/${convId}/close`).set(bearer(h.site.key)).expect(200); // closed already: no event
      await nextTurns();
      expect(heard).toEqual([]);
    } finally {
      off();
    }
  });
});
