import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';

let h: Harness;
let convId: string;
beforeAll(async () => {
  h = await createHarness();
  convId = (await h.visitorSay(h.site.id, 'v-idem', 'hi')).conversation.id;
});
afterAll(() => h.close());

const reply = (key: string | undefined, body: object, id = convId, apiKey = h.site.key) => {
  const r = request(h.app).post(`/api/v1/conversations/${id}/messages`).set(bearer(apiKey));
  return (key === undefined ? r : r.set('Idempotency-Key', key)).send(body);
};
const count = async (content: string) => (await h.runtime.db('messages').where({ content })).length;

test('a repeat answers the first answer with Idempotent-Replayed and creates nothing', async () => {
  const first = await reply('k-1', { content: 'once' });
  expect(first.status).toBe(201);
  expect(first.headers['idempotent-replayed']).toBeUndefined();
  const second = await reply('k-1', { content: 'once' });
  expect(second.status).toBe(201);
  expect(second.headers['idempotent-replayed']).toBe('true');
  expect(second.body).toEqual(first.body);
  expect(await count('once')).toBe(1);
  const events = (await h.runtime.db('events').where({ name: 'message.created' })).filter((e) => JSON.parse(e.body).data.message.content === 'once');
  expect(events).toHaveLength(1);
});

test('the same body with keys in another order is the same request', async () => {
  await reply('k-order', { content: 'ordered', format: 'plain' });
  const again = await reply('k-order', { format: 'plain', content: 'ordered' });
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect(await count('ordered')).toBe(1);
});

test('50 concurrent repeats create exactly one message; the others replay or are told the first is running', async () => {
  const answers = await Promise.all(Array.from({ length: 50 }, () => reply('k-burst', { content: 'burst' })));
  const statuses = answers.map((a) => a.status);
  expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
  expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
  for (const a of answers.filter((x) => x.status === 409)) expect(a.body.error.code).toBe('idempotency_key_in_use');
  const created = answers.filter((a) => a.status === 201);
  expect(new Set(created.map((a) => a.body.data.id)).size).toBe(1);
  expect(await count('burst')).toBe(1);
});

test('the same key with a different body is 422 and creates nothing', async () => {
  await reply('k-changed', { content: 'original' });
  const res = await reply('k-changed', { content: 'changed' });
  expect(res.status).toBe(422);
  expect(res.body.error.code).toBe('idempotency_key_reused');
  expect(await count('changed')).toBe(0);
});

test('the same key on another conversation is 422', async () => {
  const other = (await h.visitorSay(h.site.id, 'v-idem-2', 'hi')).conversation.id;
  await reply('k-path', { content: 'path-a' });
  const res = await reply('k-path', { content: 'path-a' }, other);
  expect(res.status).toBe(422);
});

test('keys are scoped to the access key', async () => {
  const second = await h.newKey(h.site.id, ['conversations:write']);
  const a = await reply('k-scope', { content: 'scope' });
  const b = await reply('k-scope', { content: 'scope' }, convId, second.key);
  expect(a.status).toBe(201);
  expect(b.status).toBe(201);
  expect(b.headers['idempotent-replayed']).toBeUndefined();
  expect(await count('scope')).toBe(2);
});

test('an error answer is replayed too (409 on a closed conversation)', async () => {
  const closed = (await h.visitorSay(h.site.id, 'v-idem-closed', 'hi')).conversation.id;
  await h.runtime.services.conversations.close(h.site.id, closed);
  const first = await reply('k-err', { content: 'late' }, closed);
  const second = await reply('k-err', { content: 'late' }, closed);
  expect(first.status).toBe(409);
  expect(second.status).toBe(409);
  expect(second.headers['idempotent-replayed']).toBe('true');
});

test('a key whose first request died is taken over after its lock expires', async () => {
  let now = Date.now();
  const clocked = await createHarness({ now: () => now });
  try {
    const conv = (await clocked.visitorSay(clocked.site.id, 'v', 'hi')).conversation.id;
    // The first request reserved the key, then the process died before answering.
    const begun = await clocked.runtime.services.idempotency.begin(clocked.site.keyId, 'k-dead', 'whatever');
    expect(begun.kind).toBe('proceed');
    const body = { content: 'after crash' };
    const blocked = await request(clocked.app)
      .post(`/api/v1/conversations/${conv}/messages`)
      .set(bearer(clocked.site.key))
      .set('Idempotency-Key', 'k-dead')
      .send(body);
    expect(blocked.status).toBe(422); // another request hash: the dead request had another body
    const begun2 = await clocked.runtime.services.idempotency.begin(clocked.site.keyId, 'k-dead-2', 'h');
    expect(begun2.kind).toBe('proceed');
    await expect(clocked.runtime.services.idempotency.begin(clocked.site.keyId, 'k-dead-2', 'h')).rejects.toMatchObject({ code: 'idempotency_key_in_use' });
    now += 61_000;
    const taken = await clocked.runtime.services.idempotency.begin(clocked.site.keyId, 'k-dead-2', 'h');
    expect(taken.kind).toBe('proceed');
  } finally {
    await clocked.close();
  }
});

