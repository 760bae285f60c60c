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
  const kept = await h.runtime.services.widget.visitorSay(h.site.id, 'v', 'file', {
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
  expect(result).toEqual({ purgedKeys: 1, removedSpool: 1, expiredMedia: 0, removedOrphans: 1, purgedRevocations: 0 });
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
