import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { createIdempotencyService, IDEMPOTENCY_LOCK_MS } from '../../server/idempotency/service';
import { createIdempotencyStore } from '../../server/idempotency/store';
import { sha256Hex } from '../../server/platform/crypto';
import type { MessageService } from '../../server/messages/service';

/** The first request with a key is slow (a long upload, a lock wait) and outlives its lease. */
let now = Date.now();
let h: Harness;
beforeAll(async () => {
  h = await createHarness({ now: () => now });
});
afterAll(() => h.close());

const count = async (content: string) => (await h.runtime.db('messages').where({ content })).length;
const send = (convId: string, key: string, content: string) =>
  request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).set('Idempotency-Key', key).send({ content });

/** Held requests and their answers: released and awaited after each test, even a failed one. */
const held: { release: (fail?: Error) => void }[] = [];
const inFlight: Promise<unknown>[] = [];
const started = (answer: request.Test) => {
  const settled = answer.then((r) => r);
  inFlight.push(settled.catch(() => undefined));
  return settled;
};

/** Makes the next call of messages.reply wait until released; `waiting` resolves once it waits. */
function holdNextReply(messages: MessageService) {
  const realReply = messages.reply.bind(messages);
  let release!: (fail?: Error) => void;
  const released = new Promise<Error | undefined>((resolve) => (release = resolve));
  let entered!: () => void;
  const waiting = new Promise<void>((resolve) => (entered = resolve));
  jest.spyOn(messages, 'reply').mockImplementationOnce(async (...args) => {
    entered();
    const fail = await released;
    if (fail) throw fail;
    return realReply(...args);
  });
  held.push({ release });
  return { waiting, release };
}

afterEach(async () => {
  jest.restoreAllMocks();
  for (const gate of held.splice(0)) gate.release();
  await Promise.all(inFlight.splice(0));
});

test('a first request that outlived its lease cannot commit after a repeat took the key over', async () => {
  const conv = (await h.visitorSay(h.site.id, 'v-fence', 'hi')).conversation.id;
  const first = holdNextReply(h.runtime.services.messages);
  const firstAnswer = started(send(conv, 'k-fence', 'fenced'));
  await first.waiting;

  // The first request's lease ran out (its process stalled): an identical repeat takes the key over.
  now += IDEMPOTENCY_LOCK_MS + 1000;
  const repeat = await send(conv, 'k-fence', 'fenced');
  expect(repeat.status).toBe(201);
  expect(repeat.headers['idempotent-replayed']).toBeUndefined();

  first.release();
  const late = await firstAnswer;
  expect(late.status).toBe(409);
  expect(late.body.error.code).toBe('idempotency_key_in_use');
  expect(await count('fenced')).toBe(1);

  // A retry of the fenced request gets the answer of the one that committed.
  const retried = await send(conv, 'k-fence', 'fenced');
  expect(retried.status).toBe(201);
  expect(retried.headers['idempotent-replayed']).toBe('true');
  expect(retried.body).toEqual(repeat.body);
  expect(await count('fenced')).toBe(1);
  const events = (await h.runtime.db('events').where({ name: 'message.created' })).filter((e) => JSON.parse(e.body).data.message.content === 'fenced');
  expect(events).toHaveLength(1);
});

test('a first request that fails after losing its lease does not forget the key of the repeat still running', async () => {
  const conv = (await h.visitorSay(h.site.id, 'v-fence-fail', 'hi')).conversation.id;
  const messages = h.runtime.services.messages;
  const first = holdNextReply(messages);
  const firstAnswer = started(send(conv, 'k-fence-fail', 'fenced fail'));
  await first.waiting;

  now += IDEMPOTENCY_LOCK_MS + 1000;
  jest.restoreAllMocks();
  const second = holdNextReply(messages);
  const secondAnswer = started(send(conv, 'k-fence-fail', 'fenced fail'));
  await second.waiting; // the repeat took the key over and is running

  first.release(new Error('the database went away'));
  expect((await firstAnswer).status).toBe(500);

  // The key is still the repeat's: a third copy is told it is running, and creates nothing.
  const third = await send(conv, 'k-fence-fail', 'fenced fail');
  expect(third.status).toBe(409);
  expect(third.body.error.code).toBe('idempotency_key_in_use');

  second.release();
  expect((await secondAnswer).status).toBe(201);
  expect(await count('fenced fail')).toBe(1);
});

describe('lease renewal (real time, short lease)', () => {
  const lockMs = 300;
  const rowOf = (key: string) =>
    h.runtime
      .db('idempotency_keys')
      .where({ api_key_id: h.site.keyId, key_hash: sha256Hex(key) })
      .first();

  test('a running request renews its lease and keeps its key past the first lease; its answer is then recorded', async () => {
    const service = createIdempotencyService(createIdempotencyStore(h.runtime.db), Date.now, { lockMs });
    const begun = await service.begin(h.site.keyId, 'k-beat', 'same request');
    if (begun.kind !== 'proceed') throw new Error('expected to proceed');
    const firstLease = Number((await rowOf('k-beat')).locked_until);

    // Wait until the clock is well past the first lease; the row must have been renewed meanwhile.
    await waitFor('three leases to pass', () => Date.now() > firstLease + 2 * lockMs, 5000);
    const renewedLease = Number((await rowOf('k-beat')).locked_until);
    expect(renewedLease).toBeGreaterThan(firstLease);
    expect(renewedLease).toBeGreaterThan(Date.now());
    await expect(service.begin(h.site.keyId, 'k-beat', 'same request')).rejects.toMatchObject({ code: 'idempotency_key_in_use' });

    await begun.handle.finish(400, { error: { code: 'invalid_request', message: 'x' } });
    const done = await rowOf('k-beat');
    expect(done.state).toBe('done');
    const replay = await service.begin(h.site.keyId, 'k-beat', 'same request');
    expect(replay).toMatchObject({ kind: 'replay', status: 400 });
  });

  test('a request stuck past the longest hold stops renewing, so a repeat can take over', async () => {
    const service = createIdempotencyService(createIdempotencyStore(h.runtime.db), Date.now, { lockMs, maxHoldMs: 2 * lockMs });
    const begun = await service.begin(h.site.keyId, 'k-stuck', 'same request');
    expect(begun.kind).toBe('proceed');
    let taken = false;
    await waitFor(
      'a repeat to take the stuck key over',
      async () => {
        try {
          taken = (await service.begin(h.site.keyId, 'k-stuck', 'same request')).kind === 'proceed';
        } catch (err) {
          if ((err as { code?: string }).code !== 'idempotency_key_in_use') throw err;
        }
        return taken;
      },
      10_000,
    );
    expect(taken).toBe(true);
  });
});
