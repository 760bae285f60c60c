/**
 * The SDK against the real server (real app, real database, real HTTPS): every operation,
 * pagination across pages, files, media, loop protection, headers the SDK sends.
 */
import { startSdkServer, SdkServer, FAST_RETRY } from './helpers';
import { ChatClient, Conversation, Message, Paginator, VERSION, createClient, isOwnMessage } from '../../sdk/src';

let s: SdkServer;
let chat: ChatClient;

beforeAll(async () => {
  s = await startSdkServer();
  chat = s.client();
});
afterAll(async () => {
  await s?.close();
});

async function newConversation(visitor: string, content = 'Hello'): Promise<string> {
  const { conversation } = await s.h.visitorSay(s.h.site.id, visitor, content);
  return conversation.id;
}

describe('conversations', () => {
  test('get returns the card, typed, with the answer meta attached but not enumerable', async () => {
    const id = await newConversation('v-get');
    const conversation = await chat.conversations.get(id);
    expect(conversation).toMatchObject({ id, state: 'open', visitorId: 'v-get', closedAt: null });
    expect(conversation.lastResponse.status).toBe(200);
    expect(conversation.lastResponse.requestId).toMatch(/^req_/);
    expect(conversation.lastResponse.attempts).toBe(1);
    expect(Object.keys(conversation)).not.toContain('lastResponse');
    expect(JSON.parse(JSON.stringify(conversation))).not.toHaveProperty('lastResponse');
  });

  test('list iterates every conversation across pages, newest first, with no duplicate', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await newConversation(`v-list-${i}`));
    const pager = chat.conversations.list({ limit: 3 });
    expect(pager).toBeInstanceOf(Paginator);
    const before = s.exchanges.length;
    const seen: Conversation[] = [];
    for await (const c of pager) seen.push(c);
    const pagesFetched = s.exchanges.length - before;
    const all = seen.map((c) => c.id);
    expect(new Set(all).size).toBe(all.length);
    for (const id of ids) expect(all).toContain(id);
    expect(pagesFetched).toBe(Math.ceil(all.length / 3));
    const created = seen.map((c) => c.createdAt);
    expect([...created].sort().reverse()).toEqual(created);
  });

  test('pages() yields each page with its cursor; firstPage() fetches only one', async () => {
    const pages = [];
    for await (const page of chat.conversations.list({ limit: 2 }).pages()) pages.push(page);
    expect(pages.length).toBeGreaterThan(2);
    for (const page of pages.slice(0, -1)) {
      expect(page.hasMore).toBe(true);
      expect(typeof page.nextCursor).toBe('string');
      expect(page.data).toHaveLength(2);
      expect(page.requestId).toMatch(/^req_/);
    }
    expect(pages[pages.length - 1].hasMore).toBe(false);
    expect(pages[pages.length - 1].nextCursor).toBeNull();

    const before = s.exchanges.length;
    const first = await chat.conversations.list({ limit: 2 }).firstPage();
    expect(s.exchanges.length - before).toBe(1);
    expect(first.data).toHaveLength(2);
    // Resuming from a cursor continues where the page ended.
    const rest = await chat.conversations.list({ limit: 2, cursor: first.nextCursor! }).toArray();
    const all = await chat.conversations.list({ limit: 100 }).toArray();
    expect([...first.data, ...rest].map((c) => c.id)).toEqual(all.map((c) => c.id));
  });

  test('toArray({max}) stops early without fetching further pages', async () => {
    const before = s.exchanges.length;
    const three = await chat.conversations.list({ limit: 2 }).toArray({ max: 3 });
    expect(three).toHaveLength(3);
    expect(s.exchanges.length - before).toBe(2);
  });

  test('filters: state, and time filters given as Date or ISO string', async () => {
    const closedId = await newConversation('v-filter-closed');
    await chat.conversations.close(closedId);
    const closed = await chat.conversations.list({ state: 'closed' }).toArray();
    expect(closed.map((c) => c.id)).toContain(closedId);
    expect(closed.every((c) => c.state === 'closed')).toBe(true);
    const open = await chat.conversations.list({ state: 'open' }).toArray();
    expect(open.map((c) => c.id)).not.toContain(closedId);

    const card = await chat.conversations.get(closedId);
    const at = new Date(card.createdAt);
    const fromDate = await chat.conversations.list({ createdAfter: at }).toArray();
    const fromString = await chat.conversations.list({ createdAfter: card.createdAt }).toArray();
    expect(fromDate.map((c) => c.id)).toEqual(fromString.map((c) => c.id));
    expect(fromDate.map((c) => c.id)).toContain(closedId);
    expect(fromDate.every((c) => c.createdAt >= card.createdAt)).toBe(true);
    const before = await chat.conversations.list({ createdBefore: at }).toArray();
    expect(before.map((c) => c.id)).not.toContain(closedId);
    const updated = await chat.conversations
      .list({ updatedAfter: new Date(card.updatedAt), updatedBefore: new Date(Date.parse(card.updatedAt) + 1) })
      .toArray();
    expect(updated.map((c) => c.id)).toContain(closedId);
  });

  test('close closes once and is idempotent', async () => {
    const id = await newConversation('v-close');
    const closed = await chat.conversations.close(id);
    expect(closed).toMatchObject({ id, state: 'closed' });
    expect(closed.closedAt).not.toBeNull();
    const again = await chat.conversations.close(id);
    expect(again).toEqual(closed);
  });
});

