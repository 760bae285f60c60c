/**
 * The end-to-end loop over the real delivery path: a visitor writes, the real worker delivers the
 * signed events over HTTPS to sdk/examples/integration.ts, which replies once through the API;
 * its own reply comes back as `message.created` and is not answered. Redelivery, a restart of the
 * integration (empty replay store) and idle closing are covered too.
 */
import https from 'node:https';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import { startSdkServer, SdkServer, waitFor } from './helpers';
import { createIntegration } from '../../sdk/examples/integration';
import { MemoryReplayStore } from '../../sdk/src';
import { makeSelfSignedCert } from '../../server/platform/tls';
import type { DeliveryWorker } from '../../server/webhooks/worker';
import { deliveryWorkerFor } from '../../server/services';

let s: SdkServer;
let worker: DeliveryWorker | undefined;
let receiver: https.Server;
let receiverUrl: string;
let caDir: string;
let route: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();

beforeAll(async () => {
  // The integration's HTTPS endpoint, with its own self-signed certificate that the worker trusts.
  const tls = await makeSelfSignedCert();
  caDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-e2e-'));
  fs.writeFileSync(path.join(caDir, 'ca.pem'), tls.cert);
  receiver = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => route(req, res));
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `https://localhost:${(receiver.address() as AddressInfo).port}/webhooks/chat`;

  s = await startSdkServer({
    env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_CA_FILE: path.join(caDir, 'ca.pem'), WEBHOOK_RETRY_DELAYS_MS: '200,400' },
    onEvents: () => worker?.wake(),
  });
  worker = deliveryWorkerFor(s.h.runtime.services, pino({ level: 'silent' }), { pollMs: 100 });
  worker.start();
});

afterAll(async () => {
  await worker?.stop();
  receiver?.closeAllConnections();
  await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
  await s?.close();
  fs.rmSync(caDir, { recursive: true, force: true });
});

async function deliveriesSettled(siteId: string) {
  const rows = await s.h.runtime.db('deliveries').where({ site_id: siteId }).select('status');
  return rows.length > 0 && rows.every((r: { status: string }) => r.status !== 'pending');
}

test('visitor writes, event arrives, the integration replies once and does not answer its own reply', async () => {
  const site = await s.h.newSite('E2E site');
  const { secret } = await s.h.runtime.services.webhooks.setEndpoint(site.id, receiverUrl);
  const integration = createIntegration({ apiKey: site.key, baseUrl: s.baseUrl, webhookSecret: secret!, fetch: s.fetch, seen: new MemoryReplayStore() });
  route = integration.handler;

  // 1. A visitor writes: conversation.started and message.created are delivered; one reply goes out.
  const { conversation } = await s.h.visitorSay(site.id, 'visitor-e2e', 'Hello, do you ship to Norway?');
  await waitFor('the reply', async () => integration.stats.replies === 1);
  // 2. The reply's own message.created arrives and is skipped by loop protection.
  await waitFor('the own reply to come back', async () => integration.stats.skippedOwn === 1);
  await waitFor('all deliveries settled', () => deliveriesSettled(site.id));
  const attempts = await s.h.runtime.db('delivery_attempts').where({ site_id: site.id });
  expect(attempts.every((a: { status_code: number }) => a.status_code === 200)).toBe(true);
  expect(attempts.map((a: { event_name: string }) => a.event_name).sort()).toEqual(['conversation.started', 'message.created', 'message.created']);

  const messages = await integration.chat.messages.list(conversation.id).toArray();
  expect(messages.map((m) => [m.origin, m.direction])).toEqual([
    ['widget', 'incoming'],
    ['api', 'outgoing'],
  ]);
  expect(messages[1].apiKeyId).toBe(site.keyId);
  expect(integration.chat.keyId).toBe(site.keyId);
  expect(integration.stats).toEqual({ events: 3, replies: 1, skippedOwn: 1 });

  // 3. The operator redelivers the visitor's event: same id, so the integration takes it as a duplicate.
  const visitorEvent = (await s.h.runtime.db('events').where({ site_id: site.id, name: 'message.created' }).orderBy('id')).find(
    (e: { body: string }) => JSON.parse(e.body).data.message.origin === 'widget',
  );
  const { webhooks } = s.h.runtime.services;
  await webhooks.redeliverEvent(visitorEvent.id);
  worker!.wake();
  await waitFor('the redelivery', async () => (await s.h.runtime.db('delivery_attempts').where({ event_id: visitorEvent.id })).length === 2);
  await waitFor('all deliveries settled', () => deliveriesSettled(site.id));
  expect(integration.stats.events).toBe(3); // the listener did not run again

  // 4. After a restart (empty replay store) a redelivery reaches the listener, but the reply's
  //    Idempotency-Key (derived from the message id) keeps it at one reply.
  const restarted = createIntegration({ apiKey: site.key, baseUrl: s.baseUrl, webhookSecret: secret!, fetch: s.fetch, seen: new MemoryReplayStore() });
  route = restarted.handler;
  await webhooks.redeliverEvent(visitorEvent.id);
  worker!.wake();
  await waitFor('the second redelivery answered', async () => restarted.stats.replies === 1);
  await waitFor('all deliveries settled', () => deliveriesSettled(site.id));
  expect(restarted.stats.events).toBe(1);
  expect((await restarted.chat.messages.list(conversation.id).toArray()).filter((m) => m.origin === 'api')).toHaveLength(1);

  // 5. The visitor writes again: exactly one more reply.
  route = integration.handler;
  await s.h.visitorSay(site.id, 'visitor-e2e', 'And to Finland?');
  await waitFor('the second reply', async () => integration.stats.replies === 2);
  await waitFor('its own reply to come back', async () => integration.stats.skippedOwn === 2);
  await waitFor('all deliveries settled', () => deliveriesSettled(site.id));
  const all = await integration.chat.messages.list(conversation.id).toArray();
  expect(all.filter((m) => m.origin === 'api')).toHaveLength(2);
  expect(all.filter((m) => m.origin === 'widget')).toHaveLength(2);

  // 6. Idle closing: nothing is idle now; an hour later the conversation is, and it is closed once.
  expect(await integration.closeIdle()).toBe(0);
  expect(await integration.closeIdle(new Date(Date.now() + 3_600_000))).toBe(1);
  expect((await integration.chat.conversations.get(conversation.id)).state).toBe('closed');
  await waitFor(
    'conversation.closed delivered',
    async () => (await s.h.runtime.db('deliveries').where({ site_id: site.id })).length === 6 && deliveriesSettled(site.id),
  );
  expect(integration.stats.replies).toBe(2);
}, 60_000);
