/**
 * Retries against the real server: 429 honouring Retry-After, 5xx during a database outage, and
 * the idempotent reply under a retry after a dropped connection (exactly one message exists).
 */
import { startSdkServer, SdkServer } from './helpers';
import { FetchLike, InternalServerError, RateLimitError, createClient } from '../../sdk/src';
import { createMemoryLimiter } from '../../server/http/rate-limit/limiter';

describe('429 rate_limit_exceeded', () => {
  // The server's own sliding-window limiter (2 requests a minute) on a clock only the test moves:
  // after moving it 58.5 s on, the next request is refused with Retry-After: 2, and the window frees
  // when the refusal reaches the client (the clock moves by what it asked for), however long the
  // request took: a slow machine cannot turn the refusal into a success.
  let s: SdkServer;
  let now = Date.now();
  beforeAll(async () => {
    s = await startSdkServer({ limiter: createMemoryLimiter(2, () => now) });
    s.onAnswer = (e) => {
      if (e.status === 429) now += Number(e.retryAfter) * 1000;
    };
  });
  afterAll(async () => {
    await s?.close();
  });

  /** Spends a fresh window's two requests, then moves the clock on so that it frees `freesInMs` later. */
  async function exhaustWindow(client = s.client(), freesInMs = 1500) {
    now += 120_000; // a fresh window
    await client.conversations.list().firstPage();
    await client.conversations.list().firstPage();
    now += 60_000 - freesInMs;
  }

  test('is retried after the Retry-After the service asked for, not the shorter back-off', async () => {
    const client = s.client({ maxRetries: 2 });
    await exhaustWindow(client);
    const before = s.exchanges.length;
    const started = Date.now();
    const page = await client.conversations.list().firstPage();
    const elapsed = Date.now() - started;
    const sent = s.exchanges.slice(before);
    expect(sent.map((e) => e.status)).toEqual([429, 200]);
    expect(page.data).toEqual([]);
    // Retry-After is 2 s; the test's back-off (FAST_RETRY) would have retried within 100 ms. A lower
    // bound, which load only helps; the upper one is liveness: it did not wait for something else.
    const retryAfterMs = Number(sent[0].retryAfter) * 1000;
    expect(retryAfterMs).toBe(2000);
    expect(elapsed).toBeGreaterThanOrEqual(retryAfterMs - 100);
    expect(elapsed).toBeLessThan(10_000);
  });

  test('a reply is retried after 429 with the same Idempotency-Key and created once', async () => {
    const id = (await s.h.visitorSay(s.h.site.id, 'v-429', 'hi')).conversation.id;
    const client = s.client();
    await exhaustWindow(client);
    const before = s.exchanges.length;
    const message = await client.messages.create(id, { content: 'after the wait' });
    const sent = s.exchanges.slice(before);
    expect(sent.map((e) => e.status)).toEqual([429, 201]);
    expect(sent[0].headers['idempotency-key']).toBe(sent[1].headers['idempotency-key']);
    expect(message.lastResponse.attempts).toBe(2);
    now += 120_000;
    const contents = (await client.messages.list(id).toArray()).map((m) => m.content);
    expect(contents.filter((c) => c === 'after the wait')).toHaveLength(1);
  });

  test('RateLimitError when retries are off, or when Retry-After is longer than the client will wait', async () => {
    const noRetry = s.client({ maxRetries: 0 });
    await exhaustWindow(noRetry);
    const err = await noRetry.conversations
      .list()
      .firstPage()
      .catch((e) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err.status).toBe(429);
    expect(err.code).toBe('rate_limit_exceeded');
    expect(err.retryAfterSeconds).toBe(2);
    expect(err.attempts).toBe(1);
    expect(err.headers.get('x-ratelimit-limit')).toBe('2');

    // Retry-After: 30 this time, so that a client that waited it before giving up could not hide.
    await exhaustWindow(noRetry, 30_000);
    const impatient = s.client({ maxRetries: 3, retry: { maxRetryAfterMs: 1000 } });
    const before = s.exchanges.length;
    const started = Date.now();
    const err2 = await impatient.conversations
      .list()
      .firstPage()
      .catch((e) => e);
    expect(err2).toBeInstanceOf(RateLimitError);
    expect(err2.retryAfterSeconds).toBeGreaterThan(15);
    expect(s.exchanges.length - before).toBe(1);
    expect(Date.now() - started).toBeLessThan(15_000); // liveness: well short of the 30 s asked for
  });
});