describe('messages', () => {
  test('list follows the cursor oldest first, and newest first with order desc', async () => {
    const id = await newConversation('v-messages', 'm0');
    for (let i = 1; i < 8; i++) await s.h.visitorSay(s.h.site.id, 'v-messages', `m${i}`);
    const asc: Message[] = [];
    for await (const m of chat.messages.list(id, { limit: 3 })) asc.push(m);
    expect(asc.map((m) => m.content)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7']);
    const desc = await chat.messages.list(id, { order: 'desc', limit: 5 }).toArray();
    expect(desc.map((m) => m.content)).toEqual(['m7', 'm6', 'm5', 'm4', 'm3', 'm2', 'm1', 'm0']);
    expect(asc.every((m) => m.direction === 'incoming' && m.origin === 'widget' && m.apiKeyId === null)).toBe(true);
  });

  test('reply (JSON, plain and markdown) appears in the history with origin api and this key', async () => {
    const id = await newConversation('v-reply');
    const reply = await chat.messages.create(id, { content: 'Hi there' });
    expect(reply).toMatchObject({
      conversationId: id,
      direction: 'outgoing',
      origin: 'api',
      apiKeyId: s.h.site.keyId,
      content: 'Hi there',
      format: 'plain',
      attachments: [],
    });
    expect(reply.lastResponse.status).toBe(201);
    expect(reply.lastResponse.idempotentReplayed).toBe(false);
    const md = await chat.messages.create(id, { content: 'Order **#1042** shipped', format: 'markdown' });
    expect(md.format).toBe('markdown');
    const history = await chat.messages.list(id).toArray();
    expect(history.map((m) => m.id)).toEqual(expect.arrayContaining([reply.id, md.id]));
  });

  test('a reply with files uploads them (multipart) and media.download returns the bytes and type', async () => {
    const id = await newConversation('v-files');
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]);
    const text = 'a,b\n1,2\n';
    const message = await chat.messages.create(id, {
      content: 'Two files',
      format: 'plain',
      files: [{ data: png, name: 'pixel.png', type: 'image/png' }, new File([text], 'table.csv', { type: 'text/csv' })],
    });
    expect(message.content).toBe('Two files');
    expect(message.attachments).toHaveLength(2);
    const [a, b] = message.attachments;
    expect(a).toMatchObject({ name: 'pixel.png', mimeType: 'image/png', size: png.byteLength });
    expect(b).toMatchObject({ name: 'table.csv', mimeType: 'text/csv', size: Buffer.byteLength(text) });

    const file = await chat.media.download(a.id);
    expect(Buffer.from(file.data).equals(Buffer.from(png))).toBe(true);
    expect(file.contentType).toBe('image/png');
    expect(file.size).toBe(png.byteLength);
    expect(file.filename).toBe('pixel.png');
    expect(file.etag).toMatch(/^"[0-9a-f]{64}"$/);
    const csv = await chat.media.download(b); // an Attachment works as well as its id
    expect(new TextDecoder().decode(csv.data)).toBe(text);
    expect(csv.contentType).toMatch(/^text\/csv/);
    expect(csv.filename).toBe('table.csv');
  });

  // fetch/undici and browsers send multipart file names as raw UTF-8 (RFC 7578); the server must
  // not read them as latin1 (busboy does by default; server/http/bodies.ts decodes them).
  test('a non-ASCII file name survives the upload', async () => {
    const id = await newConversation('v-utf8-name');
    const message = await chat.messages.create(id, { files: [{ data: new Uint8Array([1]), name: 'reçu é.pdf', type: 'application/pdf' }] });
    expect(message.attachments[0].name).toBe('reçu é.pdf');
  });

  test('a file-only reply may have empty content; a Blob without a name is sent as "file"', async () => {
    const id = await newConversation('v-file-only');
    const message = await chat.messages.create(id, { files: [new Blob(['just bytes'], { type: 'application/octet-stream' })] });
    expect(message.content).toBe('');
    expect(message.attachments[0]).toMatchObject({ name: 'file', size: 10 });
  });

  test('media.download of a visitor attachment; the signed link in the message opens it without a key', async () => {
    const { conversation, message } = await s.h.runtime.services.window.chat.visitorSay(s.h.site.id, 'v-media', 'see file', {
      files: [{ buffer: Buffer.from('visitor bytes'), originalName: 'note.txt', mimeType: 'text/plain' }],
    });
    const listed = await chat.messages.list(conversation.id).toArray();
    const attachment = listed.find((m) => m.id === message.id)!.attachments[0];
    const file = await chat.media.download(attachment.id);
    expect(new TextDecoder().decode(file.data)).toBe('visitor bytes');
    expect(file.contentType).toMatch(/^text\/plain/);
    // The link names PUBLIC_URL; point it at this test server's port.
    const link = new URL(attachment.url);
    const res = await s.fetch(`${s.origin}${link.pathname}${link.search}`, {});
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('visitor bytes');
  });
});

