/**
 * Deleting a visitor's data (`POST /manage/v1/sites/{siteId}/visitor-deletions`, the CLI's
 * `visitor delete`), both engines: everything of the visitor goes (conversations, messages, files
 * and their stored bytes, context, attributes, name and email, read marks, feed rows, events and
 * their deliveries, idempotent replays), nothing of another visitor or another site does, no event
 * is emitted, the owner's deletion is audited, an agent's is refused; a long history goes in
 * batches that commit one by one, so a run cut short midway is finished by running it again.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { TEST_DB } from '../helpers/db';
import { waitFor } from '../helpers/wait';
import { allowOrigins, auth, getToken, ORIGIN, w } from '../window/helpers';
import { memberWithToken, TEST_HASHER, withToken } from '../manage/helpers';
import { parseArgs } from '../../server/cli/args';
import { visitorCommands } from '../../server/cli/commands/visitors';
import { MESSAGES_PER_BATCH } from '../../server/visitors/deletion';

let h: Harness;
let site: string;
let owner: { id: string; token: string };
let agent: { id: string; token: string };

beforeAll(async () => {
  h = await createHarness({ passwordHasher: TEST_HASHER, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
  site = h.site.id;
  await allowOrigins(h, site);
  owner = await memberWithToken(h, site, 'owner@example.com', 'owner');
  agent = await memberWithToken(h, site, 'agent@example.com', 'agent');
  // An event address, so events have deliveries (pending: no worker runs here).
  await h.runtime.services.webhooks.setEndpoint(site, 'https://127.0.0.1:9/hook');
});
afterAll(() => h?.close());

const db = () => h.runtime.db;
const count = async (table: string, where: (q: ReturnType<ReturnType<typeof db>>) => unknown) => {
  const q = db()(table);
  where(q);
  return Number((await q.count({ n: '*' }))[0].n);
};
const deleteVisitor = (visitorId: string, who = owner) => withToken(h, who, 'post', `/sites/${site}/visitor-deletions`, { visitorId });
const storedBytes = async (siteId: string) => Number((await db()('site_visitor_files').where({ site_id: siteId }).first('stored_bytes'))?.stored_bytes ?? 0);

/**
 * A visitor with what the service keeps of one: two conversations (the first closed), a file it
 * sent, an API reply sent twice under one Idempotency-Key (a replay row), a read mark, a page,
 * its browser, a name, an email and attributes. Answers its conversations and its file's id.
 */
async function busyVisitor(siteId = site) {
  const t = await getToken(h.app, siteId);
  const v = t.visitorId;
  const first = (await h.visitorSay(siteId, v, 'my first question')).conversation.id;
  await withToken(h, agent, 'post', `/sites/${siteId}/inbox/conversations/${first}/close`);
  const said = await h.runtime.services.window.chat.visitorSay(siteId, v, 'a photo', {
    files: [{ buffer: Buffer.from('pretend this is a photo'), originalName: 'photo.jpg', mimeType: 'image/jpeg' }],
  });
  const second = said.conversation.id;
  const fileId = said.message.attachments[0].id;
  const key = siteId === site ? h.site.key : undefined;
  if (key) {
    for (let i = 0; i < 2; i++) {
      await request(h.app)
        .post(`/api/v1/conversations/${second}/messages`)
        .set(bearer(key))
        .set('Idempotency-Key', `reply-${second}`)
        .send({ content: 'an answer' });
    }
    await withToken(h, agent, 'post', `/sites/${siteId}/inbox/conversations/${second}/read`).expect(200);
    // The replay's note is written after its answer, off the request's path.
    await waitFor('the replay note', async () => (await count('idempotency_replays', (q) => q.where({ conversation_id: second }))) > 0);
  }
  await request(h.app)
    .post(w(siteId, '/messages'))
    .set('Origin', ORIGIN)
    .set(auth(t.token))
    .send({ content: 'from the window', clientMessageId: randomUUID() })
    .expect(201);
  await request(h.app)
    .post(w(siteId, '/context'))
    .set('Origin', ORIGIN)
    .set(auth(t.token))
    .send({ page: { url: `${ORIGIN}/help` }, language: 'en', timeZone: 'UTC' })
    .expect(200);
  await request(h.app)
    .post(w(siteId, '/visitor'))
    .set('Origin', ORIGIN)
    .set(auth(t.token))
    .send({ name: 'Erase Me', email: 'erase@example.com', attributes: { plan: 'pro' } })
    .expect(200);
  return { visitorId: v, conversations: [first, second], fileId };
}

