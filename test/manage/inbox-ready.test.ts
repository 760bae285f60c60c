/**
 * The inbox stream's `ready` event tells a resuming client what it needs to treat the catch-up
 * apart (the feed's `tail` when it resumed) and whether the resume is exact (`gap`: feed rows past
 * Last-Event-ID were purged), so the dashboard marks the backlog as replayed and reloads its lists
 * after a gap instead of trusting the events.
 */
import type { Harness } from '../helpers/harness';
import { listenHttps } from '../helpers/harness';
import { openSse, SseStream } from '../window/helpers';
import { M, manageHarness, newMember, signIn } from './helpers';

let h: Harness;
let server: { url: string; ca: string; close(): Promise<void> };
let cookie: string;
const streams: SseStream[] = [];

beforeAll(async () => {
  h = await manageHarness();
  await newMember(h, h.site.id, 'owner@example.com', 'owner');
  cookie = (await signIn(h, 'owner@example.com')).cookie;
  server = await listenHttps(h.app);
}, 60_000);
afterEach(() => {
  for (const s of streams.splice(0)) s.close();
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

async function ready(lastEventId?: string) {
  const s = await openSse(server, `${M}/sites/${h.site.id}/inbox/events`, { Cookie: cookie, ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}) });
  streams.push(s);
  return s.waitFor((e) => e.event === 'ready');
}

test('ready carries the tail and no gap; a resume names the tail it catches up to', async () => {
  const fresh = await ready();
  expect(fresh.data).toEqual({ lastEventId: fresh.id, tail: fresh.id, gap: false });
  const from = fresh.id;
  await h.visitorSay(h.site.id, 'ready-visitor-1', 'one'); // message.created and conversation.started
  await h.visitorSay(h.site.id, 'ready-visitor-1', 'two');
  const tail = String(Number(from) + 3);
  const resumed = await ready(from);
  expect(resumed.data).toEqual({ lastEventId: from, tail, gap: false });
  expect(resumed.id).toBe(from);
  // Resuming at the tail: nothing to catch up.
  expect((await ready(tail)).data).toEqual({ lastEventId: tail, tail, gap: false });
});

test('feed rows past Last-Event-ID purged: the resume says gap', async () => {
  const from = (await ready()).id;
  await h.visitorSay(h.site.id, 'ready-visitor-2', 'one');
  await h.visitorSay(h.site.id, 'ready-visitor-2', 'two');
  // The first row after `from` goes, as the week's purge takes the oldest rows.
  await h.runtime
    .db('inbox_activity')
    .where({ site_id: h.site.id, position: Number(from) + 1 })
    .delete();
  const resumed = await ready(from);
  expect(resumed.data).toMatchObject({ lastEventId: from, gap: true });
  // Everything purged: still a gap.
  await h.runtime.db('inbox_activity').where({ site_id: h.site.id }).delete();
  expect((await ready(from)).data).toMatchObject({ gap: true });
});