describe('loop protection', () => {
  test('the client learns its key id from its first reply; isOwnMessage is then exact', async () => {
    const fresh = s.client();
    expect(fresh.keyId).toBeNull();
    const visitor = { origin: 'widget' as const, apiKeyId: null };
    const other = await s.h.newKey(s.h.site.id, ['conversations:read', 'conversations:write']);
    const id = await newConversation('v-own');
    const otherReply = await s.client({ apiKey: other.key }).messages.create(id, { content: 'from another integration' });
    // Unknown key id: every API message counts as own (skipping is safe, answering is a loop).
    expect(fresh.isOwnMessage(visitor)).toBe(false);
    expect(fresh.isOwnMessage(otherReply)).toBe(true);
    const mine = await fresh.messages.create(id, { content: 'mine' });
    expect(fresh.keyId).toBe(s.h.site.keyId);
    expect(fresh.isOwnMessage(mine)).toBe(true);
    expect(fresh.isOwnMessage(otherReply)).toBe(false);
    expect(fresh.isOwnMessage(visitor)).toBe(false);
    const agent = await s.h.runtime.services.window.chat.agentSay(id, 'agent from messenger');
    expect(fresh.isOwnMessage(agent.message)).toBe(false);
  });

  test('with the keyId option it is exact from the start; the standalone function needs no client', async () => {
    const configured = s.client({ keyId: s.h.site.keyId });
    expect(configured.keyId).toBe(s.h.site.keyId);
    expect(configured.isOwnMessage({ origin: 'api', apiKeyId: s.h.site.keyId })).toBe(true);
    expect(configured.isOwnMessage({ origin: 'api', apiKeyId: 'key_00000000000000000000000000' })).toBe(false);
    expect(isOwnMessage({ origin: 'api', apiKeyId: s.h.site.keyId }, s.h.site.keyId)).toBe(true);
    expect(isOwnMessage({ origin: 'messenger', apiKeyId: null }, [s.h.site.keyId])).toBe(false);
    expect(() => s.client({ keyId: s.h.site.key })).toThrow(/not the secret key/);
  });
});