/** Every row of the visitor that the service keeps, by table. */
async function leftOf(visitorId: string, conversations: string[], siteId = site) {
  return {
    conversations: await count('conversations', (q) => q.where({ site_id: siteId, visitor_id: visitorId })),
    messages: await count('messages', (q) => q.whereIn('conversation_id', conversations)),
    attachments: await count('attachments', (q) =>
      q.where('site_id', siteId).whereIn('message_id', db()('messages').whereIn('conversation_id', conversations).select('id')),
    ),
    events: await count('events', (q) => q.whereIn('conversation_id', conversations)),
    deliveries: await count('deliveries', (q) => q.whereIn('event_id', db()('events').whereIn('conversation_id', conversations).select('id'))),
    inboxReads: await count('inbox_reads', (q) => q.whereIn('conversation_id', conversations)),
    inboxActivity: await count('inbox_activity', (q) => q.whereIn('conversation_id', conversations)),
    replays: await count('idempotency_replays', (q) => q.whereIn('conversation_id', conversations)),
    pages: await count('conversation_pages', (q) => q.whereIn('conversation_id', conversations)),
    environments: await count('conversation_environments', (q) => q.whereIn('conversation_id', conversations)),
    attributes: await count('visitor_attributes', (q) => q.where({ site_id: siteId, visitor_id: visitorId })),
    visitors: await count('visitors', (q) => q.where({ site_id: siteId, id: visitorId })),
    clientMessages: await count('window_client_messages', (q) => q.where({ site_id: siteId, visitor_id: visitorId })),
  };
}

test('removes everything of the visitor, leaves other visitors and sites alone, emits nothing, and is audited', async () => {
  const gone = await busyVisitor();
  const kept = await busyVisitor();
  // Another site's visitor with the very same id.
  const elsewhere = await h.newSite('Elsewhere');
  const sameId = (await h.visitorSay(elsewhere.id, gone.visitorId, 'same id, other site')).conversation.id;

  const before = await leftOf(gone.visitorId, gone.conversations);
  expect(Object.values(before).every((n) => n > 0)).toBe(true); // the setup made a row of every kind
  const keptBefore = await leftOf(kept.visitorId, kept.conversations);
  const mediaDir = path.join(h.config.dataDir, 'media');
  expect(fs.existsSync(path.join(mediaDir, gone.fileId))).toBe(true);
  const bytesBefore = await storedBytes(site);
  const eventsBefore = await count('events', (q) => q.where('site_id', site));

  expect((await deleteVisitor(gone.visitorId, agent)).status).toBe(403);
  const res = await deleteVisitor(gone.visitorId);
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ siteId: site, visitorId: gone.visitorId });
  expect(res.body.data.removed).toMatchObject({
    conversations: 2,
    messages: before.messages,
    files: 1,
    attributes: 1,
    visitor: 1,
    context: before.pages,
    events: before.events,
    replays: before.replays,
  });

  expect(await leftOf(gone.visitorId, gone.conversations)).toEqual(Object.fromEntries(Object.keys(before).map((k) => [k, 0])));
  expect(await leftOf(kept.visitorId, kept.conversations)).toEqual(keptBefore);
  expect(await count('conversations', (q) => q.where({ id: sameId }))).toBe(1);
  // The file: its link answers 404 and its bytes are off the disk and off the site's quota.
  expect((await request(h.app).get(`/api/v1/media/${gone.fileId}`).set(bearer(h.site.key))).status).toBe(404);
  expect(fs.existsSync(path.join(mediaDir, gone.fileId))).toBe(false);
  expect(await storedBytes(site)).toBe(bytesBefore - 'pretend this is a photo'.length);
  // Gone from every reader: the inbox, the public API.
  for (const id of gone.conversations) {
    expect((await withToken(h, agent, 'get', `/sites/${site}/inbox/conversations/${id}`)).status).toBe(404);
    expect((await request(h.app).get(`/api/v1/conversations/${id}`).set(bearer(h.site.key))).status).toBe(404);
  }
  // No event of the deletion: only the events of the deleted conversations went.
  expect(await count('events', (q) => q.where('site_id', site))).toBe(eventsBefore - before.events);

  const log = (await withToken(h, owner, 'get', `/sites/${site}/audit-log`).expect(200)).body.data;
  expect(log[0]).toMatchObject({ action: 'visitor.data_deleted', objectId: gone.visitorId, actor: { type: 'token', accountId: owner.id } });

  // Again: nothing left to remove, and the request is audited again.
  const again = await deleteVisitor(gone.visitorId).expect(200);
  expect(again.body.data.removed).toMatchObject({ conversations: 0, messages: 0, files: 0, attributes: 0, visitor: 0 });
});

test('the visitor can chat again afterwards, as a new history', async () => {
  const { visitorId } = await busyVisitor();
  await deleteVisitor(visitorId).expect(200);
  const res = await h.visitorSay(site, visitorId, 'hello again');
  expect(res.started).toBe(true);
  expect(await count('messages', (q) => q.where({ conversation_id: res.conversation.id }))).toBe(1);
});

