/**
 * The service's CPU per API reply with an Idempotency-Key, one reply at a time: a figure that a
 * loaded machine hardly moves, unlike a rate (the service's own user + system time from /proc over
 * N sequential replies, the client in this process). Each log level runs its own service on a
 * fresh database, at `info` with its access log on a pipe as under a process manager.
 *
 *   tsx scripts/bench/reply-cpu.ts [--engine=mysql|sqlite] [--replies=2000] [--warmup=300] [--levels=silent,info] [--rounds=3] [--builds=dist,other]
 *
 * Runs dist/ (`npm run build`), as the bench does; `--builds` names several builds (a copy of an
 * earlier dist/ under `.bench/`, which git ignores and `npm run build` leaves alone, inside the
 * repository so that it finds node_modules) and runs every build and level
 * once per round, in turn, so a change of the machine's load between them is shared. MariaDB at
 * BENCH_MYSQL_URL (default mysql://root@127.0.0.1:3306).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import knex from 'knex';
import { API_BASE, REPO_ROOT, serviceEnv } from './processes';
import { median, processCpuMs } from './measure';

const arg = (name: string, fallback: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const engine = arg('engine', 'mysql');
const replies = Number(arg('replies', '2000'));
const warmup = Number(arg('warmup', '300'));
const rounds = Number(arg('rounds', '3'));
const levels = arg('levels', 'silent,info').split(',');
const builds = arg('builds', 'dist').split(',');
const mysqlUrl = process.env.BENCH_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';

function admin(build: string, env: NodeJS.ProcessEnv, args: string[]): Record<string, unknown> {
  const entry = path.resolve(REPO_ROOT, build, 'server/cli/admin.js');
  return JSON.parse(execFileSync(process.execPath, [entry, ...args, '--json'], { cwd: REPO_ROOT, env, encoding: 'utf8' })) as Record<string, unknown>;
}

function healthy(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    https
      .get(`${url}/healthz`, { rejectUnauthorized: false, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      })
      .on('error', () => resolve(false));
  });
}

/** The service of one build, its access log (at `info`) read from a pipe and dropped, as a process manager would keep it. */
async function startBuild(build: string, env: NodeJS.ProcessEnv, port: number) {
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, path.resolve(REPO_ROOT, build, 'server/main.js')], {
    cwd: REPO_ROOT,
    env: { ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.resume();
  child.stderr.resume();
  const url = `https://127.0.0.1:${port}`;
  for (let i = 0; !(await healthy(url)); i++) {
    if (child.exitCode !== null || i > 600) throw new Error(`${build} did not start`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  return { pid: child.pid!, url, stop };
}

function post(agent: https.Agent, url: string, headers: Record<string, string>, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface Contender {
  name: string;
  pid: number;
  one(n: number): Promise<void>;
  close(): Promise<void>;
}

/** A fresh database with a site, a key and 8 open conversations, and the build's service on it at `level`. */
async function prepare(build: string, level: string, port: number): Promise<Contender> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reply-cpu-'));
  const dbName = `chat_reply_cpu_${randomBytes(4).toString('hex')}`;
  const databaseUrl = engine === 'mysql' ? `${mysqlUrl}/${dbName}` : undefined;
  const root = engine === 'mysql' ? knex({ client: 'mysql2', connection: mysqlUrl }) : undefined;
  const cleanup = async () => {
    if (root) {
      await root.raw(`DROP DATABASE IF EXISTS \`${dbName}\``);
      await root.destroy();
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  if (root) await root.raw(`CREATE DATABASE \`${dbName}\``);
  const env = { ...serviceEnv({ databaseUrl, dataDir, port: 0 }), LOG_LEVEL: level };
  try {
    const site = admin(build, env, ['site', 'create', '--name', 'reply cpu']) as { id: string };
    const key = (admin(build, env, ['key', 'create', '--site', site.id, '--scopes', 'conversations:read,conversations:write']) as { key: string }).key;
    const conversations: string[] = [];
    for (let i = 0; i < 8; i++) {
      const said = admin(build, env, ['visitor', 'say', '--site', site.id, '--visitor', `v-${i}`, '--content', 'hello']) as { conversation: { id: string } };
      conversations.push(said.conversation.id);
    }
    const service = await startBuild(build, env, port);
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
    const run = randomBytes(4).toString('hex');
    return {
      name: `${build} ${level}`,
      pid: service.pid,
      async one(n: number) {
        const status = await post(
          agent,
          `${service.url}${API_BASE}/conversations/${conversations[n % conversations.length]}/messages`,
          { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': `cpu-${run}-${n}` },
          JSON.stringify({ content: `reply ${n}` }),
        );
        if (status !== 201) throw new Error(`reply ${n}: HTTP ${status}`);
      },
      async close() {
        agent.destroy();
        await service.stop();
        await cleanup();
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

async function main() {
  const basePort = 20_000 + Math.floor(Math.random() * 10_000);
  const contenders: Contender[] = [];
  try {
    for (const build of builds) for (const level of levels) contenders.push(await prepare(build, level, basePort + contenders.length));
    for (const c of contenders) for (let n = 0; n < warmup; n++) await c.one(n);
    const results = new Map<Contender, number[]>(contenders.map((c) => [c, []]));
    let next = warmup;
    for (let r = 0; r < rounds; r++) {
      for (const c of contenders) {
        const before = processCpuMs(c.pid)!;
        for (let n = 0; n < replies; n++) await c.one(next++);
        results.get(c)!.push((processCpuMs(c.pid)! - before) / replies);
      }
    }
    for (const [c, perRound] of results) {
      console.log(
        `${engine} ${c.name} (pid ${c.pid}): CPU ms per reply, rounds ${perRound.map((x) => x.toFixed(3)).join(' / ')}, median ${median(perRound).toFixed(3)}`,
      );
    }
  } finally {
    for (const c of contenders) await c.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