describe('what the SDK sends', () => {
  test('Authorization, a User-Agent with SDK and runtime version, an Idempotency-Key on replies only', async () => {
    const id = await newConversation('v-headers');
    const before = s.exchanges.length;
    await s.client({ appInfo: 'my-crm/2.1' }).conversations.get(id);
    await chat.messages.create(id, { content: 'x' });
    const [get, post] = s.exchanges.slice(before);
    expect(get.headers.authorization).toBe(`Bearer ${s.h.site.key}`);
    expect(get.headers['user-agent']).toBe(`my-crm/2.1 chat-service-sdk-js/${VERSION} node/${process.versions.node} (${process.platform}; ${process.arch})`);
    expect(get.headers['idempotency-key']).toBeUndefined();
    expect(post.headers['user-agent']).toMatch(new RegExp(`^chat-service-sdk-js/${VERSION.replace(/\./g, '\\.')} node/`));
    expect(post.headers['idempotency-key']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(post.headers['content-type']).toBe('application/json');
  });

  test('a caller-given Idempotency-Key is used, and a repeat with it answers the first reply', async () => {
    const id = await newConversation('v-own-key');
    const first = await chat.messages.create(id, { content: 'once' }, { idempotencyKey: 'order-1042-confirmation' });
    const repeat = await chat.messages.create(id, { content: 'once' }, { idempotencyKey: 'order-1042-confirmation' });
    expect(repeat.id).toBe(first.id);
    expect(repeat.lastResponse.idempotentReplayed).toBe(true);
    const history = await chat.messages.list(id).toArray();
    expect(history.filter((m) => m.content === 'once')).toHaveLength(1);
  });

  test('the raw typed openapi-fetch client is available and carries auth', async () => {
    const id = await newConversation('v-raw');
    const { data, error, response } = await chat.api.GET('/conversations/{id}', { params: { path: { id } } });
    expect(error).toBeUndefined();
    expect(response.status).toBe(200);
    expect(data!.data.id).toBe(id);
    const missing = await chat.api.GET('/conversations/{id}', { params: { path: { id: 'conv_00000000000000000000000000' } } });
    expect(missing.data).toBeUndefined();
    expect(missing.error).toMatchObject({ error: { code: 'not_found' } });
  });

  test('a reply through the raw client gets an Idempotency-Key too, kept across its retries', async () => {
    const id = await newConversation('v-raw-reply');
    const before = s.exchanges.length;
    const { data, response } = await chat.api.POST('/conversations/{id}/messages', { params: { path: { id } }, body: { content: 'raw' } });
    expect(response.status).toBe(201);
    expect(data!.data.content).toBe('raw');
    expect(s.exchanges[before].headers['idempotency-key']).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('the published schemas endpoint matches the schemas shipped in the package', async () => {
    const { data } = await chat.api.GET('/schemas/{schemaName}', { params: { path: { schemaName: 'message.created.json' } } });
    expect(data).toEqual(require('../../sdk/schemas/message.created.json'));
  });
});

describe('one call path, one name per operation', () => {
  test('the deprecated names call the one name of their operation with the same arguments', async () => {
    const client = s.client();
    const create = jest.spyOn(client.messages, 'create');
    const close = jest.spyOn(client.conversations, 'close');
    const download = jest.spyOn(client.media, 'download');
    const id = await newConversation('v-deprecated');
    const options = { idempotencyKey: 'deprecated-name-reply' };
    const message = await client.reply(id, { content: 'old name', files: [{ data: new Uint8Array([7]), name: 'old.bin' }] }, options);
    expect(create).toHaveBeenCalledTimes(1);
    expect(create).toHaveBeenCalledWith(id, { content: 'old name', files: [{ data: new Uint8Array([7]), name: 'old.bin' }] }, options);
    expect(await create.mock.results[0].value).toBe(message);
    const file = await client.downloadMedia(message.attachments[0]);
    expect(download).toHaveBeenCalledWith(message.attachments[0], undefined);
    expect(Array.from(file.data)).toEqual([7]);
    const closed = await client.close(id);
    expect(close).toHaveBeenCalledWith(id, undefined);
    expect(closed.state).toBe('closed');
  });

  test('every operation, page, media download and raw call is sent, retried and measured by the one call path', async () => {
    const id = await newConversation('v-one-path', 'first');
    await s.h.visitorSay(s.h.site.id, 'v-one-path', 'second');
    // Every first attempt of a call drops before it reaches the server; the calls run one after another.
    let fetches = 0;
    const client = createClient({
      apiKey: s.h.site.key,
      baseUrl: s.baseUrl,
      retry: FAST_RETRY,
      fetch: async (url, init) => {
        if (fetches++ % 2 === 0) throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
        return s.fetch(url, init);
      },
    });
    const request = jest.spyOn(client as unknown as { request: (...args: unknown[]) => Promise<unknown> }, 'request');

    const got = await client.conversations.get(id);
    const listed = await client.conversations.list({ limit: 1 }).firstPage();
    const contents: string[] = [];
    let pages = 0;
    for await (const page of client.messages.list(id, { limit: 1 }).pages()) {
      pages++;
      contents.push(...page.data.map((m) => m.content));
    }
    const reply = await client.messages.create(id, { content: 'through the one path', files: [{ data: new Uint8Array([1, 2, 3]), name: 'one.bin' }] });
    const file = await client.media.download(reply.attachments[0]);
    const closed = await client.conversations.close(id);
    const raw = await client.api.GET('/conversations/{id}', { params: { path: { id } } });

    for (const answer of [got, reply, closed]) expect(answer.lastResponse.attempts).toBe(2);
    expect(listed.data).toHaveLength(1);
    expect(contents).toEqual(['first', 'second']);
    expect(Array.from(file.data)).toEqual([1, 2, 3]);
    expect(raw.response.status).toBe(200);
    expect(raw.data!.data.state).toBe('closed');
    // get, list, each page, create, download, close, raw: one call of `request` each, two attempts each.
    expect(pages).toBeGreaterThanOrEqual(2);
    expect(request).toHaveBeenCalledTimes(6 + pages);
    expect(fetches).toBe(2 * (6 + pages));
  });
});

describe('client options', () => {
  test('refuses a key without the wck_ prefix, a plaintext URL, and bad numbers', () => {
    expect(() => s.client({ apiKey: 'sk_live_x' })).toThrow(TypeError);
    expect(() => s.client({ baseUrl: 'http://chat.example.com/api/v1' })).toThrow(/https/);
    expect(() => s.client({ baseUrl: 'not a url' })).toThrow(/absolute URL/);
    expect(() => s.client({ timeoutMs: -1 })).toThrow(/timeoutMs/);
  });

  test('a base URL without a path gets /api/v1', async () => {
    const client = s.client({ baseUrl: s.origin });
    expect(client.baseUrl).toBe(`${s.origin}/api/v1`);
    const page = await client.conversations.list({ limit: 1 }).firstPage();
    expect(page.data).toHaveLength(1);
  });
});
