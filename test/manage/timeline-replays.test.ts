/**
 * Idempotent replays on a conversation's timeline: a retry of a reply with the same
 * Idempotency-Key answered with the stored answer shows as one `replayed` entry per replay, at its
 * time, with the key's label and the key's fingerprint (never the key); a retry refused because the
 * first request still runs (409) is none; another site's replays never show.
 */
import request from 'supertest';
import { createHash } from 'node:crypto';
import type { Harness } from '../helpers/harness';
import { bearer } from '../helpers/harness';
import { waitFor } from '../webhooks/helpers';
import { manageHarness, memberWithToken, withToken } from './helpers';
import { createIdempotencyService } from '../../server/idempotency/service';
import { createIdempotencyStore } from '../../server/idempotency/store';

let h: Harness;
let offset = 0;
let site: string;
let owner: { id: string; token: string };
let crm: { id: string; key: string };
let conversationId: string;

type Entry = { type: string; at: string; messageId?: string | null; status?: number; by?: Record<string, unknown>; idempotencyKeyFingerprint?: string };

const fingerprint = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 16);

const reply = (key: string, content: string, id = conversationId, apiKey = crm.key) =>
  request(h.app).post(`/api/v1/conversations/${id}/messages`).set(bearer(apiKey)).set('Idempotency-Key', key).send({ content });

async function timeline(siteId = site, id = conversationId, who = owner): Promise<Entry[]> {
  const entries: Entry[] = [];
  let cursor: string | null = null;
  do {
    const res = await withToken(h, who, 'get', `/sites/${siteId}/conversations/${id}/timeline?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status).toBe(200);
    entries.push(...res.body.data);
    cursor = res.body.page.nextCursor;
  } while (cursor);
  return entries;
}

const replaysOf = (entries: Entry[], key: string) => entries.filter((e) => e.type === 'replayed' && e.idempotencyKeyFingerprint === fingerprint(key));

/** The replays are noted just after their answer went out: wait until `n` of the key's are there. */
async function replaysWhen(n: number, key: string, siteId = site, id = conversationId) {
  await waitFor(`${n} replays of ${key}`, async () => replaysOf(await timeline(siteId, id), key).length >= n);
  return replaysOf(await timeline(siteId, id), key);
}

/** A replayed answer, with the service's clock around it. */
async function timedReplay(key: string, content: string) {
  const before = Date.now() + offset;
  const res = await reply(key, content);
  const after = Date.now() + offset;
  expect(res.headers['idempotent-replayed']).toBe('true');
  return { res, before, after };
}

beforeAll(async () => {
  h = await manageHarness({ now: () => Date.now() + offset });
  site = h.site.id;
  owner = await memberWithToken(h, site, 'owner@example.com', 'owner');
  const made = await h.runtime.services.access.createKey(site, ['conversations:read', 'conversations:write'], 'crm sync');
  crm = { id: made.id, key: made.key };
  conversationId = (await h.visitorSay(site, 'v-replays', 'hello')).conversation.id;
});

afterAll(() => h.close());

test('each replay shows once, at its time, with the message, the key label and the key fingerprint', async () => {
  const first = await reply('crm-order-1001', 'your parcel left');
  expect(first.status).toBe(201);
  const replays = [await timedReplay('crm-order-1001', 'your parcel left'), await timedReplay('crm-order-1001', 'your parcel left')];
  for (const r of replays) expect(r.res.body).toEqual(first.body);

  const shown = await replaysWhen(2, 'crm-order-1001');
  expect(shown).toHaveLength(2);
  shown.forEach((entry, i) => {
    expect(entry).toEqual({
      type: 'replayed',
      at: expect.any(String),
      messageId: first.body.data.id,
      status: 201,
      by: { type: 'api_key', apiKeyId: crm.id, apiKeyLabel: 'crm sync', accountId: null },
      idempotencyKeyFingerprint: fingerprint('crm-order-1001'),
    });
    const at = Date.parse(entry.at);
    expect(at).toBeGreaterThanOrEqual(replays[i].before);
    expect(at).toBeLessThanOrEqual(replays[i].after);
  });
  // The raw key is nowhere in the answer.
  expect(JSON.stringify(await timeline())).not.toContain('crm-order-1001');
  // In time order: after the message it replayed.
  const all = await timeline();
  const messageAt = all.findIndex((e) => e.type === 'message' && e.messageId === first.body.data.id);
  expect(messageAt).toBeGreaterThanOrEqual(0);
  const positions = all.map((e, i) => (e.type === 'replayed' && e.idempotencyKeyFingerprint === fingerprint('crm-order-1001') ? i : -1)).filter((i) => i >= 0);
  expect(positions.every((p) => p > messageAt)).toBe(true);
  for (let i = 1; i < all.length; i++) expect(Date.parse(all[i].at)).toBeGreaterThanOrEqual(Date.parse(all[i - 1].at));
});

test('a retry while the first request still runs (409) is not a replay', async () => {
  const first = await reply('crm-order-1002', 'on its way');
  expect(first.status).toBe(201);
  const keyHash = createHash('sha256').update('crm-order-1002').digest('hex');
  // The record as it is while its request runs: a retry now is told to wait.
  await h.runtime
    .db('idempotency_keys')
    .where({ key_hash: keyHash })
    .update({ state: 'running', locked_until: Date.now() + offset + 60_000 });
  const conflicting = await reply('crm-order-1002', 'on its way');
  expect(conflicting.status).toBe(409);
  expect(conflicting.body.error.code).toBe('idempotency_key_in_use');
  await h.runtime.db('idempotency_keys').where({ key_hash: keyHash }).update({ state: 'done' });
  await timedReplay('crm-order-1002', 'on its way');
  const shown = await replaysWhen(1, 'crm-order-1002');
  await new Promise((resolve) => setTimeout(resolve, 200)); // a stray note of the 409 would be in by now
  expect(replaysOf(await timeline(), 'crm-order-1002')).toHaveLength(1);
  expect(shown[0].messageId).toBe(first.body.data.id);
});

test("another site's replays never show, not even against this conversation's id", async () => {
  const other = await h.newSite('other');
  const otherConversation = (await h.visitorSay(other.id, 'v-other', 'hi')).conversation.id;
  const otherOwner = await memberWithToken(h, other.id, 'other-owner@example.com', 'owner');
  // The other site's key, on its own conversation and on this site's conversation (404, replayed as 404).
  for (const [key, id, status] of [
    ['shared-key', otherConversation, 201],
    ['cross-key', conversationId, 404],
  ] as const) {
    expect((await reply(key, 'from the other site', id, other.key)).status).toBe(status);
    expect((await reply(key, 'from the other site', id, other.key)).headers['idempotent-replayed']).toBe('true');
  }
  await waitFor('the other site notes its replay', async () => replaysOf(await timeline(other.id, otherConversation, otherOwner), 'shared-key').length === 1);
  // The same key used on this site too: only this site's own replay shows here.
  expect((await reply('shared-key', 'from this site')).status).toBe(201);
  await timedReplay('shared-key', 'from this site');
  const shown = await replaysWhen(1, 'shared-key');
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(replaysOf(await timeline(), 'shared-key')).toHaveLength(1);
  expect(replaysOf(await timeline(), 'cross-key')).toHaveLength(0);
  expect(shown[0].by).toMatchObject({ apiKeyId: crm.id });
  // And the other site's member cannot read this conversation's timeline at all.
  expect((await withToken(h, otherOwner, 'get', `/sites/${other.id}/conversations/${conversationId}/timeline`)).status).toBe(404);
});

test("a member's retried inbox reply shows as the member's replay", async () => {
  const path = `/sites/${site}/inbox/conversations/${conversationId}/messages`;
  const send = () => withToken(h, owner, 'post', path, { content: 'from the inbox' }).set('Idempotency-Key', 'inbox-1');
  const first = await send();
  expect(first.status).toBe(201);
  const again = await send();
  expect(again.headers['idempotent-replayed']).toBe('true');
  const [shown] = await replaysWhen(1, 'inbox-1');
  expect(shown).toMatchObject({ messageId: first.body.data.id, status: 201, by: { type: 'member', apiKeyId: null, apiKeyLabel: null, accountId: owner.id } });
});

test('a replayed error names no message; pages hold every replay once', async () => {
  const closing = (await h.visitorSay(site, 'v-closed', 'bye')).conversation.id;
  await request(h.app).post(`/api/v1/conversations/${closing}/close`).set(bearer(crm.key)).send();
  const refused = await reply('late-reply', 'too late', closing);
  expect(refused.status).toBeGreaterThanOrEqual(400);
  expect((await reply('late-reply', 'too late', closing)).headers['idempotent-replayed']).toBe('true');
  const [shown] = await replaysWhen(1, 'late-reply', site, closing);
  expect(shown).toMatchObject({ messageId: null, status: refused.status });

  // One message a page: every replay of the conversation once, in time order within each page.
  const everyReplay = (await timeline()).filter((e) => e.type === 'replayed');
  const paged: Entry[] = [];
  let cursor: string | null = null;
  do {
    const res = await withToken(h, owner, 'get', `/sites/${site}/conversations/${conversationId}/timeline?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status).toBe(200);
    paged.push(...res.body.data.filter((e: Entry) => e.type === 'replayed'));
    cursor = res.body.page.nextCursor;
  } while (cursor);
  expect(paged).toEqual(everyReplay);
  expect(everyReplay.length).toBeGreaterThanOrEqual(5);
});

