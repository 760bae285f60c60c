import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { createHarness, Harness, bearer } from '../helpers/harness';
import { runMaintenance } from '../../server/maintenance';

let h: Harness;
let now = Date.now();
beforeAll(async () => {
  h = await createHarness({ now: () => now });
});
afterAll(() => h.close());

test('forgets old idempotency keys, stale spool files and orphaned media, and keeps everything in use', async () => {
  const conv = (await h.visitorSay(h.site.id, 'v', 'hi')).conversation.id;
  await request(h.app).post(`/api/v1/conversations/${conv}/messages`).set(bearer(h.site.key)).set('Idempotency-Key', 'old').send({ content: 'a' });
  const kept = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v', 'file', {
    files: [{ buffer: Buffer.from('keep me'), originalName: 'k.txt', mimeType: 'text/plain' }],
  });
  const mediaDir = path.join(h.config.dataDir, 'media');
  const spoolDir = path.join(h.config.dataDir, 'tmp');
  fs.mkdirSync(spoolDir, { recursive: true });
  fs.writeFileSync(path.join(mediaDir, 'med_orphan_from_a_crash'), 'x');
  fs.writeFileSync(path.join(spoolDir, 'upload_abandoned'), 'x');
  const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
  for (const f of fs.readdirSync(mediaDir)) fs.utimesSync(path.join(mediaDir, f), twoHoursAgo, twoHoursAgo);
  fs.utimesSync(path.join(spoolDir, 'upload_abandoned'), twoHoursAgo, twoHoursAgo);

  now += 25 * 3600_000;
  await request(h.app).post(`/api/v1/conversations/${conv}/messages`).set(bearer(h.site.key)).set('Idempotency-Key', 'fresh').send({ content: 'b' });
  const result = await runMaintenance(h.runtime.services, Date.now());
  expect(result).toEqual({
    purgedKeys: 1,
    removedSpool: 1,
    expiredMedia: 0,
    removedOrphans: 1,
    purgedRevocations: 0,
    removedDeliveryLog: { attempts: 0, deliveries: 0, events: 0 },
    removedMailLog: 0,
    removedReplyNotices: 0,
    accounts: { sessions: 0, invitations: 0, passwordResets: 0, emailLinks: 0, audit: 0, securityLog: 0 },
    inboxActivity: 0,
    agentAlerts: 0,
    visitorContext: 0,
  });
  expect(fs.existsSync(path.join(mediaDir, kept.message.attachments[0].id))).toBe(true);
  expect(fs.existsSync(path.join(mediaDir, 'med_orphan_from_a_crash'))).toBe(false);
  expect((await h.runtime.db('idempotency_keys')).length).toBe(1);
  const again = await request(h.app).get(`/api/v1/media/${kept.message.attachments[0].id}`).set(bearer(h.site.key));
  expect(again.status).toBe(200);
});

test("forgets a visitor's window revocation once every credential it voids has expired, and keeps a recent one", async () => {
  const day = 24 * 3600_000;
  const access = h.runtime.services.access;
  const at = Date.now();
  now = at - 182 * day;
  await access.revokeVisitors(h.site.id, 'vis_old');
  now = at - 170 * day;
  await access.revokeVisitors(h.site.id, 'vis_recent');
  now = at;
  const result = await runMaintenance(h.runtime.services, at);
  expect(result.purgedRevocations).toBe(1);
  const left = await h.runtime.db('window_visitor_revocations').where({ site_id: h.site.id }).pluck('visitor_id');
  expect(left).toEqual(['vis_recent']);
});

test('removes delivery-log rows older than 30 days and keeps newer and pending ones', async () => {
  const db = h.runtime.db;
  const day = 24 * 3600_000;
  const at = Date.now();
  const site = h.site.id;
  const id = (name: string) => `message.created:maint-${name}`;
  const event = (name: string, t: number) => ({ id: id(name), site_id: site, name: 'message.created', body: '{}', created_at: t });
  const delivery = (name: string, status: string, t: number) => ({
    event_id: id(name),
    site_id: site,
    endpoint_id: 'whk_x',
    status,
    attempts: 1,
    round_base: 0,
    next_attempt_at: t,
    lease_owner: null,
    lease_until: null,
    updated_at: t,
  });
  const attempt = (name: string, t: number) => ({
    event_id: id(name),
    site_id: site,
    endpoint_id: 'whk_x',
    event_name: 'message.created',
    attempt: 1,
    url: 'https://example.com/',
    started_at: t,
    duration_ms: 5,
    status_code: 200,
    error: null,
    response_excerpt: null,
  });
  await db('events').insert([event('old', at - 31 * day), event('old-pending', at - 31 * day), event('recent', at - 29 * day)]);
  await db('deliveries').insert([
    delivery('old', 'delivered', at - 31 * day),
    delivery('old-pending', 'pending', at + day),
    delivery('recent', 'delivered', at - 29 * day),
  ]);
  await db('delivery_attempts').insert([attempt('old', at - 31 * day), attempt('recent', at - 29 * day)]);

  const result = await runMaintenance(h.runtime.services, at);
  expect(result.removedDeliveryLog).toEqual({ attempts: 1, deliveries: 1, events: 1 });
  expect(await db('events').where('id', 'like', 'message.created:maint-%').orderBy('id').pluck('id')).toEqual([id('old-pending'), id('recent')]);
  expect(await db('delivery_attempts').where('event_id', 'like', 'message.created:maint-%').pluck('event_id')).toEqual([id('recent')]);
});
