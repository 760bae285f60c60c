/**
 * "A script can do through /manage/v1 with a management token everything the CLI does": the table
 * in docs/manage.md ("Everything the CLI does, with a management token") walked row by row. Every
 * CLI command is in the table, every operation it names is in openapi/manage.yaml, and for each
 * command with operations a case calls them (by operationId, with the document's method and path)
 * with a management token and checks the effect as the CLI sees it: its own commands, run in this
 * process on the same database. Both engines.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import YAML from 'yaml';
import type { Harness } from '../helpers/harness';
import { M, manageHarness, memberWithToken, newAccount, PASSWORD, SAME_ORIGIN } from './helpers';
import { deliveryEnv, answer, Receiver, startReceiver, waitFor, workerPool } from '../webhooks/helpers';
import { parseArgs } from '../../server/cli/args';
import { commands as CLI } from '../../server/cli/commands';
import { decrypt } from '../../server/platform/crypto';
import { SWITCH_SETTLE_MS } from '../../server/webhooks/address-rules';

const root = path.resolve(__dirname, '../..');
interface Row {
  command: string;
  operations: string[];
}

/** The table's rows: the command (its first two words) and the operationIds named in parentheses. */
function tableRows(): Row[] {
  const doc = fs.readFileSync(path.join(root, 'docs/manage.md'), 'utf8');
  const section = doc.split('## Everything the CLI does, with a management token')[1]?.split('\n## ')[0];
  if (!section) throw new Error('docs/manage.md has no CLI table');
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [, first, rest] = /^\| `([^`]+)`[^|]*\|(.*)\|\s*$/.exec(line)!;
      return {
        command: first.split(' ').slice(0, 2).join(' '),
        operations: [...new Set([...rest.matchAll(/\(([a-z]+[A-Z][A-Za-z]*)\)/g)].map((m) => m[1]))],
      };
    });
}

/** operationId to its method and path template, from the document. */
function documentOperations(): Record<string, { method: string; path: string }> {
  const doc = YAML.parse(fs.readFileSync(path.join(root, 'openapi/manage.yaml'), 'utf8'));
  const out: Record<string, { method: string; path: string }> = {};
  for (const [p, ops] of Object.entries<Record<string, { operationId?: string }>>(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) if (op.operationId) out[op.operationId] = { method, path: p };
  }
  return out;
}

const rows = tableRows();
const OPS = documentOperations();

let h: Harness;
let receiver: Receiver;
const pool = workerPool(() => h);
let site: string;
let owner: { id: string; token: string };
const called = new Set<string>();

beforeAll(async () => {
  receiver = await startReceiver();
  h = await manageHarness({ env: deliveryEnv(receiver, { delaysMs: [50] }), onEvents: () => pool.wake() });
  site = h.site.id;
  owner = await memberWithToken(h, site, 'owner@example.com', 'owner');
  pool.start();
});
afterAll(async () => {
  await pool.stopAll();
  await h.close();
  await receiver.close();
});

interface Call {
  params?: Record<string, string>;
  query?: Record<string, string>;
  body?: object;
  /** Without the management token (accepting an invitation as a new person): a same-origin page. */
  anonymous?: boolean;
}

/** The operation `operationId` as the document defines it, with the owner's management token. */
async function op(operationId: string, c: Call = {}) {
  const def = OPS[operationId];
  if (!def) throw new Error(`no operation ${operationId} in manage.yaml`);
  called.add(operationId);
  const filled = def.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = name === 'siteId' ? (c.params?.siteId ?? site) : c.params?.[name];
    if (v === undefined) throw new Error(`${operationId} needs ${name}`);
    return encodeURIComponent(v);
  });
  const query = c.query ? `?${new URLSearchParams(c.query)}` : '';
  let r = request(h.app)[def.method as 'get'](`${M}${filled}${query}`);
  r = c.anonymous ? r.set(SAME_ORIGIN) : r.set('Authorization', `Bearer ${owner.token}`);
  const res = await (c.body ? r.send(c.body) : r);
  if (res.status >= 400) throw new Error(`${operationId} answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res;
}

