import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import https from 'node:https';
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse, IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { makeSelfSignedCert } from '../../server/platform/tls';
import type { DeliveryWorker, WorkerOptions } from '../../server/webhooks/worker';
import { createWebhookService } from '../../server/webhooks/service';
import type { Resolver } from '../../server/webhooks/ssrf';
import { deliveryWorkerFor } from '../../server/services';
import { createHarness, Harness } from '../helpers/harness';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  json: Record<string, unknown> & {
    id: string;
    event: string;
    workspaceKey: string;
    data: { conversation: Record<string, unknown>; message: Record<string, unknown> | null };
  };
  at: number;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

/** Handlers for the receiver's paths. */
export const answer =
  (status: number, text = '', headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    res.writeHead(status, { 'Content-Type': 'text/plain', ...headers });
    res.end(text);
  };
export const stall: Handler = () => {}; // never answers
export const reset: Handler = (req) => req.socket.destroy(); // drops the connection before any answer

/**
 * A real HTTPS receiver on 127.0.0.1 with a self-signed certificate for localhost. Each path has
 * its own handler (200 by default), so tests on one receiver do not disturb each other.
 */
export interface Receiver {
  url(p: string): string;
  caFile: string;
  on(p: string, handler: Handler): void;
  requests: Received[];
  at(p: string): Received[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const tls = await makeSelfSignedCert();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'receiver-'));
  const caFile = path.join(dir, 'ca.pem');
  fs.writeFileSync(caFile, tls.cert);
  const handlers = new Map<string, Handler>();
  const requests: Received[] = [];
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const p = (req.url ?? '/').split('?')[0];
      let json: Received['json'];
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        json = {} as Received['json'];
      }
      requests.push({ path: p, headers: req.headers, body, json, at: Date.now() });
      (handlers.get(p) ?? answer(200, 'ok'))(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (p) => `https://localhost:${port}${p}`,
    caFile,
    on: (p, h) => void handlers.set(p, h),
    requests,
    at: (p) => requests.filter((r) => r.path === p),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
        fs.rmSync(dir, { recursive: true, force: true });
      }),
  };
}

export { waitFor } from '../helpers/wait';

/** A receiver's check of a delivery, written from docs/events.md (Verify it) with node:crypto only. */
export function signatureValid(secret: string, headers: IncomingHttpHeaders, body: Buffer): boolean {
  const timestamp = String(headers['x-service-timestamp'] ?? '');
  const header = String(headers['x-service-signature'] ?? '');
  if (!/^\d+$/.test(timestamp) || !header.startsWith('sha256=')) return false;
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
  const given = Buffer.from(header.slice('sha256='.length));
  return given.length === expected.length && timingSafeEqual(given, Buffer.from(expected));
}

/** Log lines written by a worker, kept in memory so a test can search them. */
export function captureLogger() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), text: () => lines.join('') };
}

const silent = pino({ level: 'silent' });

/** Workers over one harness's database; `stopAll` in afterEach. */
export function workerPool(h: () => Harness) {
  const running: DeliveryWorker[] = [];
  return {
    start(overrides: Partial<WorkerOptions['config']> = {}, extra: Partial<WorkerOptions> = {}): DeliveryWorker {
      const worker = deliveryWorkerFor(h().runtime.services, silent, { config: overrides, ...extra });
      running.push(worker);
      worker.start();
      return worker;
    },
    wake() {
      for (const w of running) w.wake();
    },
    async stopAll() {
      await Promise.all(running.splice(0).map((w) => w.stop()));
    },
  };
}

/**
 * The harness's webhook service with an address policy of the test's own: private networks allowed
 * unless `allowPrivateNetworks: false`, and names resolved by `resolve` (a fake DNS) when given.
 */
export function webhooks(h: Harness, policy: { allowPrivateNetworks?: boolean; resolve?: Resolver } = {}) {
  const { stores, keys } = h.runtime.services;
  return createWebhookService({
    store: stores.events,
    sites: stores.access,
    secretKey: keys.webhookSecrets,
    allowPrivateNetworks: policy.allowPrivateNetworks ?? true,
    resolve: policy.resolve,
  });
}

/** Delivery state of one event, straight from the table. */
export async function deliveryOf(h: Harness, eventId: string) {
  return h.runtime.db('deliveries').where({ event_id: eventId }).first();
}

export async function attemptsOf(h: Harness, eventId: string) {
  return h.runtime.db('delivery_attempts').where({ event_id: eventId }).orderBy('attempt');
}

/** Ids of the events a site emitted, oldest first. */
export async function eventIdsOf(h: Harness, siteId: string, name?: string): Promise<string[]> {
  const q = h.runtime
    .db('events')
    .where({ site_id: siteId })
    .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  if (name) q.andWhere({ name });
  return (await q.select('id')).map((r) => r.id);
}

export interface DeliverySetup {
  /** WEBHOOK_TIMEOUT_MS; the configuration's default when not given. */
  timeoutMs?: number;
  /** WEBHOOK_RETRY_DELAYS_MS; the configuration's default when not given. */
  delaysMs?: number[];
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: true (the receiver is on 127.0.0.1) unless a test checks refusals. */
  allowPrivateNetworks?: boolean;
}

/** The environment that points a service (in this process or a child) at `receiver`. */
export function deliveryEnv(receiver: Receiver, setup: DeliverySetup = {}): Record<string, string> {
  return {
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: String(setup.allowPrivateNetworks ?? true),
    WEBHOOK_CA_FILE: receiver.caFile,
    ...(setup.timeoutMs === undefined ? {} : { WEBHOOK_TIMEOUT_MS: String(setup.timeoutMs) }),
    ...(setup.delaysMs === undefined ? {} : { WEBHOOK_RETRY_DELAYS_MS: setup.delaysMs.join(',') }),
  };
}

/**
 * The app on a fresh database, set up to deliver to `receiver` (a local HTTPS receiver with its own
 * CA), with the attempt time-out and the pauses a test needs; `onEvents` runs whenever the event
 * channel tells of committed events (wake the test's workers there).
 */
export function deliveryHarness(receiver: Receiver, opts: DeliverySetup & { onEvents?: () => void } = {}): Promise<Harness> {
  return createHarness({ env: deliveryEnv(receiver, opts), onEvents: opts.onEvents });
}
