/**
 * What the chat window's two hot requests send to the database, counted with Knex's `query` events
 * as test/inbox/feed-order.test.ts counts a reply's: a visitor's message (the panel's POST with a
 * window token and a clientMessageId), which runs the agents' alerts step in its transaction
 * (server/agent-alerts/service.ts), and the availability the panel asks once a minute. A statement
 * added to either fails here; what they cost is measured by `npm run bench -- --parts=visitor`
 * (scripts/bench/visitor.ts, docs/performance.md "The visitor's message and availability").
 */
import request from 'supertest';
import { Harness } from '../helpers/harness';
import { manageHarness, newMember } from '../manage/helpers';
import { allowOrigins, auth, getToken, w } from './helpers';

let h: Harness;
const sites: Record<'all' | 'none', string> = { all: '', none: '' };

beforeAll(async () => {
  h = await manageHarness();
  const alerts = h.runtime.services.agentAlerts.service;
  for (const mode of ['all', 'none'] as const) {
    sites[mode] = (await h.newSite(`statements ${mode}`)).id;
    await allowOrigins(h, sites[mode]);
    // Three members away from the inbox (no live stream of theirs), as in the bench's rows.
    for (let i = 0; i < 3; i++) {
      const email = `m${i}-${mode}@statements.test`;
      const account = await newMember(h, sites[mode], email, i === 0 ? 'owner' : 'agent');
      await alerts.setSetting({ manager: { accountId: account.id, email, via: 'session' }, clientIp: null }, sites[mode], { mode, waitMinutes: 5 });
    }
  }
}, 60_000);
afterAll(() => h.close());

/** Each statement as `verb table` (BEGIN and COMMIT as they are), in the order sent. */
async function statementsOf(run: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const listener = (q: { sql: string }) => seen.push(q.sql);
  h.runtime.db.on('query', listener);
  try {
    await run();
  } finally {
    h.runtime.db.off('query', listener);
  }
  return seen.map((sql) => {
    const text = sql.replace(/[`"]/g, '').trim();
    const verb = text.split(/\s+/)[0].toLowerCase().replace(/;$/, '');
    const table = /\b(?:from|into|update)\s+([a-z_]+)/i.exec(text)?.[1];
    return table ? `${verb} ${table}` : verb;
  });
}

let n = 0;
async function send(siteId: string, token: string) {
  const res = await request(h.app)
    .post(w(siteId, '/messages'))
    .set(auth(token))
    .send({ content: `message ${n}`, clientMessageId: `statements-${n++}` });
  expect([200, 201]).toContain(res.status);
  return res;
}

/** The message path before and after the step, in its transaction; `alerts` is what the step sends. */
const laterMessage = (alerts: string[]) => [
  'select sites', // the entry: the token against the site's settings
  'select window_client_messages', // a resend is answered before anything is written
  'begin',
  'select window_client_messages',
  'select conversations', // the visitor's open conversation
  'select conversations', // locked for the append
  'insert messages',
  'update conversations',
  'insert search_entries',
  'insert events', // message.created
  'select webhook_endpoints',
  ...alerts,
  'insert window_client_messages',
  'update inbox_positions', // the site's feed position, last in the transaction
  'insert inbox_activity',
  'commit',
];

test("a conversation's later message: the alerts step reads the members, and the check when one is scheduled", async () => {
  const all = (await getToken(h.app, sites.all)).token;
  const none = (await getToken(h.app, sites.none)).token;
  await send(sites.all, all);
  await send(sites.none, none);
  // The check's row is there since the first message and due earlier: read, left as it is.
  expect(await statementsOf(() => send(sites.all, all))).toEqual(laterMessage(['select memberships', 'select agent_alert_checks']));
  // `none` schedules nothing: the members' read alone.
  expect(await statementsOf(() => send(sites.none, none))).toEqual(laterMessage(['select memberships']));
});

test("a conversation's first message: one email for each of the 3 away members, their marks, and the check", async () => {
  // Another visitor wrote first, so the site's feed counter exists (its first change makes it).
  await send(sites.all, (await getToken(h.app, sites.all)).token);
  const { token } = await getToken(h.app, sites.all);
  expect(await statementsOf(() => send(sites.all, token))).toEqual([
    'select sites',
    'select window_client_messages',
    'begin',
    'select window_client_messages',
    'select conversations',
    'insert conversations',
    'insert messages',
    'update conversations',
    'insert search_entries',
    'select visitors', // the visitor's name in the search entry
    'insert search_entries',
    'insert events', // message.created
    'select webhook_endpoints',
    'insert events', // conversation.started
    'select webhook_endpoints',
    // The alerts step: members, then the emails of the start (presence is in process here, no statement).
    'select memberships',
    'select sites',
    'select messages',
    'insert emails',
    'insert emails',
    'insert emails',
    'insert agent_alerts_sent',
    'select agent_alert_checks',
    'insert agent_alert_checks',
    'insert window_client_messages',
    'update inbox_positions',
    'insert inbox_activity',
    'update inbox_positions',
    'insert inbox_activity',
    'commit',
  ]);
});

test('availability: the site, its hours and the visitor, three reads without a transaction', async () => {
  const { token } = await getToken(h.app, sites.all);
  const res = await statementsOf(async () => expect((await request(h.app).get(w(sites.all, '/availability')).set(auth(token))).status).toBe(200));
  expect(res).toEqual(['select sites', 'select site_business_hours', 'select visitors']);
});
