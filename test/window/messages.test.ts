import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { allowOrigins, auth, getToken, ORIGIN, w } from './helpers';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
  await allowOrigins(h, h.site.id);
});
afterAll(() => h?.close());

const send = (token: string, body: Record<string, unknown>) => request(h.app).post(w(h.site.id, '/messages')).set(auth(token)).set('Origin', ORIGIN).send(body);
let seq = 0;
const cid = () => `c-${Date.now()}-${seq++}`;

describe('message flow', () => {
  test('the first message starts a conversation the API sees; a reply comes back in the history', async () => {
    const t = await getToken(h.app, h.site.id);
    const first = await send(t.token, { content: 'Hello, is this in stock?', clientMessageId: cid() });
    expect(first.status).toBe(201);
    expect(first.headers['access-control-allow-origin']).toBe(ORIGIN);
    const { conversation, message } = first.body.data;
    expect(conversation).toMatchObject({ state: 'open', visitorId: t.visitorId });
    expect(message).toMatchObject({ direction: 'incoming', content: 'Hello, is this in stock?', format: 'plain', attachments: [] });
    // The window does not see the service side's fields.
    expect(message.origin).toBeUndefined();
    expect(message.apiKeyId).toBeUndefined();

    const api = await request(h.app).get(`/api/v1/conversations/${conversation.id}/messages`).set(bearer(h.site.key));
    expect(api.body.data[0]).toMatchObject({ id: message.id, origin: 'widget', direction: 'incoming' });
    const reply = await request(h.app)
      .post(`/api/v1/conversations/${conversation.id}/messages`)
      .set(bearer(h.site.key))
      .send({ content: 'Yes, **two** left.', format: 'markdown' });
    expect(reply.status).toBe(201);

    const second = await send(t.token, { content: 'Great', format: 'plain', clientMessageId: cid() });
    expect(second.body.data.conversation.id).toBe(conversation.id);

    const current = await request(h.app).get(w(h.site.id, '/conversation')).set(auth(t.token));
    expect(current.status).toBe(200);
    expect(current.body.data.conversation.id).toBe(conversation.id);
    expect(current.body.data.lastEventId).toMatch(new RegExp(`^${conversation.id}\\.\\d+\\.msg_`));

    const history = await request(h.app)
      .get(w(h.site.id, `/conversations/${conversation.id}/messages`))
      .set(auth(t.token));
    expect(history.status).toBe(200);
    expect(history.body.data.map((m: { content: string; direction: string; format: string }) => [m.direction, m.format, m.content])).toEqual([
      ['incoming', 'plain', 'Hello, is this in stock?'],
      ['outgoing', 'markdown', 'Yes, **two** left.'],
      ['incoming', 'plain', 'Great'],
    ]);
  });

  test('history pages by keyset, newest first with order=desc, without gaps', async () => {
    const t = await getToken(h.app, h.site.id);
    const first = await send(t.token, { content: 'm00', clientMessageId: cid() });
    const convId = first.body.data.conversation.id;
    for (let i = 1; i < 23; i++) await send(t.token, { content: `m${String(i).padStart(2, '0')}`, clientMessageId: cid() });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: request.Response = await request(h.app)
        .get(w(h.site.id, `/conversations/${convId}/messages?order=desc&limit=5${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`))
        .set(auth(t.token));
      expect(page.status).toBe(200);
      seen.push(...page.body.data.map((m: { content: string }) => m.content));
      cursor = page.body.page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(Array.from({ length: 23 }, (_, i) => `m${String(22 - i).padStart(2, '0')}`));
  });

  test('files travel as multipart within the limits, and come back with signed links', async () => {
    const t = await getToken(h.app, h.site.id);
    const res = await request(h.app)
      .post(w(h.site.id, '/messages'))
      .set(auth(t.token))
      .field('content', 'my receipt')
      .field('clientMessageId', cid())
      .attach('file', Buffer.from('%PDF-1.4 receipt'), { filename: 'receipt.pdf', contentType: 'application/pdf' });
    expect(res.status).toBe(201);
    const [att] = res.body.data.message.attachments;
    expect(att).toMatchObject({ name: 'receipt.pdf', mimeType: 'application/pdf', size: 16 });
    const file = await request(h.app).get(new URL(att.url).pathname + new URL(att.url).search);
    expect(file.status).toBe(200);
    expect(file.body.toString()).toBe('%PDF-1.4 receipt');

    const onlyFile = await request(h.app)
      .post(w(h.site.id, '/messages'))
      .set(auth(t.token))
      .field('clientMessageId', cid())
      .attach('file', Buffer.from('png'), { filename: 'a.png', contentType: 'image/png' });
    expect(onlyFile.status).toBe(201);

    const tooMany = request(h.app).post(w(h.site.id, '/messages')).set(auth(t.token)).field('content', 'x').field('clientMessageId', cid());
    for (let i = 0; i < 11; i++) tooMany.attach('file', Buffer.from('x'), { filename: `f${i}.txt`, contentType: 'text/plain' });
    const over = await tooMany;
    expect(over.status).toBe(413);
    expect(over.body.error.code).toBe('payload_too_large');
  });

  test('files need a valid token before a byte is stored', async () => {
    const res = await request(h.app)
      .post(w(h.site.id, '/messages'))
      .field('clientMessageId', cid())
      .attach('file', Buffer.from('x'), { filename: 'a.txt', contentType: 'text/plain' });
    expect(res.status).toBe(401);
  });
});

