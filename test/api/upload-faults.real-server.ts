/**
 * The real server process (server/main.ts) on its own DATA_DIR and database (TEST_DB), with raw TLS
 * sockets to send what no well-behaved client library sends: bodies cut off, connections dropped.
 * Shared by the upload and download fault drills.
 */
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import https from 'node:https';
import { loadConfig } from '../../server/config';
import { openRuntime, Runtime } from '../../server/runtime';
import type { Scope } from '../../server/access/scopes';
import type { IncomingFile } from '../../server/media/service';
import { createTestDatabase, TestDatabase } from '../helpers/db';
import { freePort, spawnTs, Spawned } from '../helpers/spawn';

export interface RealServer {
  port: number;
  ca: Buffer;
  dataDir: string;
  database: TestDatabase;
  process: Spawned;
  site: { id: string; writeKey: string; readKey: string; conversationId: string; attachment?: { id: string; url: string; size: number } };
  otherSiteConversationId: string;
  stop(): Promise<void>;
}

/**
 * Prepares a site (keys, a conversation, optionally a file) through the services in this process,
 * and whatever `prepare` adds (on the clock `now`, when given), closes that connection, then starts
 * the server on the same DATA_DIR and database.
 */
export async function startRealServer(
  opts: { env?: Record<string, string>; file?: IncomingFile; now?: () => number; prepare?: (runtime: Runtime) => Promise<void> } = {},
): Promise<RealServer> {
  const database = await createTestDatabase();
  let child: Spawned | undefined;
  try {
    const config = loadConfig({ DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl, LOG_LEVEL: 'silent', ...opts.env } as NodeJS.ProcessEnv);
    const runtime = await openRuntime(config, { now: opts.now });
    let site: RealServer['site'];
    let otherSiteConversationId: string;
    try {
      const { access } = runtime.services;
      const chat = runtime.services.window.chat;
      const s = await access.createSite('Fault drill site');
      const writeKey = (await access.createKey(s.id, ['conversations:read', 'conversations:write', 'media:read'] as Scope[])).key;
      const readKey = (await access.createKey(s.id, ['conversations:read', 'media:read'] as Scope[])).key;
      const said = await chat.visitorSay(s.id, 'v-faults', 'hello', opts.file ? { files: [opts.file] } : {});
      site = { id: s.id, writeKey, readKey, conversationId: said.conversation.id, attachment: said.message.attachments[0] };
      const other = await access.createSite('Another site');
      otherSiteConversationId = (await chat.visitorSay(other.id, 'v-other', 'not yours')).conversation.id;
      await opts.prepare?.(runtime);
    } finally {
      await runtime.close();
    }
    const port = await freePort();
    child = spawnTs('server/main.ts', [], {
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.databaseUrl ?? '',
      PORT: String(port),
      NODE_ENV: '',
      LOG_LEVEL: 'info',
      EMBEDDED_WORKER: 'false',
      ...opts.env,
    });
    await child.waitFor(/listening \(HTTPS\)/, 45_000);
    const ca = fs.readFileSync(path.join(database.dataDir, 'tls/localhost.crt'));
    const spawned = child;
    return {
      port,
      ca,
      dataDir: database.dataDir,
      database,
      process: spawned,
      site,
      otherSiteConversationId,
      stop: async () => {
        await spawned.kill();
        await database.drop();
      },
    };
  } catch (err) {
    if (child) await child.kill();
    await database.drop();
    throw err;
  }
}

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
  json(): { data?: Record<string, unknown>; error?: { code: string; message: string } };
}

/** An ordinary HTTPS request (Node's client), for checks that the server still serves. */
export function request(server: RealServer, method: string, p: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', servername: 'localhost', port: server.port, path: p, method, ca: server.ca, headers, agent: false, timeout: 15_000 },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve(answer(res.statusCode!, res.headers as Record<string, string>, text)));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${p}: no answer in 15 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

function answer(status: number, headers: Record<string, string>, body: string): Answer {
  return { status, headers, body, json: () => JSON.parse(body) };
}

/** A raw TLS connection: write bytes as they are, read the first answer as it comes. */
export interface RawConnection {
  socket: tls.TLSSocket;
  write(bytes: Buffer | string): Promise<void>;
  /** The first answer, once it is whole; rejects if the connection closes or `timeoutMs` passes first. */
  answer(timeoutMs?: number): Promise<Answer>;
  closed(): Promise<void>;
}

export function connectRaw(server: RealServer): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', servername: 'localhost', port: server.port, ca: server.ca }, () => {
      let received = Buffer.alloc(0);
      let parsed: Answer | null = null;
      const waiters: (() => void)[] = [];
      const closed = new Promise<void>((r) => socket.once('close', () => r()));
      socket.on('data', (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        const end = received.indexOf('\r\n\r\n');
        if (parsed || end < 0) return;
        const [statusLine, ...lines] = received.subarray(0, end).toString('latin1').split('\r\n');
        const headers: Record<string, string> = {};
        for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
        const length = Number(headers['content-length'] ?? 0);
        if (received.length - end - 4 < length) return;
        parsed = answer(Number(statusLine.split(' ')[1]), headers, received.subarray(end + 4, end + 4 + length).toString('utf8'));
        waiters.splice(0).forEach((w) => w());
      });
      socket.on('error', () => undefined); // a reset after the answer is part of the drills
      resolve({
        socket,
        write: (bytes) =>
          new Promise<void>((done, fail) => {
            socket.write(bytes, (err) => (err ? fail(err) : done()));
          }),
        answer: (timeoutMs = 15_000) =>
          new Promise<Answer>((done, fail) => {
            const timer = setTimeout(() => fail(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
            const settle = () => {
              clearTimeout(timer);
              if (parsed) done(parsed);
              else fail(new Error(`connection closed without an answer: ${received.toString('latin1').slice(0, 200)}`));
            };
            if (parsed) return settle();
            waiters.push(settle);
            void closed.then(settle);
          }),
        closed: () => closed,
      });
    });
    socket.once('error', reject);
  });
}

/** Open descriptors of the server process whose target starts with `prefix` (deleted files too). */
export function openDescriptorsUnder(server: RealServer, prefix: string): string[] {
  const pid = server.process.child.pid!;
  const found: string[] = [];
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target.startsWith(prefix)) found.push(target);
    } catch {
      // closed while we looked
    }
  }
  return found;
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