test('a visitor id of 128 characters fits the audit log; bad ids are 400', async () => {
  const long = `user:${'x'.repeat(123)}`;
  await h.visitorSay(site, long, 'long id');
  expect((await deleteVisitor(long).expect(200)).body.data.removed.conversations).toBe(1);
  expect((await withToken(h, owner, 'get', `/sites/${site}/audit-log`)).body.data[0].objectId).toBe(long);
  expect((await deleteVisitor('has space')).status).toBe(400);
  expect((await deleteVisitor('x'.repeat(129))).status).toBe(400);
});

test('the CLI deletes the same way, audited as the operator; an unknown site is an error', async () => {
  const { visitorId, conversations } = await busyVisitor();
  const run = (line: string[]) => {
    const args = parseArgs(line, visitorCommands['visitor delete'].options);
    return visitorCommands['visitor delete'].run(h.runtime, { ...args, positional: args.positional.slice(2) });
  };
  const out = await run(['visitor', 'delete', '--site', site, '--visitor', visitorId]);
  expect(out.json).toMatchObject({ siteId: site, visitorId, removed: { conversations: 2, visitor: 1 } });
  expect(out.text).toMatch(/data deleted \(conversations 2, messages \d+/);
  expect((await leftOf(visitorId, conversations)).messages).toBe(0);
  expect((await withToken(h, owner, 'get', `/sites/${site}/audit-log`)).body.data[0]).toMatchObject({
    action: 'visitor.data_deleted',
    actor: { type: 'operator' },
  });
  await expect(run(['visitor', 'delete', '--site', 'ws_01jd8x3r5k0000000000000000', '--visitor', visitorId])).rejects.toMatchObject({ code: 'not_found' });
  await expect(run(['visitor', 'delete', '--site', site])).rejects.toThrow(/--visitor is required/);
});

/**
 * A history longer than a batch is removed in batches that commit one by one: a failure in a later
 * batch (a trigger refusing to delete the newest message stands for a killed process or a lost
 * database) leaves the earlier batches removed and the rest in place, and running the deletion
 * again removes the rest. The messages are written straight into the table (the setup, not the
 * behaviour under test): 2.4 batches of them.
 */
test('a long history goes in committed batches; a run cut short is finished by running it again', async () => {
  const visitorId = `long-history-${randomUUID()}`;
  const conv = (await h.visitorSay(site, visitorId, 'start')).conversation.id;
  const total = Math.round(MESSAGES_PER_BATCH * 2.4);
  const base = Date.now() - 3600_000;
  const rows = Array.from({ length: total - 1 }, (_, i) => ({
    id: `msg_bulk${String(i).padStart(22, '0')}`,
    conversation_id: conv,
    site_id: site,
    direction: 'incoming',
    origin: 'widget',
    api_key_id: null,
    author_id: null,
    content: i === total - 2 ? 'poison' : `message ${i}`,
    format: 'plain',
    created_at: base + i,
    attachment_count: 0,
  }));
  for (let i = 0; i < rows.length; i += 200) await db()('messages').insert(rows.slice(i, i + 200));

  const poison = 'poison_delete';
  if (TEST_DB === 'mysql') {
    await db().raw(
      `create trigger ${poison} before delete on messages for each row begin if old.content = 'poison' then signal sqlstate '45000' set message_text = 'injected failure'; end if; end`,
    );
  } else {
    await db().raw(`create trigger ${poison} before delete on messages when old.content = 'poison' begin select raise(abort, 'injected failure'); end`);
  }
  let firstRun: request.Response;
  try {
    firstRun = await deleteVisitor(visitorId);
  } finally {
    await db().raw(`drop trigger ${poison}`);
  }
  expect(firstRun.status).toBe(500);
  const left = await count('messages', (q) => q.where({ conversation_id: conv }));
  expect(left).toBeGreaterThan(0);
  expect(left).toBeLessThan(total);
  // What went, went in whole committed batches.
  expect((total - left) % MESSAGES_PER_BATCH).toBe(0);
  expect(await count('conversations', (q) => q.where({ id: conv }))).toBe(1);

  const second = await deleteVisitor(visitorId).expect(200);
  expect(second.body.data.removed).toMatchObject({ conversations: 1, messages: left });
  expect(await count('messages', (q) => q.where({ conversation_id: conv }))).toBe(0);
  const audit = (await withToken(h, owner, 'get', `/sites/${site}/audit-log`)).body.data.filter(
    (e: { action: string; objectId: string }) => e.action === 'visitor.data_deleted' && e.objectId === visitorId,
  );
  expect(audit).toHaveLength(1); // only the run that finished
});