/** A CLI command run in this process on the same database, as `npm run admin -- <name> ...args --json` does. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function cli(name: string, ...argv: string[]): Promise<any> {
  return (await CLI[name].run(h.runtime, parseArgs(argv, CLI[name].options))).json;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const cliSite = async (id: string): Promise<any> => ((await cli('site list')).sites as { id: string }[]).find((s) => s.id === id);
const endpointRow = () => h.runtime.db('webhook_endpoints').where({ site_id: site }).first();
const open = (sealed: string) => decrypt(h.runtime.services.keys.webhookSecrets, sealed);

async function ensureAddress(pathname = '/parity') {
  await op('setEventAddress', { body: { url: receiver.url(pathname), events: ['message.created'] } });
}

/** A visitor's message whose message.created reached `outcome`; its event id. */
async function deliveredEvent(visitor: string, outcome: 'delivered' | 'failed' = 'delivered') {
  const said = await h.visitorSay(site, visitor, `hello from ${visitor}`);
  const { id } = await h.runtime.db('events').where({ conversation_id: said.conversation.id, name: 'message.created' }).first('id');
  await waitFor(`${id} ${outcome}`, async () => (await h.runtime.db('deliveries').where({ event_id: id }).first('status'))?.status === outcome);
  return id as string;
}

