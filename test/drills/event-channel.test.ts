/**
 * Two instances (two runtimes) on one database and one Redis: a write in one reaches a live stream
 * and a delivery worker of the other through the event channel, without waiting for a poll. Then
 * Redis dies: writes still succeed at once and the streams get the events from the fallback poll;
 * when Redis returns the channel carries them again. Runs against a private redis-server on its own
 * port, never the shared one.
 */
import request from 'supertest';
import pino from 'pino';
import { createHarness, Harness, bearer, listenHttps } from '../helpers/harness';
import { openRuntime, Runtime } from '../../server/runtime';
import { deliveryWorkerFor } from '../../server/services';
import type { DeliveryWorker } from '../../server/webhooks/worker';
import { freePort } from '../helpers/spawn';
import { waitFor } from '../helpers/wait';
import { PrivateRedis, startPrivateRedis, stopPrivateRedis } from '../helpers/redis';
import { deliveryEnv, Receiver, startReceiver, webhooks } from '../webhooks/helpers';
import { allowOrigins, ARRIVAL_MS, auth, getToken, messageContent, openSse, SseStream, w } from '../window/helpers';

const PASSWORD = 'channel-redis-pw-41c7e2';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let port: number;
let redis: PrivateRedis | undefined;
let receiver: Receiver;
let h: Harness;
let other: Runtime;
let server: { url: string; ca: string; close(): Promise<void> };
let worker: DeliveryWorker | undefined;
const streams: SseStream[] = [];
/** The hub's reads of events other processes wrote (the poll's second and third steps). */
const pollReads = { recentEvents: 0, visitorsOfEvents: 0 };

beforeAll(async () => {
  port = await freePort();
  redis = await startPrivateRedis(port, PASSWORD);
  receiver = await startReceiver();
  h = await createHarness({ env: { REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:${port}`, ...deliveryEnv(receiver) } });
  other = await openRuntime(h.config);
  await allowOrigins(h, h.site.id);
  server = await listenHttps(h.app);
  const events = h.runtime.services.stores.events;
  for (const name of ['recentEvents', 'visitorsOfEvents'] as const) {
    const real = events[name] as (...args: unknown[]) => Promise<unknown>;
    (events as Record<string, unknown>)[name] = (...args: unknown[]) => {
      pollReads[name]++;
      return real(...args);
    };
  }
  await waitFor('both instances to hear Redis', () => h.runtime.services.channel.live() && other.services.channel.live());
});
afterAll(async () => {
  for (const s of streams) s.close();
  await worker?.stop();
  await server?.close();
  await other?.close();
  await h?.close();
  await receiver?.close();
  await stopPrivateRedis(redis);
});

/** A visitor with a conversation and an open stream on the first instance. */
async function streamingVisitor() {
  const t = await getToken(h.app, h.site.id);
  const first = await request(h.app)
    .post(w(h.site.id, '/messages'))
    .set(auth(t.token))
    .send({ content: 'hello', clientMessageId: `c-${Math.random().toString(36).slice(2)}` });
  expect(first.status).toBe(201);
  const s = await openSse(server, w(h.site.id, '/events'), { Authorization: `Bearer ${t.token}` });
  streams.push(s);
  await s.waitFor((e) => e.event === 'ready');
  return { stream: s, convId: first.body.data.conversation.id as string };
}

const replyFromOther = (convId: string, content: string) =>
  other.services.messages.reply(h.site.id, convId, { direction: 'outgoing', origin: 'messenger', apiKeyId: null, content, format: 'plain', files: [] });

test('a reply written by the other instance reaches an open stream through Redis, reading no event', async () => {
  const looked = pollReads.recentEvents;
  const { stream, convId } = await streamingVisitor();
  await waitFor("the hub's first look at the site", () => pollReads.recentEvents > looked);
  const before = { ...pollReads };
  const timings: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = Date.now();
    await replyFromOther(convId, `across ${i}`);
    await stream.waitFor((e) => messageContent(e) === `across ${i}`, ARRIVAL_MS);
    timings.push(Date.now() - started);
  }
  process.stdout.write(`stream on instance A, reply written by instance B, through Redis (ms): ${timings.join(', ')}\n`);
  // The channel named each event's visitor: the hub read no event to route them (a poll would have),
  // and no heartbeat came first.
  expect(pollReads).toEqual(before);
  expect(stream.pings).toBe(0);
});

test("a reply written by the other instance wakes this instance's delivery worker, whose own poll is a minute", async () => {
  const endpoint = await webhooks(h).setEndpoint(h.site.id, receiver.url('/across'), 'message.created');
  expect(endpoint.url).toBe(receiver.url('/across'));
  worker = deliveryWorkerFor(h.runtime.services, pino({ level: 'silent' }), { pollMs: 60_000 });
  worker.start();
  const { convId } = await streamingVisitor();
  await waitFor('the first message delivered', () => receiver.at('/across').length === 1);
  await sleep(300); // the worker has gone back to its minute-long wait
  const timings: number[] = [];
  for (let i = 0; i < 3; i++) {
    const started = Date.now();
    await replyFromOther(convId, `deliver ${i}`);
    // Within a liveness bound far under the worker's own one-minute poll: only the wake-up can bring it.
    await waitFor('the delivery', () => receiver.at('/across').length === 2 + i, ARRIVAL_MS);
    timings.push(Date.now() - started);
  }
  process.stdout.write(`delivery by instance A's worker of a reply written by instance B (ms): ${timings.join(', ')}\n`);
  await worker.stop();
  worker = undefined;
});

test('Redis dies: writes succeed at once and streams get the events from the fallback poll; back again, the channel carries them', async () => {
  const { stream, convId } = await streamingVisitor();
  await stopPrivateRedis(redis);
  await waitFor('both instances to notice', () => !h.runtime.services.channel.live() && !other.services.channel.live());

  const started = Date.now();
  const routedBefore = pollReads.visitorsOfEvents;
  await replyFromOther(convId, 'while Redis is dead');
  const written = Date.now() - started;
  // Waited for before this instance writes: its own in-process notice would also read the feed and
  // bring the other's message along, and then the poll would not be what is proven here.
  await stream.waitFor((e) => messageContent(e) === 'while Redis is dead', ARRIVAL_MS); // the poll: every 500 ms
  process.stdout.write(`write with Redis dead: ${written} ms; arrived through the poll after ${Date.now() - started} ms\n`);
  expect(pollReads.visitorsOfEvents).toBeGreaterThan(routedBefore); // the poll routed it (the channel could not)
  const api = await request(h.app).post(`/api/v1/conversations/${convId}/messages`).set(bearer(h.site.key)).send({ content: 'and from here' });
  expect(api.status).toBe(201);
  await stream.waitFor((e) => messageContent(e) === 'and from here', ARRIVAL_MS); // in process: the channel still
  // Liveness: the write did not wait for Redis (its connect time-out is 2 s, a command's 0.3 s).
  expect(written).toBeLessThan(5000);

  redis = await startPrivateRedis(port, PASSWORD);
  await waitFor('both instances to hear Redis again', () => h.runtime.services.channel.live() && other.services.channel.live(), 20_000);
  // Until a reply arrives that neither the hub's poll read to route nor a heartbeat re-read: the channel carried it.
  await waitFor("the other instance's publisher to be ready again", async () => {
    const [routed, beats] = [pollReads.visitorsOfEvents, stream.pings];
    const content = `after the return ${Date.now()}`;
    await replyFromOther(convId, content);
    await stream.waitFor((e) => messageContent(e) === content, ARRIVAL_MS);
    return pollReads.visitorsOfEvents === routed && stream.pings === beats;
  });
});