describe('5xx service_unavailable during a database outage', () => {
  let s: SdkServer;
  beforeAll(async () => {
    s = await startSdkServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  test('is retried (after the Retry-After: 5 it carries) and succeeds when the database is back', async () => {
    const id = (await s.h.visitorSay(s.h.site.id, 'v-503', 'hi')).conversation.id;
    await s.h.runtime.db.destroy();
    let restored = false;
    const client = s.client({ maxRetries: 2 });
    const pending = client.conversations.get(id);
    // As soon as the first attempt has been refused, bring the database back.
    const check = setInterval(() => {
      if (!restored && s.exchanges.some((e) => e.status === 503)) {
        restored = true;
        s.h.runtime.db.initialize();
      }
    }, 10);
    try {
      const conversation = await pending;
      expect(conversation.id).toBe(id);
      expect(conversation.lastResponse.attempts).toBe(2);
    } finally {
      clearInterval(check);
    }
    expect(s.exchanges.slice(-2).map((e) => e.status)).toEqual([503, 200]);
  }, 30_000);

  test('InternalServerError with the code once the retries are used up', async () => {
    await s.h.runtime.db.destroy();
    try {
      const err = await s
        .client({ maxRetries: 1 })
        .conversations.list()
        .firstPage()
        .catch((e) => e);
      expect(err).toBeInstanceOf(InternalServerError);
      expect(err.status).toBe(503);
      expect(err.code).toBe('service_unavailable');
      expect(err.attempts).toBe(2);
    } finally {
      s.h.runtime.db.initialize();
    }
  }, 30_000);
});

describe('idempotent reply under a retry after a dropped connection', () => {
  let s: SdkServer;
  beforeAll(async () => {
    s = await startSdkServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  /**
   * A fetch whose first POST reaches the server and is fully answered, after which the
   * connection "drops": the caller sees a network error, never the answer, exactly as when a
   * connection resets between the server's commit and the client's read.
   */
  function droppingFetch(sent: { headers: Record<string, string>; status: number }[]): FetchLike {
    let dropped = false;
    return async (url, init) => {
      const res = await s.fetch(url, init);
      if (init.method === 'POST') {
        sent.push({ headers: init.headers as Record<string, string>, status: res.status });
        if (!dropped) {
          dropped = true;
          await res.arrayBuffer();
          throw new TypeError('fetch failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) });
        }
      }
      return res;
    };
  }

  test('JSON reply: the retry carries the same key, the service replays, one message exists', async () => {
    const id = (await s.h.visitorSay(s.h.site.id, 'v-drop', 'hi')).conversation.id;
    const sent: { headers: Record<string, string>; status: number }[] = [];
    const client = createClient({ apiKey: s.h.site.key, baseUrl: s.baseUrl, fetch: droppingFetch(sent), retry: { initialRetryDelayMs: 10 } });
    const message = await client.messages.create(id, { content: 'exactly once' });
    expect(sent).toHaveLength(2);
    expect(sent.map((x) => x.status)).toEqual([201, 201]);
    expect(sent[0].headers['idempotency-key']).toBeTruthy();
    expect(sent[1].headers['idempotency-key']).toBe(sent[0].headers['idempotency-key']);
    expect(message.lastResponse.attempts).toBe(2);
    expect(message.lastResponse.idempotentReplayed).toBe(true);
    const history = await s.client().messages.list(id).toArray();
    const copies = history.filter((m) => m.content === 'exactly once');
    expect(copies).toHaveLength(1);
    expect(copies[0].id).toBe(message.id);
  });

  test('multipart reply with files: the same bytes are resent, so it replays instead of 422', async () => {
    const id = (await s.h.visitorSay(s.h.site.id, 'v-drop-files', 'hi')).conversation.id;
    const sent: { headers: Record<string, string>; status: number }[] = [];
    const client = createClient({ apiKey: s.h.site.key, baseUrl: s.baseUrl, fetch: droppingFetch(sent), retry: { initialRetryDelayMs: 10 } });
    const message = await client.messages.create(id, {
      content: 'with a file',
      files: [{ data: new TextEncoder().encode('%PDF-1.4 test'), name: 'invoice.pdf', type: 'application/pdf' }],
    });
    expect(sent.map((x) => x.status)).toEqual([201, 201]);
    expect(sent[1].headers['content-type']).toBe(sent[0].headers['content-type']); // same multipart boundary
    expect(message.lastResponse.idempotentReplayed).toBe(true);
    expect(message.attachments).toHaveLength(1);
    const history = await s.client().messages.list(id).toArray();
    expect(history.filter((m) => m.content === 'with a file')).toHaveLength(1);
    const rows = await s.h.runtime.db('attachments').where({ message_id: message.id });
    expect(rows).toHaveLength(1);
  });

  test('a reply through the raw api client: its key, generated or given, is the same on the retry; one message exists', async () => {
    const id = (await s.h.visitorSay(s.h.site.id, 'v-drop-raw', 'hi')).conversation.id;
    const sent: { headers: Record<string, string>; status: number }[] = [];
    const client = createClient({ apiKey: s.h.site.key, baseUrl: s.baseUrl, fetch: droppingFetch(sent), retry: { initialRetryDelayMs: 10 } });
    const { data, response } = await client.api.POST('/conversations/{id}/messages', { params: { path: { id } }, body: { content: 'raw once' } });
    expect(response.status).toBe(201);
    expect(response.headers.get('idempotent-replayed')).toBe('true');
    expect(sent.map((x) => x.status)).toEqual([201, 201]);
    expect(sent[0].headers['idempotency-key']).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[1].headers['idempotency-key']).toBe(sent[0].headers['idempotency-key']);
    const history = await s.client().messages.list(id).toArray();
    expect(history.filter((m) => m.content === 'raw once').map((m) => m.id)).toEqual([data!.data.id]);

    const own = await client.api.POST('/conversations/{id}/messages', {
      params: { path: { id }, header: { 'Idempotency-Key': 'raw-own-key' } },
      body: { content: 'raw own key' },
    });
    expect(own.response.status).toBe(201);
    expect(sent.slice(2).map((x) => x.headers['idempotency-key'])).toEqual(['raw-own-key']);
  });

  test('without retries the drop surfaces as ApiConnectionError, and a manual repeat with the same key is safe', async () => {
    const id = (await s.h.visitorSay(s.h.site.id, 'v-drop-manual', 'hi')).conversation.id;
    const sent: { headers: Record<string, string>; status: number }[] = [];
    const client = createClient({ apiKey: s.h.site.key, baseUrl: s.baseUrl, fetch: droppingFetch(sent), maxRetries: 0 });
    const err = await client.messages.create(id, { content: 'manual' }, { idempotencyKey: 'ticket-77-answer' }).catch((e) => e);
    expect(err.name).toBe('ApiConnectionError');
    expect(err.message).toMatch(/ECONNRESET/);
    const again = await client.messages.create(id, { content: 'manual' }, { idempotencyKey: 'ticket-77-answer' });
    expect(again.lastResponse.idempotentReplayed).toBe(true);
    expect((await s.client().messages.list(id).toArray()).filter((m) => m.content === 'manual')).toHaveLength(1);
  });

  test('concurrent repeats under one key all resolve to the one message (409 idempotency_key_in_use is retried)', async () => {
    const id = (await s.h.visitorSay(s.h.site.id, 'v-concurrent', 'hi')).conversation.id;
    const client = s.client({ maxRetries: 5 });
    const before = s.exchanges.length;
    const results = await Promise.all(
      Array.from({ length: 12 }, () => client.messages.create(id, { content: 'one of many' }, { idempotencyKey: 'concurrent-key' })),
    );
    expect(new Set(results.map((m) => m.id)).size).toBe(1);
    expect(results.filter((m) => !m.lastResponse.idempotentReplayed)).toHaveLength(1);
    const statuses = s.exchanges.slice(before).map((e) => e.status);
    // Whatever interleaving happened (SQLite tends to serialise them, MariaDB answers several
    // 409 idempotency_key_in_use), nothing but 201 and retried 409s went over the wire.
    expect(statuses.every((x) => x === 201 || x === 409)).toBe(true);
    expect(statuses.filter((x) => x === 201)).toHaveLength(12);
    expect((await s.client().messages.list(id).toArray()).filter((m) => m.content === 'one of many')).toHaveLength(1);
  });

  test('a GET whose connection drops is retried transparently', async () => {
    let drops = 1;
    const client = createClient({
      apiKey: s.h.site.key,
      baseUrl: s.baseUrl,
      retry: { initialRetryDelayMs: 10 },
      fetch: async (url, init) => {
        if (drops-- > 0) throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
        return s.fetch(url, init);
      },
    });
    const page = await client.conversations.list().firstPage();
    expect(page.data.length).toBeGreaterThan(0);
  });
});