const cases: Record<string, () => Promise<void>> = {
  'site create': async () => {
    const made = await op('createSite', { body: { name: 'Parity shop' } });
    expect(await cliSite(made.body.data.id)).toMatchObject({ id: made.body.data.id, name: 'Parity shop' });
  },

  'site list': async () => {
    const mine = (await op('listMySites')).body.data as { id: string }[];
    expect(mine.map((s) => s.id)).toContain(site);
    for (const s of mine) {
      const one = (await op('getSite', { params: { siteId: s.id } })).body.data;
      const visitorFiles = (await op('getVisitorFiles', { params: { siteId: s.id } })).body.data;
      expect({ ...one, visitorFiles }).toEqual(await cliSite(s.id));
    }
  },

  'site update': async () => {
    const siteId = (await op('createSite', { body: { name: 'Parity settings' } })).body.data.id;
    const params = { siteId };
    await op('replaceAllowedOrigins', { params, body: { origins: ['https://shop.example', 'https://www.shop.example'] } });
    const first = (await op('updateSite', { params, body: { identityMode: 'optional' } })).body.data.identitySecret;
    const rotated = (await op('rotateIdentitySecret', { params })).body.data.identitySecret;
    expect(rotated).not.toBe(first);
    await op('updateVisitorFiles', { params, body: { enabled: true, types: ['image/*', 'application/pdf'] } });
    expect(await cliSite(siteId)).toMatchObject({
      allowedOrigins: ['https://shop.example', 'https://www.shop.example'],
      identityMode: 'optional',
      identitySecretSet: true,
      visitorFiles: { enabled: true, types: ['image/*', 'application/pdf'] },
    });
    // The secret in force is the rotated one, as after the CLI's `--identity-secret rotate`.
    const access = await h.runtime.services.access.windowAccess(siteId, 'https://shop.example', 'v');
    expect(access!.identitySecret()).toBe(rotated);
    await op('updateVisitorFiles', { params, body: { enabled: false } });
    expect((await cliSite(siteId)).visitorFiles).toEqual({ enabled: false, types: ['image/*', 'application/pdf'] });
  },

  'key create': async () => {
    const made = (await op('createKey', { body: { label: 'parity', scopes: ['conversations:read'] } })).body.data;
    const listed = (await cli('key list', '--site', site)).keys as { id: string; scopes: string[] }[];
    expect(listed.find((k) => k.id === made.id)).toMatchObject({ scopes: ['conversations:read'], label: 'parity' });
    expect((await request(h.app).get('/api/v1/conversations').set('Authorization', `Bearer ${made.key}`)).status).toBe(200);
  },

  'key list': async () => {
    await cli('key create', '--site', site, '--scopes', 'media:read', '--label', 'by the CLI');
    const listed = (await op('listKeys', { query: { limit: '100' } })).body.data as { id: string }[];
    const byCli = (await cli('key list', '--site', site)).keys as { id: string }[];
    expect(listed.map((k) => k.id).sort()).toEqual(byCli.map((k) => k.id).sort());
  },

  'key revoke': async () => {
    const made = await cli('key create', '--site', site, '--scopes', 'conversations:read');
    await op('revokeKey', { params: { keyId: made.id } });
    const listed = (await cli('key list', '--site', site)).keys as { id: string; revokedAt: string | null }[];
    expect(listed.find((k) => k.id === made.id)!.revokedAt).not.toBeNull();
    expect((await request(h.app).get('/api/v1/conversations').set('Authorization', `Bearer ${made.key}`)).status).toBe(401);
  },

  'visitor revoke': async () => {
    const one = (await op('revokeVisitors', { body: { visitorId: 'v-parity' } })).body.data;
    expect(one).toMatchObject({ siteId: site, visitorId: 'v-parity' });
    const access = h.runtime.services.access;
    expect((await access.windowAccess(site, '', 'v-parity'))!.revokedBefore).toBe(Date.parse(one.revokedBefore));
    const all = (await op('revokeVisitors', { body: { all: true } })).body.data;
    expect(all.visitorId).toBeNull();
    expect((await access.windowAccess(site, '', 'someone-else'))!.revokedBefore).toBeGreaterThanOrEqual(Date.parse(all.revokedBefore));
  },

  'visitor delete': async () => {
    const viaApi = (await h.visitorSay(site, 'v-delete-api', 'erase me')).conversation.id;
    const viaCli = (await h.visitorSay(site, 'v-delete-cli', 'erase me too')).conversation.id;
    const api = (await op('deleteVisitorData', { body: { visitorId: 'v-delete-api' } })).body.data;
    const byCli = await cli('visitor delete', '--site', site, '--visitor', 'v-delete-cli');
    for (const [r, visitorId] of [
      [api, 'v-delete-api'],
      [byCli, 'v-delete-cli'],
    ])
      expect(r).toMatchObject({ siteId: site, visitorId, removed: { conversations: 1, messages: 1 } });
    expect(await h.runtime.db('conversations').whereIn('id', [viaApi, viaCli])).toEqual([]);
  },

  'agent say': async () => {
    const viaApi = (await h.visitorSay(site, 'v-agent-api', 'help?')).conversation.id;
    const reply = (await op('replyFromInbox', { params: { conversationId: viaApi }, body: { content: 'On it.' } })).body.data;
    const viaCli = (await h.visitorSay(site, 'v-agent-cli', 'help?')).conversation.id;
    const cliReply = (await cli('agent say', '--conversation', viaCli, '--content', 'On it.')).message;
    for (const m of [reply, cliReply]) expect(m).toMatchObject({ direction: 'outgoing', origin: 'messenger', content: 'On it.' });
    expect(reply.authorId).toBe(owner.id);
    // Both emitted message.created, and the public API lists the reply like the CLI's.
    for (const m of [reply, cliReply]) expect(await h.runtime.db('events').where({ message_id: m.id, name: 'message.created' }).first('id')).toBeDefined();
    const listed = await request(h.app).get(`/api/v1/conversations/${viaApi}/messages`).set('Authorization', `Bearer ${h.site.key}`);
    expect(listed.body.data.map((m: { id: string }) => m.id)).toContain(reply.id);
  },

  'site hours': async () => {
    const week = {
      mon: [['09:00', '17:00']],
      tue: [['09:00', '17:00']],
      wed: [],
      thu: [],
      fri: [
        ['10:00', '12:00'],
        ['13:00', '16:00'],
      ],
      sat: [],
      sun: [],
    };
    const set = { enabled: true, timeZone: 'Europe/Berlin', week, awayMessage: 'Back on Monday.' };
    const byApi = (await op('updateBusinessHours', { body: set })).body.data;
    expect(await cli('site hours', '--site', site)).toEqual(byApi);
    const byCli = await cli('site hours', '--site', site, '--time-zone', 'America/New_York', '--week', 'mon-fri 08:00-18:00', '--away-message', 'Later.');
    expect((await op('getBusinessHours')).body.data).toEqual(byCli);
    expect(byCli).toMatchObject({ timeZone: 'America/New_York', awayMessage: 'Later.', week: { mon: [['08:00', '18:00']], sat: [] } });
    // The switch alone keeps the hours; the API reads what the CLI set.
    const apiOnly = await cli('site hours', '--site', site, '--away-when-no-agent-online', 'no');
    expect(apiOnly).toEqual({ ...byCli, awayWhenNoAgentOnline: false });
    expect((await op('getBusinessHours')).body.data).toEqual(apiOnly);
  },

  'tag list': async () => {
    await op('createTag', { body: { name: 'Listed by both' } });
    const api = (await op('listTags')).body.data;
    expect((await cli('tag list', '--site', site)).tags).toEqual(api);
  },

  'tag add': async () => {
    const api = (await op('createTag', { body: { name: 'Made by API' } })).body.data;
    const byCli = await cli('tag add', '--site', site, '--name', 'Made by CLI');
    const names = ((await cli('tag list', '--site', site)).tags as { id: string; name: string }[]).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining([api.name, byCli.name]));
  },

  'tag rename': async () => {
    const one = await cli('tag add', '--site', site, '--name', 'Old API name');
    const two = await cli('tag add', '--site', site, '--name', 'Old CLI name');
    await op('renameTag', { params: { tagId: one.id }, body: { name: 'New API name' } });
    await cli('tag rename', '--site', site, '--tag', two.id, '--name', 'New CLI name');
    const tags = (await cli('tag list', '--site', site)).tags as { id: string; name: string }[];
    expect(tags.filter((t) => t.id === one.id || t.id === two.id).map((t) => t.name)).toEqual(['New API name', 'New CLI name']);
  },

  'tag remove': async () => {
    const one = await cli('tag add', '--site', site, '--name', 'Gone by API');
    const two = await cli('tag add', '--site', site, '--name', 'Gone by CLI');
    await op('deleteTag', { params: { tagId: one.id } });
    await cli('tag remove', '--site', site, '--tag', two.id);
    const ids = ((await cli('tag list', '--site', site)).tags as { id: string }[]).map((t) => t.id);
    expect(ids).not.toContain(one.id);
    expect(ids).not.toContain(two.id);
  },

  'shared-reply list': async () => {
    await op('createSharedReply', { body: { title: 'Listed by both', body: 'Hello {visitor.name|there}.' } });
    const api = (await op('listSharedReplies')).body.data;
    expect((await cli('shared-reply list', '--site', site)).replies).toEqual(api);
  },

  'shared-reply add': async () => {
    const api = (await op('createSharedReply', { body: { title: 'Made by API', body: 'One.' } })).body.data;
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cli-reply-')), 'body.md');
    fs.writeFileSync(file, 'Two lines,\n**kept** as written.');
    const byCli = await cli('shared-reply add', '--site', site, '--title', 'Made by CLI', '--body-file', file);
    const listed = (await op('listSharedReplies')).body.data as { id: string; title: string; body: string; createdBy: string | null }[];
    expect(listed.find((r) => r.id === byCli.id)).toEqual(byCli);
    expect(byCli).toMatchObject({ body: 'Two lines,\n**kept** as written.', createdBy: null });
    expect(listed.map((r) => r.id)).toContain(api.id);
    // The same rules: a title the site has (without regard to case) is refused by both.
    await expect(cli('shared-reply add', '--site', site, '--title', 'made by api', '--body', 'x')).rejects.toMatchObject({ code: 'conflict' });
  },

  'shared-reply edit': async () => {
    const one = await cli('shared-reply add', '--site', site, '--title', 'Old API title', '--body', 'a');
    const two = await cli('shared-reply add', '--site', site, '--title', 'Old CLI title', '--body', 'b');
    await op('updateSharedReply', { params: { replyId: one.id }, body: { title: 'New API title' } });
    await cli('shared-reply edit', '--site', site, '--reply', two.id, '--body', 'b, changed');
    const listed = (await cli('shared-reply list', '--site', site)).replies as { id: string; title: string; body: string }[];
    expect(listed.filter((r) => r.id === one.id || r.id === two.id).map((r) => [r.title, r.body])).toEqual([
      ['New API title', 'a'],
      ['Old CLI title', 'b, changed'],
    ]);
  },

  'shared-reply remove': async () => {
    const one = await cli('shared-reply add', '--site', site, '--title', 'Gone by API', '--body', 'a');
    const two = await cli('shared-reply add', '--site', site, '--title', 'Gone by CLI', '--body', 'b');
    await op('deleteSharedReply', { params: { replyId: one.id } });
    await cli('shared-reply remove', '--site', site, '--reply', two.id);
    const ids = ((await op('listSharedReplies')).body.data as { id: string }[]).map((r) => r.id);
    expect(ids).not.toContain(one.id);
    expect(ids).not.toContain(two.id);
  },

  'shared-reply import': async () => {
    const api = (await op('importSharedReplies', { body: { replies: [{ title: 'Imported by API', body: 'a' }] } })).body.data;
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cli-import-')), 'replies.json');
    fs.writeFileSync(
      file,
      JSON.stringify([
        { title: 'Imported by CLI', body: 'b' },
        { title: 'imported BY api', body: 'c' },
      ]),
    );
    const byCli = await cli('shared-reply import', '--site', site, '--file', file);
    expect(api.imported.map((r: { title: string }) => r.title)).toEqual(['Imported by API']);
    expect(byCli.imported.map((r: { title: string }) => r.title)).toEqual(['Imported by CLI']);
    expect(byCli.skipped).toEqual([expect.objectContaining({ title: 'imported BY api', reason: 'duplicate' })]);
  },

  'account create': async () => {
    const invited = (await op('createInvitation', { body: { email: 'new-person@example.com', role: 'agent' } })).body.data;
    await op('acceptInvitation', { anonymous: true, body: { token: invited.token, email: 'new-person@example.com', password: PASSWORD } });
    const accounts = (await cli('account list')).accounts as { email: string; sites: { id: string; role: string }[] }[];
    expect(accounts.find((a) => a.email === 'new-person@example.com')!.sites).toEqual([expect.objectContaining({ id: site, role: 'agent' })]);
  },

  'account list': async () => {
    const me = (await op('getMe')).body.data;
    const members = (await op('listMembers')).body.data as { accountId: string; email: string; role: string }[];
    const accounts = (await cli('account list')).accounts as { id: string; email: string; sites: { id: string; role: string }[] }[];
    expect(accounts.find((a) => a.id === me.account.id)!.email).toBe(me.account.email);
    for (const m of members) {
      const a = accounts.find((x) => x.id === m.accountId)!;
      expect(a.email).toBe(m.email);
      expect(a.sites).toContainEqual(expect.objectContaining({ id: site, role: m.role }));
    }
    // And the CLI's list of this site's members is the API's.
    const onSite = accounts.filter((a) => a.sites.some((s) => s.id === site)).map((a) => a.id);
    expect(members.map((m) => m.accountId).sort()).toEqual(onSite.sort());
  },

  'member add': async () => {
    const existing = await newAccount(h, 'existing-person@example.com');
    const invited = (await op('createInvitation', { body: { email: existing.email, role: 'agent' } })).body.data;
    await op('acceptInvitation', { anonymous: true, body: { token: invited.token, email: existing.email, password: PASSWORD } });
    const role = async () =>
      ((await cli('account list')).accounts as { id: string; sites: { id: string; role: string }[] }[])
        .find((a) => a.id === existing.id)!
        .sites.find((s) => s.id === site)?.role;
    expect(await role()).toBe('agent');
    await op('changeMemberRole', { params: { accountId: existing.id }, body: { role: 'owner' } });
    expect(await role()).toBe('owner');
  },

  'webhook set': async () => {
    const set = await op('setEventAddress', { body: { url: receiver.url('/parity'), events: ['message.created', 'conversation.closed'] } });
    const row = await endpointRow();
    expect(row).toMatchObject({ url: receiver.url('/parity'), events: 'message.created,conversation.closed' });
    if (set.status === 201) expect(open(row.secret_encrypted)).toBe(set.body.data.secret);
  },

  'webhook rotate-secret': async () => {
    await ensureAddress();
    const rotated = (await op('rotateEventSecret')).body.data;
    expect(open((await endpointRow()).secret_encrypted)).toBe(rotated.secret);
  },

  'webhook roll-secret': async () => {
    await ensureAddress();
    await op('rotateEventSecret'); // no roll pending
    const rolled = (await op('rollEventSecret', { body: { switchInHours: 48 } })).body.data;
    const row = await endpointRow();
    expect(open(row.secret_next_encrypted)).toBe(rolled.secret);
    expect(Number(row.secret_switch_at)).toBe(Date.parse(rolled.switchAt));
  },

  'webhook switch-secret': async () => {
    await ensureAddress();
    await op('rotateEventSecret');
    await cli('webhook roll-secret', '--site', site);
    const before = Date.now();
    const switched = (await op('switchEventSecret')).body.data;
    const after = Date.now();
    expect(Number((await endpointRow()).secret_switch_at)).toBe(Date.parse(switched.switchAt));
    // The switch comes SWITCH_SETTLE_MS after the call's now, not at the roll's planned time (48 h away).
    expect(Date.parse(switched.switchAt)).toBeGreaterThanOrEqual(before + SWITCH_SETTLE_MS);
    expect(Date.parse(switched.switchAt)).toBeLessThanOrEqual(after + SWITCH_SETTLE_MS);
  },

  'webhook cancel-roll': async () => {
    await ensureAddress();
    await op('rotateEventSecret');
    const current = (await endpointRow()).secret_encrypted;
    await cli('webhook roll-secret', '--site', site);
    expect((await op('cancelEventSecretRoll')).body.data.secretRoll).toBeNull();
    const row = await endpointRow();
    expect(row.secret_next_encrypted).toBeNull();
    expect(row.secret_encrypted).toBe(current);
  },

  'webhook deliveries': async () => {
    await ensureAddress();
    await op('rotateEventSecret'); // whatever the cases before left pending
    const eventId = await deliveredEvent('v-deliveries');
    const listed = (await op('listDeliveries', { query: { event: 'message.created', limit: '100' } })).body.data as { eventId: string; outcome: string }[];
    expect(listed.find((d) => d.eventId === eventId)?.outcome).toBe('delivered');
    const detail = (await op('getDelivery', { params: { eventId } })).body.data;
    const byCli = ((await cli('webhook deliveries', '--site', site, '--event', eventId)).deliveries as { attempt: number; status: number }[]).map((a) => [
      a.attempt,
      a.status,
    ]);
    expect(detail.attempts.map((a: { attempt: number; status: number }) => [a.attempt, a.status])).toEqual(byCli.reverse());
  },

  'webhook redeliver': async () => {
    await ensureAddress();
    // --event E
    const eventId = await deliveredEvent('v-redeliver');
    await op('redeliverDelivery', { params: { eventId } });
    await waitFor('the second attempt', async () =>
      ((await cli('webhook deliveries', '--site', site, '--event', eventId)).deliveries as { attempt: number }[]).some((a) => a.attempt === 2),
    );
    // --failed-since T: a delivery that failed, counted, then sent again once the receiver is back.
    const since = new Date(Date.now() - 1000).toISOString();
    receiver.on('/parity-down', answer(500, 'down'));
    await ensureAddress('/parity-down');
    const failed = await deliveredEvent('v-recover', 'failed');
    expect((await op('countRecoverableDeliveries', { query: { since } })).body.data.failed).toBeGreaterThanOrEqual(1);
    await ensureAddress('/parity');
    expect((await op('recoverDeliveries', { body: { since } })).body.data.eventIds).toContain(failed);
    await waitFor('the recovered delivery', async () =>
      ((await cli('webhook deliveries', '--site', site, '--event', failed)).deliveries as { status: number | null }[]).some((a) => a.status === 200),
    );
  },
};

test('every CLI command is in the table once, and every operation named there is in the document', () => {
  const commands = rows.map((r) => r.command);
  expect(new Set(commands).size).toBe(commands.length);
  expect([...commands].sort()).toEqual(Object.keys(CLI).sort());
  const unknown = rows.flatMap((r) => r.operations).filter((id) => !OPS[id]);
  expect(unknown).toEqual([]);
  // Bootstrap commands are the only ones without an operation.
  expect(rows.filter((r) => r.operations.length === 0).map((r) => r.command)).toEqual(['visitor say', 'setup link']);
});

describe.each(rows.filter((r) => r.operations.length > 0).map((r) => [r.command, r] as const))('%s', (_command, row) => {
  test(`through /manage/v1 with a management token: ${row.operations.join(', ')}`, async () => {
    const run = cases[row.command];
    expect(run).toBeDefined();
    called.clear();
    await run();
    expect(row.operations.filter((id) => !called.has(id))).toEqual([]);
  });
});