test('keys are forgotten after 24 hours', async () => {
  let now = Date.now();
  const clocked = await createHarness({ now: () => now });
  try {
    const conv = (await clocked.visitorSay(clocked.site.id, 'v', 'hi')).conversation.id;
    const send = () =>
      request(clocked.app)
        .post(`/api/v1/conversations/${conv}/messages`)
        .set(bearer(clocked.site.key))
        .set('Idempotency-Key', 'k-day')
        .send({ content: 'daily' });
    expect((await send()).status).toBe(201);
    now += 23 * 3600_000;
    expect((await send()).headers['idempotent-replayed']).toBe('true');
    now += 2 * 3600_000;
    const later = await send();
    expect(later.status).toBe(201);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect((await clocked.runtime.db('messages').where({ content: 'daily' })).length).toBe(2);
  } finally {
    await clocked.close();
  }
});

test('invalid Idempotency-Key values are 400', async () => {
  for (const key of ['x'.repeat(256), 'tab\there', 'ümlaut']) {
    const res = await request(h.app)
      .post(`/api/v1/conversations/${convId}/messages`)
      .set(bearer(h.site.key))
      .set('Idempotency-Key', Buffer.from(key, 'latin1').toString('latin1'))
      .send({ content: 'bad key' });
    expect(res.status).toBe(400);
  }
  expect(await count('bad key')).toBe(0);
});

test('multipart repeats with the same files replay; other files are a different request', async () => {
  const send = (bytes: string) =>
    request(h.app)
      .post(`/api/v1/conversations/${convId}/messages`)
      .set(bearer(h.site.key))
      .set('Idempotency-Key', 'k-files')
      .field('content', 'with file')
      .attach('file', Buffer.from(bytes), 'a.txt');
  expect((await send('AAA')).status).toBe(201);
  const again = await send('AAA');
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect((await send('BBB')).status).toBe(422);
  expect(await count('with file')).toBe(1);
});

test('an explicit default is the same request as leaving it out', async () => {
  const first = await reply('k-default', { content: 'defaulted' });
  const second = await reply('k-default', { content: 'defaulted', format: 'plain' });
  expect(first.status).toBe(201);
  expect(second.status).toBe(201);
  expect(second.headers['idempotent-replayed']).toBe('true');
  expect(await count('defaulted')).toBe(1);
});

test('when the transaction fails after recording the answer, the key is released at once', async () => {
  const messages = h.runtime.services.messages;
  const realReply = messages.reply.bind(messages);
  const spy = jest.spyOn(messages, 'reply').mockImplementationOnce((siteId, conversationId, input, within) =>
    realReply(siteId, conversationId, input, async (trx, message) => {
      await within?.(trx, message);
      throw new Error('commit failed'); // rolls back the message and the recorded answer
    }),
  );
  try {
    const failed = await reply('k-commit', { content: 'after a failed commit' });
    expect(failed.status).toBe(500);
  } finally {
    spy.mockRestore();
  }
  expect(await count('after a failed commit')).toBe(0);
  const retried = await reply('k-commit', { content: 'after a failed commit' });
  expect(retried.status).toBe(201);
  expect(retried.headers['idempotent-replayed']).toBeUndefined();
  expect(await count('after a failed commit')).toBe(1);
});

test('the same bytes under another file name, another type or in another order are a different request', async () => {
  const send = (files: { bytes: string; name: string; type: string }[]) => {
    let r = request(h.app)
      .post(`/api/v1/conversations/${convId}/messages`)
      .set(bearer(h.site.key))
      .set('Idempotency-Key', 'k-file-meta')
      .field('content', 'file meta');
    for (const f of files) r = r.attach('file', Buffer.from(f.bytes), { filename: f.name, contentType: f.type });
    return r;
  };
  const a = { bytes: 'same bytes', name: 'a.txt', type: 'text/plain' };
  const b = { bytes: 'other bytes', name: 'b.txt', type: 'text/plain' };
  const first = await send([a, b]);
  expect(first.status).toBe(201);
  const again = await send([a, b]);
  expect(again.status).toBe(201);
  expect(again.headers['idempotent-replayed']).toBe('true');
  for (const changed of [
    [{ ...a, name: 'renamed.txt' }, b],
    [{ ...a, type: 'application/octet-stream' }, b],
    [b, a],
  ]) {
    const res = await send(changed);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('idempotency_key_reused');
  }
  expect(await count('file meta')).toBe(1);
});
