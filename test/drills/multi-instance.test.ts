/**
 * Drill: the deployment of deploy/compose.yaml, on one MariaDB and one Redis: two servers and a
 * delivery worker, each started with the compose file's command and settings from the built
 * checkout (dist/, as the image runs them), behind a round-robin proxy. What one instance does, the
 * other shows live; limits hold across instances; an instance, the worker and Redis each die and
 * nothing acknowledged is lost or doubled beyond the documented at-least-once delivery.
 *
 * Files: each instance has a DATA_DIR of its own and the compose file's MEDIA_* settings point at
 * an s3rver the test starts (one object store, as the deployment has). MULTI_INSTANCE_MEDIA=shared-disk
 * runs the same with one DATA_DIR shared by both instances (the local media store) instead. MariaDB
 * only: the embedded SQLite database has one process.
 */
import fs from 'node:fs';
import http, { IncomingMessage } from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, TEST_DB, TestDatabase } from '../helpers/db';
import { freePort } from '../helpers/spawn';
import { waitFor, within } from '../helpers/wait';
import { PrivateRedis, startPrivateRedis, stopPrivateRedis } from '../helpers/redis';
import { deliveryEnv, Receiver, startReceiver } from '../webhooks/helpers';
import { ORIGIN, auth, messageContent, openSse, SseStream, w } from '../window/helpers';
import { TEST_HASHER, PASSWORD, SAME_ORIGIN } from '../manage/helpers';
import { ALL_SCOPES } from '../helpers/harness';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import { makeSelfSignedCert } from '../../server/platform/tls';
import { createLogger } from '../../server/platform/logger';
import { createStreamLeases } from '../../server/window/stream-leases';
import { Answer, call, CallOptions } from './process';
import { HOST_SPECIFIC, MEDIA_SETTINGS, Proc, Proxy, readCompose, readSystemd, startProcess, startProxy } from './deployment';

const REDIS_PASSWORD = 'multi-instance-pw-5e1d';
/** Requests a key may make a minute (the burst's retries stay inside it; the rate test spends it all). */
const RATE_LIMIT = 200;
/** A live event's liveness bound: far above the fallback poll (500 ms) and a heartbeat (15 s). */
const LIVE_MS = 20_000;
const S3 = process.env.MULTI_INSTANCE_MEDIA !== 'shared-disk';
const LISTENING = /listening \(HTTPS\)/;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const describeOnMysql = TEST_DB === 'mysql' ? describe : describe.skip;

