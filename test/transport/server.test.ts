/**
 * The real server process (`npm start` = tsx server/main.ts) over real HTTPS: self-signed
 * certificate on first start, no plaintext listener, the demo site, the first owner's setup link, Swagger UI, graceful SIGTERM.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import https from 'node:https';
import http from 'node:http';
import tls from 'node:tls';
import { freePort, spawnTs, Spawned } from '../helpers/spawn';
import { TEST_DB } from '../helpers/db';

const onSqlite = TEST_DB === 'sqlite' ? describe : describe.skip; // `npm start` is the embedded-SQLite path

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function get(port: number, ca: string, p: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: 'localhost', port, path: p, ca, headers }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

onSqlite('npm start on an empty DATA_DIR', () => {
  let dataDir: string;
  let port: number;
  let server: Spawned;
  let key: string;
  let ca: string;

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-start-'));
    port = await freePort();
    server = spawnTs('server/main.ts', [], {
      DATA_DIR: dataDir,
      PORT: String(port),
      DATABASE_URL: '',
      NODE_ENV: '',
      LOG_LEVEL: 'info',
      EMBEDDED_WORKER: 'false',
    });
    key = (await server.waitFor(/Demo API key \(shown once, keep it\): (wck_\w+)/))[1];
    await server.waitFor(/listening \(HTTPS\)/);
    ca = fs.readFileSync(path.join(dataDir, 'tls/localhost.crt'), 'utf8');
  }, 60_000);

  afterAll(async () => {
    if (server.child.exitCode === null) {
      server.child.kill('SIGKILL');
      await server.exited();
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('generates a self-signed certificate under DATA_DIR and says where it is', () => {
    expect(fs.existsSync(path.join(dataDir, 'tls/localhost.key'))).toBe(true);
    expect(server.stdout()).toContain(path.join(dataDir, 'tls/localhost.crt'));
    expect(fs.statSync(path.join(dataDir, 'tls/localhost.key')).mode & 0o077).toBe(0);
  });

  test('the demo key opens every operation of the demo site over HTTPS', async () => {
    const auth = { Authorization: `Bearer ${key}` };
    const list = await get(port, ca, '/api/v1/conversations', auth);
    expect(list.status).toBe(200);
    const conversations = JSON.parse(list.body).data;
    expect(conversations.length).toBeGreaterThanOrEqual(3);
    expect(conversations.some((c: { state: string }) => c.state === 'closed')).toBe(true);
    let attachmentUrl: string | undefined;
    for (const c of conversations) {
      const msgs = JSON.parse((await get(port, ca, `/api/v1/conversations/${c.id}/messages`, auth)).body).data;
      for (const m of msgs) if (m.attachments.length) attachmentUrl = m.attachments[0].url;
    }
    expect(attachmentUrl).toBeDefined();
    const link = new URL(attachmentUrl!);
    const file = await get(port, ca, link.pathname + link.search);
    expect(file.status).toBe(200);
    expect(file.headers['content-type']).toBe('image/png');
  });

  test('the key is printed once and never logged', () => {
    const occurrences = (server.stdout() + server.stderr()).split(key).length - 1;
    expect(occurrences).toBe(1);
  });

  test('there is no plaintext listener: HTTP on the port gets no HTTP answer', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/healthz', timeout: 3000 }, (res) => resolve(`status ${res.statusCode}`));
      req.on('error', (e) => resolve(`error ${e.message}`));
      req.on('timeout', () => {
        req.destroy();
        resolve('timeout');
      });
    });
    expect(outcome).not.toMatch(/^status 2/);
  });

  /** Sends raw bytes over TLS and returns everything the server wrote before it closed. */
  const raw = (bytes: string) =>
    new Promise<string>((resolve, reject) => {
      let received = '';
      const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca }, () => socket.write(bytes));
      socket.setEncoding('utf8');
      socket.on('data', (d) => (received += d));
      socket.on('close', () => resolve(received));
      socket.on('error', reject);
      socket.setTimeout(10_000, () => socket.destroy(new Error('no answer in 10 s')));
    });

  test.each([
    ['no Host header', 'GET /api/v1/conversations HTTP/1.1\r\n\r\n', 400],
    ['a malformed request line', 'GET /x y z HTTP/9\r\nHost: localhost\r\n\r\n', 400],
    ['a header without a colon', 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nbroken header\r\n\r\n', 400],
    ['an unknown Expect', 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nExpect: something\r\n\r\n', 417],
  ])('what the HTTP parser refuses (%s) is answered in the envelope, then closed', async (_what, bytes, status) => {
    const answer = await raw(bytes);
    expect(answer).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    expect(body.error.code).toBe('invalid_request');
    expect(typeof body.error.message).toBe('string');
  });

  test('the first start prints a one-time setup link; it makes the owner of the demo site', async () => {
    const [, url, token] = await server.waitFor(/(https:\/\/localhost:\d+\/dashboard\/setup)#token=([0-9A-Za-z]{43})/);
    expect(url).toBe(`https://localhost:${port}/dashboard/setup`);
    const body = JSON.stringify({ token, email: 'first@example.com', password: 'correct horse battery staple' });
    const made = await new Promise<Answer>((resolve, reject) => {
      const req = https.request(
        {
          host: 'localhost',
          port,
          path: '/manage/v1/setup',
          method: 'POST',
          ca,
          headers: { 'Content-Type': 'application/json', 'Sec-Fetch-Site': 'same-origin' },
        },
        (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(made.status).toBe(201);
    expect(String(made.headers['set-cookie'])).toMatch(/^__Host-session=/);
    const sites = JSON.parse(made.body).data.sites;
    expect(sites).toEqual([expect.objectContaining({ name: 'Demo site', role: 'owner' })]);
  }, 30_000);

  test('Swagger UI and the document are served', async () => {
    const page = await get(port, ca, '/docs/');
    expect(page.status).toBe(200);
    expect(page.body).toContain('swagger-ui-bundle.js');
    expect((await get(port, ca, '/docs/swagger-ui-bundle.js')).status).toBe(200);
    const json = JSON.parse((await get(port, ca, '/openapi.json')).body);
    expect(json.openapi).toBe('3.1.0');
    expect((await get(port, ca, '/openapi.yaml')).body).toMatch(/^openapi: 3\.1\.0/);
  });

  test('a second start does not seed again nor print a key', async () => {
    const port2 = await freePort();
    const again = spawnTs('server/main.ts', [], { DATA_DIR: dataDir, PORT: String(port2), DATABASE_URL: '', LOG_LEVEL: 'info', EMBEDDED_WORKER: 'false' });
    try {
      await again.waitFor(/listening \(HTTPS\)/);
      expect(again.stdout()).not.toContain('Demo API key');
      // An account exists (the setup link above made it): no new link.
      expect(again.stdout()).not.toContain('/dashboard/setup');
    } finally {
      again.child.kill('SIGTERM');
      await again.exited();
    }
  });

  test('SIGTERM lets an in-flight request finish, then exits 0', async () => {
    const auth = { Authorization: `Bearer ${key}` };
    const conv = JSON.parse((await get(port, ca, '/api/v1/conversations?state=open&limit=1', auth)).body).data[0];
    const answer = new Promise<Answer>((resolve, reject) => {
      const req = https.request(
        {
          host: 'localhost',
          port,
          path: `/api/v1/conversations/${conv.id}/messages`,
          method: 'POST',
          ca,
          headers: { ...auth, 'Content-Type': 'application/json' },
        },
        (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        },
      );
      req.on('error', reject);
      req.write('{"content": "sent across a shutdown');
      setTimeout(() => {
        server.child.kill('SIGTERM');
        setTimeout(() => req.end('"}'), 500);
      }, 300);
    });
    const res = await answer;
    expect(res.status).toBe(201);
    expect(await server.exited()).toBe(0);
    expect(server.stdout()).toMatch(/stopped/);
  });
});

onSqlite('production mode', () => {
  test('does not create a demo site', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-prod-'));
    const port = await freePort();
    const server = spawnTs('server/main.ts', [], {
      DATA_DIR: dataDir,
      PORT: String(port),
      NODE_ENV: 'production',
      DATABASE_URL: '',
      LOG_LEVEL: 'info',
      EMBEDDED_WORKER: 'false',
    });
    try {
      await server.waitFor(/listening \(HTTPS\)/);
      expect(server.stdout()).not.toContain('Demo API key');
      // No demo site, but no account either: the first owner's setup link is printed all the same.
      expect(server.stdout()).toMatch(/\/dashboard\/setup#token=[0-9A-Za-z]{43}/);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