describe('client message id', () => {
  test('a resend returns the same message and posts nothing', async () => {
    const t = await getToken(h.app, h.site.id);
    const id = cid();
    const first = await send(t.token, { content: 'only once', clientMessageId: id });
    expect(first.status).toBe(201);
    const again = await send(t.token, { content: 'only once', clientMessageId: id });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data.message).toEqual(first.body.data.message);
    const list = await request(h.app).get(`/api/v1/conversations/${first.body.data.conversation.id}/messages`).set(bearer(h.site.key));
    expect(list.body.data.filter((m: { content: string }) => m.content === 'only once')).toHaveLength(1);
    const reused = await send(t.token, { content: 'something else', clientMessageId: id });
    expect(reused.status).toBe(422);
    expect(reused.body.error.code).toBe('idempotency_key_reused');
  });

  test('concurrent resends make exactly one message', async () => {
    const t = await getToken(h.app, h.site.id);
    const id = cid();
    const answers = await Promise.all(Array.from({ length: 8 }, () => send(t.token, { content: 'racing', clientMessageId: id })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(answers.map((a) => a.body.data.message.id)).size).toBe(1);
    const list = await request(h.app).get(`/api/v1/conversations/${answers[0].body.data.conversation.id}/messages`).set(bearer(h.site.key));
    expect(list.body.data.filter((m: { content: string }) => m.content === 'racing')).toHaveLength(1);
  });

  test('simultaneous sends that all miss the first check still make one message (the unique key decides)', async () => {
    // Straight through the service: every call reads before any of them writes.
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => h.runtime.services.window.chat.visitorSay(h.site.id, 'vis_direct', 'same message', { clientMessageId: 'direct-1' })),
    );
    expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
    expect(new Set(answers.map((a) => a.message.id)).size).toBe(1);
    const rows = await h.runtime.db('messages').where({ conversation_id: answers[0].conversation.id, content: 'same message' });
    expect(rows).toHaveLength(1);
  });

  test('client ids belong to one visitor: another visitor may use the same id', async () => {
    const a = await getToken(h.app, h.site.id);
    const b = await getToken(h.app, h.site.id);
    const one = await send(a.token, { content: 'a', clientMessageId: 'shared-id' });
    const two = await send(b.token, { content: 'b', clientMessageId: 'shared-id' });
    expect([one.status, two.status]).toEqual([201, 201]);
    expect(two.body.data.message.id).not.toBe(one.body.data.message.id);
  });
});

describe('the closed-conversation rule', () => {
  test('after a close, several messages at once start exactly one new conversation', async () => {
    const t = await getToken(h.app, h.site.id);
    const first = await send(t.token, { content: 'before', clientMessageId: cid() });
    const closedId = first.body.data.conversation.id;
    const close = await request(h.app).post(`/api/v1/conversations/${closedId}/close`).set(bearer(h.site.key));
    expect(close.status).toBe(200);
    const current = await request(h.app).get(w(h.site.id, '/conversation')).set(auth(t.token));
    expect(current.body.data.conversation).toMatchObject({ id: closedId, state: 'closed' });
    expect(current.body.data.lastEventId).toBe(`${closedId}.closed`);

    const burst = await Promise.all(Array.from({ length: 6 }, (_, i) => send(t.token, { content: `after ${i}`, clientMessageId: cid() })));
    expect(burst.every((r) => r.status === 201)).toBe(true);
    const ids = new Set(burst.map((r) => r.body.data.conversation.id));
    expect(ids.size).toBe(1);
    expect(ids.has(closedId)).toBe(false);
    const list = await request(h.app).get(`/api/v1/conversations?state=open`).set(bearer(h.site.key));
    expect(list.body.data.filter((c: { visitorId: string }) => c.visitorId === t.visitorId)).toHaveLength(1);
    const old = await request(h.app).get(`/api/v1/conversations/${closedId}`).set(bearer(h.site.key));
    expect(old.body.data.state).toBe('closed');
  });
});

