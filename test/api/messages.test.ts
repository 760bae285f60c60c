import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { leftAfterCleanUp } from '../helpers/wait';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const url = (id: string) => `/api/v1/conversations/${id}/messages`;

describe('paging through 1,000 messages', () => {
  let convId: string;
  const contents: string[] = [];
  beforeAll(async () => {
    const first = await h.visitorSay(h.site.id, 'v-long', 'm0000');
    convId = first.conversation.id;
    contents.push('m0000');
    // Written straight through the service in a batch of transactions to keep the setup fast.
    for (let i = 1; i < 1000; i++) {
      const text = `m${String(i).padStart(4, '0')}`;
      contents.push(text);
      await h.runtime.services.messages.reply(h.site.id, convId, {
        direction: i % 2 ? 'outgoing' : 'incoming',
        origin: i % 2 ? 'messenger' : 'widget',
        apiKeyId: null,
        content: text,
        format: 'plain',
        files: [],
      });
    }
  }, 120_000);

  async function walk(query: string, limit: number) {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: request.Response = await request(h.app)
        .get(`${url(convId)}?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
        .set(bearer(h.site.key));
      expect(res.status).toBe(200);
      seen.push(...res.body.data.map((m: { content: string }) => m.content));
      cursor = res.body.page.nextCursor;
      pages++;
    } while (cursor);
    return { seen, pages };
  }

  test('oldest first: no duplicate, no gap', async () => {
    const { seen, pages } = await walk('', 100);
    expect(seen).toEqual(contents);
    expect(pages).toBe(10);
  });

  test('newest first with order=desc, odd page size', async () => {
    const { seen } = await walk('&order=desc', 37);
    expect(seen).toEqual([...contents].reverse());
  });

  test('messages written while paging do not shift the pages already read', async () => {
    const firstPage = await request(h.app)
      .get(`${url(convId)}?limit=50`)
      .set(bearer(h.site.key));
    await h.runtime.services.messages.reply(h.site.id, convId, {
      direction: 'outgoing',
      origin: 'messenger',
      apiKeyId: null,
      content: 'late',
      format: 'plain',
      files: [],
    });
    const second = await request(h.app)
      .get(`${url(convId)}?limit=50&cursor=${encodeURIComponent(firstPage.body.page.nextCursor)}`)
      .set(bearer(h.site.key));
    expect(second.body.data[0].content).toBe('m0050');
    contents.push('late');
  });

  test('a cursor of one conversation does not page another, nor another order', async () => {
    const first = await request(h.app)
      .get(`${url(convId)}?limit=5`)
      .set(bearer(h.site.key));
    const other = await h.visitorSay(h.site.id, 'v-other-conv', 'x');
    const res = await request(h.app)
      .get(`${url(other.conversation.id)}?cursor=${encodeURIComponent(first.body.page.nextCursor)}`)
      .set(bearer(h.site.key));
    expect(res.status).toBe(400);
    const desc = await request(h.app)
      .get(`${url(convId)}?order=desc&cursor=${encodeURIComponent(first.body.page.nextCursor)}`)
      .set(bearer(h.site.key));
    expect(desc.status).toBe(400);
  });
});

describe('replies', () => {
  let convId: string;
  beforeAll(async () => {
    convId = (await h.visitorSay(h.site.id, 'v-reply', 'Hello?')).conversation.id;
  });

  test('a JSON reply is an outgoing api message with the key id, in the shared history and emitted', async () => {
    const res = await request(h.app).post(url(convId)).set(bearer(h.site.key)).send({ content: 'How can we help?' });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({
      conversationId: convId,
      direction: 'outgoing',
      origin: 'api',
      apiKeyId: h.site.keyId,
      content: 'How can we help?',
      format: 'plain',
      attachments: [],
    });
    const history = await request(h.app).get(url(convId)).set(bearer(h.site.key));
    expect(history.body.data.map((m: { id: string }) => m.id)).toContain(res.body.data.id);
    const emitted = (await h.runtime.db('events').where({ name: 'message.created' })).map((e) => JSON.parse(e.body));
    const mine = emitted.find((e) => e.data.message.id === res.body.data.id);
    expect(mine.data.message.origin).toBe('api');
    expect(mine.data.message.apiKeyId).toBe(h.site.keyId);
    expect(mine.workspaceKey).toBe(h.site.id);
    expect(mine.id).toMatch(/^message\.created:/);
  });

  test('markdown format', async () => {
    const res = await request(h.app).post(url(convId)).set(bearer(h.site.key)).send({ content: '**bold**', format: 'markdown' });
    expect(res.status).toBe(201);
    expect(res.body.data.format).toBe('markdown');
  });

  test('content of exactly 10,000 characters (astral ones included) is taken, 10,001 is refused', async () => {
    const ok = await request(h.app)
      .post(url(convId))
      .set(bearer(h.site.key))
      .send({ content: '😀'.repeat(5000) + 'a'.repeat(5000) });
    expect(ok.status).toBe(201);
    const tooLong = await request(h.app)
      .post(url(convId))
      .set(bearer(h.site.key))
      .send({ content: 'a'.repeat(10_001) });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.details[0].path).toBe('/body/content');
  });

  test('empty or blank content without a file is refused', async () => {
    for (const content of ['', '   \n\t']) {
      const res = await request(h.app).post(url(convId)).set(bearer(h.site.key)).send({ content });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
    }
  });

  test('multipart reply with files: stored, listed, downloadable, emitted with signed links', async () => {
    const res = await request(h.app)
      .post(url(convId))
      .set(bearer(h.site.key))
      .field('content', 'Here is your invoice')
      .field('format', 'plain')
      .attach('file', Buffer.from('%PDF-1.4 invoice'), { filename: 'invoice.pdf', contentType: 'application/pdf' })
      .attach('file', Buffer.from('a,b\n1,2\n'), { filename: '../../etc/passwd.csv', contentType: 'text/csv' });
    expect(res.status).toBe(201);
    const [pdf, csv] = res.body.data.attachments;
    expect(pdf).toMatchObject({ name: 'invoice.pdf', mimeType: 'application/pdf', size: 16 });
    expect(csv.name).toBe('passwd.csv');
    const download = await request(h.app)
      .get(`/api/v1/media/${pdf.id}`)
      .set(bearer(h.site.key))
      .buffer(true)
      .parse((r, cb) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
    expect(download.status).toBe(200);
    expect((download.body as Buffer).toString()).toBe('%PDF-1.4 invoice');
  });

  test('UTF-8 file names survive multipart upload', async () => {
    const res = await request(h.app)
      .post(url(convId))
      .set(bearer(h.site.key))
      .attach('file', Buffer.from('x'), { filename: 'reçu été 日本.pdf', contentType: 'application/pdf' });
    expect(res.status).toBe(201);
    expect(res.body.data.attachments[0].name).toBe('reçu été 日本.pdf');
  });

  test('a file with empty content is a valid reply', async () => {
    const res = await request(h.app).post(url(convId)).set(bearer(h.site.key)).attach('file', Buffer.from('x'), 'x.txt');
    expect(res.status).toBe(201);
    expect(res.body.data.content).toBe('');
    expect(res.body.data.attachments).toHaveLength(1);
  });

  test('more than 10 files is 413 and nothing is created', async () => {
    const before = (await h.runtime.db('messages').where({ conversation_id: convId })).length;
    let r = request(h.app).post(url(convId)).set(bearer(h.site.key)).field('content', 'many');
    for (let i = 0; i < 11; i++) r = r.attach('file', Buffer.from(`f${i}`), `f${i}.txt`);
    const res = await r;
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
    expect((await h.runtime.db('messages').where({ conversation_id: convId })).length).toBe(before);
  });

  test('a file over MAX_ATTACHMENT_BYTES is 413', async () => {
    const small = await createHarness({ env: { MAX_ATTACHMENT_BYTES: '1024' } });
    try {
      const c = await small.visitorSay(small.site.id, 'v', 'hi');
      const res = await request(small.app).post(url(c.conversation.id)).set(bearer(small.site.key)).attach('file', Buffer.alloc(2048, 1), 'big.bin');
      expect(res.status).toBe(413);
      expect(res.body.error.code).toBe('payload_too_large');
      const ok = await request(small.app).post(url(c.conversation.id)).set(bearer(small.site.key)).attach('file', Buffer.alloc(1024, 1), 'fits.bin');
      expect(ok.status).toBe(201);
    } finally {
      await small.close();
    }
  });

  test('a file under another field name is refused', async () => {
    const res = await request(h.app).post(url(convId)).set(bearer(h.site.key)).field('content', 'x').attach('document', Buffer.from('x'), 'x.txt');
    expect(res.status).toBe(400);
  });

  test('the spool directory is left empty after uploads, failed ones included', async () => {
    const fs = await import('node:fs');
    const path = await import('node:path');
    expect(await leftAfterCleanUp(() => fs.readdirSync(path.join(h.config.dataDir, 'tmp')))).toEqual([]);
  });
});