test('notes are written together: at a batch, or when flushed (as a stop does), each once', async () => {
  const service = createIdempotencyService(createIdempotencyStore(h.runtime.db), () => Date.now() + offset, { noteFlushMs: 60_000, noteBatch: 3 });
  const count = async () => Number((await h.runtime.db('idempotency_replays').where({ conversation_id: 'conv_batch' }).count({ n: '*' }).first())!.n);
  const note = () =>
    service.noteReplay(
      { siteId: site, conversationId: 'conv_batch', apiKeyId: crm.id, accountId: null },
      { kind: 'replay', status: 404, body: '{"error":{}}', keyFingerprint: '0123456789abcdef', keyCreatedAt: Date.now() + offset },
    );
  note();
  note();
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(await count()).toBe(0); // kept, not written one by one
  note(); // the third fills the batch
  await waitFor('the batch written', async () => (await count()) === 3);
  note();
  await service.flushReplayNotes();
  expect(await count()).toBe(4);
  await service.flushReplayNotes(); // nothing left: nothing written twice
  expect(await count()).toBe(4);
});

test('replays go with their key records after 24 hours', async () => {
  expect(await h.runtime.db('idempotency_replays').count({ n: '*' }).first()).not.toEqual({ n: 0 });
  offset += 25 * 3600_000;
  await h.runtime.services.idempotency.purgeExpired();
  expect((await timeline()).filter((e) => e.type === 'replayed')).toEqual([]);
  expect(Number((await h.runtime.db('idempotency_replays').count({ n: '*' }).first())!.n)).toBe(0);
});