describe('hostile input', () => {
  let t: Awaited<ReturnType<typeof getToken>>;
  beforeAll(async () => {
    t = await getToken(h.app, h.site.id);
  });

  test('wrong types, missing fields and unknown fields are 400 in the envelope', async () => {
    const cases: unknown[] = [
      { content: 5, clientMessageId: cid() },
      { content: 'x' },
      { content: 'x', clientMessageId: '' },
      { content: 'x', clientMessageId: 'has space' },
      { content: 'x', clientMessageId: 'y'.repeat(65) },
      { content: 'x', clientMessageId: cid(), format: 'html' },
      { content: 'x', clientMessageId: cid(), visitorId: 'vis_other' },
      { content: '', clientMessageId: cid() },
      { content: ['a'], clientMessageId: cid() },
    ];
    for (const body of cases) {
      const res = await send(t.token, body as Record<string, unknown>);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
    }
    const badJson = await request(h.app).post(w(h.site.id, '/messages')).set(auth(t.token)).set('Content-Type', 'application/json').send('{"content": ');
    expect(badJson.status).toBe(400);
    const text = await request(h.app).post(w(h.site.id, '/messages')).set(auth(t.token)).set('Content-Type', 'text/plain').send('hello');
    expect(text.status).toBe(415);
  });

  test('oversized content and bodies are refused', async () => {
    const long = await send(t.token, { content: 'x'.repeat(10_001), clientMessageId: cid() });
    expect(long.status).toBe(400);
    const huge = await send(t.token, { content: 'x'.repeat(70 * 1024), clientMessageId: cid() });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('payload_too_large');
    const hugeHeader = await request(h.app)
      .get(w(h.site.id, '/events/poll?lastEventId=' + 'a'.repeat(4000)))
      .set(auth(t.token));
    expect(hugeHeader.status).toBe(400);
  });

  test('a script in content is stored and returned as text, unchanged', async () => {
    const evil = '<script>alert(1)</script><img src=x onerror=alert(2)> [x](javascript:alert(3))';
    const res = await send(t.token, { content: evil, format: 'markdown', clientMessageId: cid() });
    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const history = await request(h.app)
      .get(w(h.site.id, `/conversations/${res.body.data.conversation.id}/messages?order=desc&limit=1`))
      .set(auth(t.token));
    expect(history.body.data[0].content).toBe(evil);
  });

  test("a visitor cannot read another visitor's conversation, by id or by event id", async () => {
    const victim = await getToken(h.app, h.site.id);
    const theirs = await send(victim.token, { content: 'my secret order', clientMessageId: cid() });
    const convId = theirs.body.data.conversation.id;
    const read = await request(h.app)
      .get(w(h.site.id, `/conversations/${convId}/messages`))
      .set(auth(t.token));
    expect(read.status).toBe(404);
    expect(read.body.error.code).toBe('not_found');
    const poll = await request(h.app)
      .get(w(h.site.id, `/events/poll?lastEventId=${convId}.0.`))
      .set(auth(t.token));
    expect(poll.status).toBe(400);
    const bad = await request(h.app).get(w(h.site.id, `/conversations/not-an-id/messages`)).set(auth(t.token));
    expect(bad.status).toBe(400);
    // A conversation of another site is no different.
    const other = await h.newSite('Other');
    const foreign = await h.visitorSay(other.id, t.visitorId, 'same visitor id, other site');
    const cross = await request(h.app)
      .get(w(h.site.id, `/conversations/${foreign.conversation.id}/messages`))
      .set(auth(t.token));
    expect(cross.status).toBe(404);
  });

  test('unknown paths and methods under the window entry answer the envelope', async () => {
    const unknown = await request(h.app).get('/window/v1/nothing').set(auth(t.token));
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    const method = await request(h.app).delete(w(h.site.id, '/messages')).set(auth(t.token));
    expect(method.status).toBe(405);
    expect(method.body.error.code).toBe('method_not_allowed');
  });
});
