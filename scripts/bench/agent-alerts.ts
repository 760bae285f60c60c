/**
 * Agents told of waiting visitors: a burst of 1,000 visitor messages (10 conversations of 100) while
 * a site's 3 members are away, then the scheduled checks of those conversations once their wait ran
 * out. The row counts the emails queued against the messages: the batched number (one email of a
 * conversation to a member per 15 minutes), not one per message.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import type { BenchContext } from './context';
import type { BenchRow } from './measure';
import { createDatabase } from './delivery';

const MESSAGES = 1_000;
const CONVERSATIONS = 10;
const MEMBERS = 3;

export async function runAgentAlertsPart(ctx: BenchContext, engine: 'mysql' | 'sqlite'): Promise<BenchRow> {
  const database = engine === 'mysql' ? await createDatabase(ctx.options.mysqlServerUrl) : undefined;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-bench-alerts-'));
  // The burst is written 20 minutes in the past, so every wait has run out when the checks run.
  let offset = -20 * 60_000;
  const runtime = await openRuntime(loadConfig({ DATA_DIR: dataDir, DATABASE_URL: database?.url ?? '', LOG_LEVEL: 'silent', NODE_ENV: 'production' }), {
    now: () => Date.now() + offset,
  });
  try {
    const s = runtime.services;
    const siteId = (await s.access.createSite('Alerts bench')).id;
    for (let i = 0; i < MEMBERS; i++) {
      const email = `member${i}@bench.test`;
      await s.accounts.registry.create(email, 'a bench passphrase');
      await s.accounts.members.add({ manager: null, clientIp: null }, siteId, email, i === 0 ? 'owner' : 'agent');
    }
    ctx.log(`agent alerts (${engine}): ${MESSAGES} visitor messages in ${CONVERSATIONS} conversations, ${MEMBERS} members away`);
    const started = Date.now();
    for (let i = 0; i < MESSAGES; i++) await s.window.chat.visitorSay(siteId, `visitor-${i % CONVERSATIONS}`, `message ${i}: is anyone there?`);
    const burstMs = Date.now() - started;
    const afterBurst = Number((await runtime.db('emails').count({ n: '*' }))[0].n);
    offset = 0;
    const checks: { conversation_id: string }[] = await runtime.db('agent_alert_checks').select('conversation_id');
    for (const c of checks) await s.agentAlerts.service.check(siteId, c.conversation_id);
    const total = Number((await runtime.db('emails').count({ n: '*' }))[0].n);
    return {
      what: `agent alerts (${engine === 'mysql' ? 'MariaDB' : 'SQLite'}): emails queued for ${MESSAGES.toLocaleString('en-US')} visitor messages in ${CONVERSATIONS} conversations, ${MEMBERS} members away`,
      value: total,
      unit: 'emails',
      baseline: MESSAGES,
      ratio: total / MESSAGES,
      note: `${afterBurst} at the starts, ${total - afterBurst} by the checks after the wait; one per conversation and member per 15 min would be ${2 * CONVERSATIONS * MEMBERS}; burst took ${burstMs} ms`,
    };
  } finally {
    await runtime.close();
    await database?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