describeOnMysql('several instances of deploy/compose.yaml on one MariaDB and one Redis', () => {
  const compose = readCompose();
  let database: TestDatabase;
  let redis: PrivateRedis | undefined;
  let redisPort: number;
  let receiver: Receiver;
  let proxy: Proxy;
  let tlsDir: string;
  let ca: string;
  let env: Record<string, string>;
  const ports = { a: 0, b: 0 };
  const procs: Record<'a' | 'b' | 'worker', Proc | undefined> = { a: undefined, b: undefined, worker: undefined };
  const streams: SseStream[] = [];
  let site: { id: string; key: string; rateKey: string; burstKey: string };
  let stopS3: (() => Promise<void>) | undefined;
  let agent: { email: string; token: string };

  const at = (name: 'a' | 'b' | 'proxy') => ({ port: name === 'proxy' ? proxy.port : ports[name], ca });
  const base = (name: 'a' | 'b') => ({ url: `https://localhost:${ports[name]}`, ca });
  const api = (target: 'a' | 'b' | 'proxy', method: string, p: string, opts: CallOptions = {}) => call(at(target), method, p, { key: site.key, ...opts });
  /** With S3 each instance keeps its own DATA_DIR, as in compose: only the object store is shared. */
  const ownDataDir = (name: string): Record<string, string> => (S3 ? { DATA_DIR: fs.mkdtempSync(path.join(database.dataDir, `${name}-`)) } : {});
  const startServer = async (name: 'a' | 'b') =>
    (procs[name] = await startProcess(name, compose.command(`app-${name}`), { ...env, PORT: String(ports[name]), ...ownDataDir(name) }, LISTENING));
  const startWorker = async () => (procs.worker = await startProcess('worker', compose.command('worker'), env, /delivery worker started/));

  beforeAll(async () => {
    database = await createTestDatabase({ empty: true });
    redisPort = await freePort();
    redis = await startPrivateRedis(redisPort, REDIS_PASSWORD);
    receiver = await startReceiver();
    const tls = await makeSelfSignedCert('localhost');
    ca = tls.cert;
    tlsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'multi-tls-'));
    fs.writeFileSync(path.join(tlsDir, 'tls.crt'), tls.cert);
    fs.writeFileSync(path.join(tlsDir, 'tls.key'), tls.key, { mode: 0o600 });
    ports.a = await freePort();
    ports.b = await freePort();
    proxy = await startProxy(tls, [ports.a, ports.b]);
    const shared = Object.fromEntries(Object.entries(compose.env).filter(([k]) => !HOST_SPECIFIC.includes(k) && (S3 || !MEDIA_SETTINGS.test(k))));
    const media = S3 ? await startS3(compose.env.MEDIA_S3_BUCKET) : undefined;
    stopS3 = media?.stop;
    env = {
      ...shared,
      DATABASE_URL: database.databaseUrl!,
      REDIS_URL: `redis://:${REDIS_PASSWORD}@127.0.0.1:${redisPort}`,
      MASTER_KEY: randomBytes(32).toString('hex'),
      PUBLIC_URL: `https://localhost:${proxy.port}`,
      TLS_CERT_FILE: path.join(tlsDir, 'tls.crt'),
      TLS_KEY_FILE: path.join(tlsDir, 'tls.key'),
      DATA_DIR: database.dataDir,
      ...media?.env,
      ...deliveryEnv(receiver, { timeoutMs: 3000, delaysMs: [500, 1000] }),
      RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT),
      LOG_LEVEL: 'info',
    };

    // The one-shot migration first, as compose runs it before anything else starts.
    const migrate = await startProcess('migrate', compose.command('migrate'), env, /database is/);
    await migrate.exited;
    expect(migrate.child.exitCode).toBe(0);

    const runtime = await openRuntime(loadConfig({ ...env, LOG_LEVEL: 'silent' } as NodeJS.ProcessEnv), { passwordHasher: TEST_HASHER });
    try {
      const s = runtime.services;
      const created = await s.access.createSite('Multi shop');
      const key = async () => (await s.access.createKey(created.id, ALL_SCOPES)).key;
      site = { id: created.id, key: await key(), rateKey: await key(), burstKey: await key() };
      await s.access.setAllowedOrigins(created.id, [ORIGIN]);
      await s.webhooks.setEndpoint(created.id, receiver.url('/multi'), 'message.created');
      for (const email of ['agent@example.com', 'guessed@example.com']) {
        await s.accounts.registry.create(email, PASSWORD);
        await s.accounts.members.add({ manager: null, clientIp: null }, created.id, email, 'agent');
      }
    } finally {
      await runtime.close();
    }
    await startServer('a'); // first: it makes nothing B needs, but two first starts at once would race for nothing
    await startServer('b');
    await startWorker();

    const signIn = await call(at('proxy'), 'POST', '/manage/v1/session', { body: { email: 'agent@example.com', password: PASSWORD }, headers: SAME_ORIGIN });
    expect(signIn.status).toBe(200);
    const cookie = String((signIn.headers['set-cookie'] as string[])[0]).split(';')[0];
    const token = await call(at('proxy'), 'POST', '/manage/v1/tokens', { body: { label: 'drill' }, headers: { ...SAME_ORIGIN, Cookie: cookie } });
    expect(token.status).toBe(201);
    agent = { email: 'agent@example.com', token: (token.json!.data as { token: string }).token };
  }, 240_000);

  afterAll(async () => {
    for (const s of streams) s.close();
    for (const p of Object.values(procs)) await p?.kill('SIGKILL');
    await proxy?.close();
    await receiver?.close();
    await stopPrivateRedis(redis);
    await stopS3?.();
    await database?.drop();
    if (tlsDir) fs.rmSync(tlsDir, { recursive: true, force: true });
  }, 60_000);

  /** A download's status and bytes; a redirect (MEDIA_DOWNLOAD=redirect to the store's presigned URL) is followed once. */
  const download = (port: number, p: string, headers: Record<string, string>) =>
    new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
      const read = (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      };
      https
        .get({ host: 'localhost', port, path: p, headers, ca }, (res) => {
          if (res.statusCode === 302 && res.headers.location?.startsWith('http://')) {
            res.resume();
            http.get(res.headers.location, read).on('error', reject);
          } else read(res);
        })
        .on('error', reject);
    });

  /** A window token from the gateway of `target`, as the host page's loader gets it. */
  async function visitor(target: 'a' | 'b' | 'proxy' = 'proxy') {
    const res = await call(at(target), 'POST', w(site.id, '/token'), { body: {}, headers: { Origin: ORIGIN } });
    expect(res.status).toBe(201);
    return (res.json!.data as { token: string }).token;
  }
  async function visitorSays(token: string, content: string, target: 'a' | 'b' | 'proxy' = 'proxy') {
    const res = await call(at(target), 'POST', w(site.id, '/messages'), {
      body: { content, clientMessageId: `c-${randomBytes(6).toString('hex')}` },
      headers: { ...auth(token), Origin: ORIGIN },
    });
    expect(res.status).toBe(201);
    return (res.json!.data as { conversation: { id: string } }).conversation.id;
  }
  async function windowStream(token: string, on: 'a' | 'b', localAddress?: string) {
    const s = await openSse(base(on), w(site.id, '/events'), { ...auth(token), Origin: ORIGIN }, { localAddress });
    streams.push(s);
    return s;
  }
  const reply = (on: 'a' | 'b' | 'proxy', conversationId: string, content: string, opts: CallOptions = {}) =>
    api(on, 'POST', `/api/v1/conversations/${conversationId}/messages`, { body: { content }, ...opts });

  test('the processes run the commands and settings of deploy/compose.yaml, which the systemd units share', () => {
    for (const [service, entry] of [
      ['app-a', 'dist/server/main.js'],
      ['app-b', 'dist/server/main.js'],
      ['worker', 'dist/server/webhooks/worker-main.js'],
      ['migrate', 'dist/server/db/migrate-main.js'],
    ]) {
      expect(compose.command(service)).toEqual(['node', '--enable-source-maps', entry]);
    }
    for (const [unit, service] of [
      ['chat-server.service', 'app-a'],
      ['chat-worker.service', 'worker'],
      ['chat-migrate.service', 'migrate'],
    ]) {
      const systemd = readSystemd(unit);
      expect(systemd.execStart).toEqual(['/usr/bin/node', ...compose.command(service).slice(1)]);
      // What decides how the processes work together is the same; hosts, secrets and the object store's place are each deployment's own.
      for (const k of Object.keys(compose.env).filter((k) => !HOST_SPECIFIC.includes(k) && !/^MEDIA_S3_/.test(k)))
        expect([k, systemd.env[k]]).toEqual([k, compose.env[k]]);
    }
    expect(env).toMatchObject({ EMBEDDED_WORKER: 'false', TRUST_PROXY: '1', NODE_ENV: 'production' });
  });

  test('a visitor streaming from A sees a reply made on B live', async () => {
    const token = await visitor();
    const conversationId = await visitorSays(token, 'hello from the window');
    const stream = await windowStream(token, 'a');
    await stream.waitFor((e) => e.event === 'ready');
    expect((await reply('b', conversationId, 'answered on B')).status).toBe(201);
    await stream.waitFor((e) => messageContent(e) === 'answered on B', LIVE_MS);
  });

  test("an agent's inbox stream on B sees the visitor typing on A", async () => {
    const token = await visitor('a');
    const conversationId = await visitorSays(token, 'about to type', 'a');
    const inbox = await openSse(base('b'), `/manage/v1/sites/${site.id}/inbox/events`, { Authorization: `Bearer ${agent.token}` });
    streams.push(inbox);
    await inbox.waitFor((e) => e.event === 'ready');
    const typing = await call(at('a'), 'POST', w(site.id, `/conversations/${conversationId}/typing`), {
      body: { typing: true },
      headers: { ...auth(token), Origin: ORIGIN },
    });
    expect(typing.status).toBe(204);
    const e = await inbox.waitFor((x) => x.event === 'conversation.typing', LIVE_MS);
    expect(e.data).toMatchObject({ conversationId, from: 'visitor', typing: true });
  });

  test('a file uploaded through A downloads through B, by the API and by its signed link', async () => {
    const conversationId = await visitorSays(await visitor(), 'send me the file');
    const bytes = randomBytes(48 * 1024);
    const boundary = 'multiinstancefile';
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="content"\r\n\r\nthe file\r\n`),
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="report.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`),
      bytes,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const sent = await api('a', 'POST', `/api/v1/conversations/${conversationId}/messages`, {
      rawBody: body,
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(sent.status).toBe(201);
    const file = (sent.json!.data as { attachments: { id: string; url: string; size: number }[] }).attachments[0];
    expect(file.size).toBe(bytes.length);
    const fromB = await download(ports.b, `/api/v1/media/${file.id}`, { Authorization: `Bearer ${site.key}` });
    expect([fromB.status, fromB.body.equals(bytes)]).toEqual([200, true]);
    const link = new URL(file.url);
    expect(link.origin).toBe(env.PUBLIC_URL);
    const byLink = await download(ports.b, link.pathname + link.search, {});
    expect([byLink.status, byLink.body.equals(bytes)]).toEqual([200, true]);
  });

  test('the rate limit of a key holds across instances: one budget, wherever the requests go', async () => {
    const statuses: number[] = [];
    for (let i = 0; i <= RATE_LIMIT; i++) statuses.push((await api(i % 2 ? 'a' : 'b', 'GET', '/api/v1/conversations?limit=1', { key: site.rateKey })).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(RATE_LIMIT);
    expect(statuses[RATE_LIMIT]).toBe(429);
  });

  test("sign-in throttles hold across instances: an email's 10 guesses in 15 minutes, wherever they land", async () => {
    const guess = (on: 'a' | 'b') =>
      call(at(on), 'POST', '/manage/v1/session', { body: { email: 'guessed@example.com', password: 'not it' }, headers: SAME_ORIGIN });
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await guess(i % 2 ? 'a' : 'b')).status);
    expect(statuses).toEqual([...Array(10).fill(401), 429]);
  });

  test("a visitor's streams over both instances: a sixth ends the oldest, on the other instance", async () => {
    const token = await visitor();
    await visitorSays(token, 'many tabs');
    const order: ('a' | 'b')[] = ['b', 'a', 'b', 'a', 'b'];
    const tabs: SseStream[] = [];
    for (const on of order) {
      const s = await windowStream(token, on);
      await s.waitFor((e) => e.event === 'ready');
      tabs.push(s);
    }
    const sixth = await windowStream(token, 'a');
    expect(sixth.status).toBe(200);
    await waitFor('the oldest tab (on B) to end', async () => await Promise.race([tabs[0].ended.then(() => true), sleep(50).then(() => false)]), LIVE_MS);
    const stillOpen = await Promise.all(tabs.slice(1).map((t) => Promise.race([t.ended.then(() => false), sleep(200).then(() => true)])));
    expect(stillOpen).toEqual([true, true, true, true]);
    for (const t of [...tabs, sixth]) t.close();
  });

  test("an account's inbox streams over both instances: a sixth ends the oldest, on the other instance", async () => {
    const inbox = async (on: 'a' | 'b') => {
      const s = await openSse(base(on), `/manage/v1/sites/${site.id}/inbox/events`, { Authorization: `Bearer ${agent.token}` });
      streams.push(s);
      expect(s.status).toBe(200);
      await s.waitFor((e) => e.event === 'ready');
      return s;
    };
    const tabs: SseStream[] = [];
    for (const on of ['b', 'a', 'b', 'a', 'b'] as const) tabs.push(await inbox(on));
    const sixth = await inbox('a');
    await within(LIVE_MS, 'the oldest inbox stream (on B) to end', tabs[0].ended);
    const stillOpen = await Promise.all(tabs.slice(1).map((t) => Promise.race([t.ended.then(() => false), sleep(200).then(() => true)])));
    expect(stillOpen).toEqual([true, true, true, true]);
    for (const t of [...tabs, sixth]) t.close();
  });

  test('one client address holds 20 streams over both instances, not 20 on each', async () => {
    const tokens: string[] = [];
    for (let i = 0; i < 21; i++) tokens.push(await visitor());
    const opened: SseStream[] = [];
    for (let i = 0; i < 20; i++) {
      const s = await windowStream(tokens[i], i % 2 ? 'a' : 'b', '127.0.0.9');
      expect(s.status).toBe(200);
      await s.waitFor((e) => e.event === 'ready');
      opened.push(s);
    }
    const refused = await windowStream(tokens[20], 'a', '127.0.0.9');
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('10');
    for (const s of opened) s.close();
    // Closed streams give their slots back on every instance.
    await waitFor('a slot to come back', async () => {
      const s = await windowStream(tokens[20], 'a', '127.0.0.9');
      s.close();
      return s.status === 200;
    });
  });

  test('A killed mid-burst, every request retried with its Idempotency-Key: each acknowledged reply exists once and is delivered once', async () => {
    const conversationId = await visitorSays(await visitor(), 'a burst follows');
    const total = 40;
    const acknowledged = new Map<number, Answer>();
    let killed = false;
    const send = async (i: number) => {
      const headers = { 'Idempotency-Key': `burst-${i}` };
      for (let tries = 0; tries < 200; tries++) {
        const res = await reply('proxy', conversationId, `burst ${i}`, { key: site.burstKey, headers, timeoutMs: 30_000 });
        if (res.status === 201 || res.status === 200) return void acknowledged.set(i, res);
        // A dropped connection (502 from the proxy), the killed request's lock (409) until its lease
        // ends (a minute), or the key's budget spent by the retries (429): wait as told and retry.
        expect([0, 409, 429, 502, 503]).toContain(res.status);
        await sleep(res.status === 409 ? 3000 : res.status === 429 ? Number(res.headers['retry-after']) * 1000 : 100);
      }
    };
    const queue = [...Array(total).keys()];
    const lanes = [...Array(4)].map(async () => {
      for (let i = queue.shift(); i !== undefined; i = queue.shift()) {
        await send(i);
        if (!killed && acknowledged.size >= 10) {
          killed = true;
          await procs.a!.kill('SIGKILL');
        }
      }
    });
    try {
      await Promise.all(lanes);
    } finally {
      if (killed) await startServer('a'); // the tests after this one use A again
    }
    expect(killed).toBe(true);
    expect(acknowledged.size).toBe(total);

    const listed = await api('b', 'GET', `/api/v1/conversations/${conversationId}/messages?limit=100`);
    const contents = (listed.json!.data as { id: string; content: string }[]).map((m) => m.content).filter((c) => c.startsWith('burst '));
    expect(contents.sort()).toEqual([...Array(total).keys()].map((i) => `burst ${i}`).sort());
    const ids = new Set([...acknowledged.values()].map((a) => (a.json!.data as { id: string }).id));
    expect(ids.size).toBe(total); // a replay answers the first answer's message

    const deliveredOf = () => receiver.at('/multi').filter((r) => String(r.json.data.message?.content ?? '').startsWith('burst '));
    await waitFor('every reply of the burst delivered', () => new Set(deliveredOf().map((r) => r.json.data.message!.id)).size === total, 60_000);
    await sleep(1500); // a second delivery, if one were coming, would be an attempt after the first
    const perMessage = new Map<string, number>();
    for (const r of deliveredOf()) perMessage.set(String(r.json.data.message!.id), (perMessage.get(String(r.json.data.message!.id)) ?? 0) + 1);
    expect([...perMessage.values()].every((n) => n === 1)).toBe(true);
    expect(new Set(perMessage.keys())).toEqual(ids);
  }, 240_000);

  test('the worker killed mid-delivery and restarted: nothing lost, only attempts in flight at the kill delivered twice', async () => {
    const conversationId = await visitorSays(await visitor(), 'deliveries follow');
    const total = 20;
    // The receiver takes its time, so that attempts are in flight when the worker dies.
    receiver.on('/multi', (_req, res) => setTimeout(() => res.writeHead(200).end('ok'), 300));
    for (let i = 0; i < total; i++) expect((await reply(i % 2 ? 'a' : 'b', conversationId, `worker ${i}`)).status).toBe(201);
    const deliveredOf = () => receiver.at('/multi').filter((r) => String(r.json.data.message?.content ?? '').startsWith('worker '));
    await waitFor('a first delivery', () => deliveredOf().length > 0, 30_000);
    await procs.worker!.kill('SIGKILL');
    await sleep(500);
    // Whatever reached the receiver before this came from the killed worker (its last bytes included).
    const restartedAt = Date.now();
    await startWorker();
    await waitFor('every reply delivered after the restart', () => new Set(deliveredOf().map((r) => r.json.id)).size === total, 90_000);
    const firstSeen = new Map<string, number>();
    const times = new Map<string, number>();
    for (const r of deliveredOf()) {
      times.set(r.json.id, (times.get(r.json.id) ?? 0) + 1);
      if (!firstSeen.has(r.json.id)) firstSeen.set(r.json.id, r.at);
    }
    const twice = [...times].filter(([, n]) => n > 1).map(([id]) => id);
    // At least once: only an event the killed worker had sent (whose answer it never recorded) comes again.
    expect(twice.filter((id) => firstSeen.get(id)! >= restartedAt)).toEqual([]);
    expect([...times.values()].every((n) => n <= 2)).toBe(true);
    process.stdout.write(`worker killed: ${total} events, ${twice.length} delivered twice (in flight at the kill)\n`);
    receiver.on('/multi', (_req, res) => res.writeHead(200).end('ok'));
  }, 180_000);

  test('Redis killed: live updates fall back to polling and catch up, nothing lost; back again, live through Redis', async () => {
    const token = await visitor();
    const conversationId = await visitorSays(token, 'before Redis dies');
    const stream = await windowStream(token, 'a');
    await stream.waitFor((e) => e.event === 'ready');
    await stopPrivateRedis(redis);
    redis = undefined;
    for (let i = 0; i < 3; i++) expect((await reply('b', conversationId, `while Redis is dead ${i}`)).status).toBe(201);
    for (let i = 0; i < 3; i++) await stream.waitFor((e) => messageContent(e) === `while Redis is dead ${i}`, LIVE_MS);
    // Streams are counted per instance meanwhile: a new one opens.
    const during = await windowStream(await visitor('b'), 'b');
    expect(during.status).toBe(200);
    redis = await startPrivateRedis(redisPort, REDIS_PASSWORD);
    await waitFor(
      'a reply on B to reach the stream on A again',
      async () => {
        const content = `after Redis returned ${Date.now()}`;
        expect((await reply('b', conversationId, content)).status).toBe(201);
        await stream.waitFor((e) => messageContent(e) === content, LIVE_MS);
        return true;
      },
      LIVE_MS,
    );
    const contents = stream.events.map(messageContent).filter(Boolean);
    expect(new Set(contents).size).toBe(contents.length); // nothing twice on the stream
  }, 120_000);

  test("a killed instance's streams stop counting once their leases lapse (the shared count, on this Redis)", async () => {
    const url = `redis://:${REDIS_PASSWORD}@127.0.0.1:${redisPort}`;
    const logger = createLogger('silent');
    const prefix = `drill-${randomBytes(4).toString('hex')}:`;
    const dead = createStreamLeases({ redisUrl: url, leaseMs: 400, logger, prefix });
    const alive = createStreamLeases({ redisUrl: url, leaseMs: 400, logger, prefix });
    const limits = { perHolder: 5, perClientIp: 2 };
    const d = dead.kind('window');
    const l = alive.kind('window');
    await waitFor('Redis', async () => (await d.admit({ id: d.newId(Date.now()), holderKey: 'h1', clientIpKey: 'ip' }, limits, Date.now())) !== null);
    expect(await d.admit({ id: d.newId(Date.now()), holderKey: 'h2', clientIpKey: 'ip' }, limits, Date.now())).toEqual({ accept: true, replace: null });
    await dead.close(); // killed: its two streams are never released nor renewed
    expect(await l.admit({ id: l.newId(Date.now()), holderKey: 'h3', clientIpKey: 'ip' }, limits, Date.now())).toEqual({ accept: false });
    await sleep(500);
    expect(await l.admit({ id: l.newId(Date.now()), holderKey: 'h3', clientIpKey: 'ip' }, limits, Date.now())).toEqual({ accept: true, replace: null });
    await alive.close();
  });
});

/**
 * An s3rver on a free port with the compose file's bucket, and the settings that point the instances
 * at it (s3rver checks no signature: any credentials do).
 */
async function startS3(bucket: string): Promise<{ env: Record<string, string>; stop(): Promise<void> }> {
  // A dev dependency, loaded only when the drill uses it.
  const S3rver = require('s3rver') as new (opts: object) => { run(): Promise<unknown>; close(): Promise<void> };
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'multi-s3-'));
  const port = await freePort();
  const server = new S3rver({ port, address: '127.0.0.1', silent: true, directory, configureBuckets: [{ name: bucket }] });
  await server.run();
  return {
    env: { MEDIA_S3_ENDPOINT: `http://127.0.0.1:${port}`, AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' },
    stop: async () => {
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
