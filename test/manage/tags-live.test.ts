/**
 * A change of the site's tags reaches every member's inbox stream (issue 25, item 6, live): adding,
 * renaming and deleting a tag are one site-level feed row each (no conversation behind it), sent to
 * every member whoever made the change (an owner through the API, the operator through the CLI),
 * replayed exactly on a resume after a cut, and written in the change's transaction (a refused
 * change records nothing). The real app over HTTPS, both engines.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { listenHttps } from '../helpers/harness';
import { openSse, SseEvent, SseStream } from '../window/helpers';
import { M, manageHarness, newMember, SAME_ORIGIN, signIn } from './helpers';
import { parseArgs } from '../../server/cli/args';
import { commands as CLI } from '../../server/cli/commands';

let h: Harness;
let server: { url: string; ca: string; close(): Promise<void> };
let site: string;
let owner: { id: string; cookie: string };
let agent: { id: string; cookie: string };
const streams: SseStream[] = [];

beforeAll(async () => {
  h = await manageHarness();
  site = h.site.id;
  const o = await newMember(h, site, 'owner@example.com', 'owner');
  const a = await newMember(h, site, 'agent@example.com', 'agent');
  owner = { id: o.id, cookie: (await signIn(h, 'owner@example.com')).cookie };
  agent = { id: a.id, cookie: (await signIn(h, 'agent@example.com')).cookie };
  server = await listenHttps(h.app);
}, 60_000);
afterEach(() => {
  for (const s of streams.splice(0)) s.close();
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

async function stream(cookie: string, lastEventId?: string) {
  const headers: Record<string, string> = { Cookie: cookie };
  if (lastEventId) headers['Last-Event-ID'] = lastEventId;
  const s = await openSse(server, `${M}/sites/${site}/inbox/events`, headers);
  streams.push(s);
  await s.waitFor((e) => e.event === 'ready');
  return s;
}
const send = (method: 'post' | 'patch' | 'delete' | 'put', rest: string, cookie: string, body?: object) => {
  const r = request(h.app)[method](`${M}/sites/${site}${rest}`).set(SAME_ORIGIN).set('Cookie', cookie);
  return body ? r.send(body) : r;
};
const cli = async (name: string, ...argv: string[]) => (await CLI[name].run(h.runtime, parseArgs(argv, CLI[name].options))).json;
const tagEvents = (s: SseStream) => s.events.filter((e) => e.event.startsWith('tag.'));
const siteRows = () => h.runtime.db('inbox_activity').where({ site_id: site }).whereNull('conversation_id');

describe('live changes of the site tags', () => {
  test('add, rename and delete reach every member as one event each, with who made them', async () => {
    const agentStream = await stream(agent.cookie);
    const ownerStream = await stream(owner.cookie);
    const conv = (await h.visitorSay(site, 'tags-live-1', 'please tag me')).conversation.id;
    const created = await send('post', '/tags', owner.cookie, { name: 'Billing' });
    expect(created.status).toBe(201);
    const tag = created.body.data;
    expect((await send('put', `/inbox/conversations/${conv}/tags/${tag.id}`, agent.cookie)).status).toBe(200);
    const renamed = await send('patch', `/tags/${tag.id}`, owner.cookie, { name: 'Invoices' });
    expect(renamed.status).toBe(200);
    expect((await send('delete', `/tags/${tag.id}`, owner.cookie)).status).toBe(204);

    for (const s of [agentStream, ownerStream]) {
      await s.waitFor((e) => e.event === 'tag.deleted');
      expect(tagEvents(s).map((e) => [e.event, e.data])).toEqual([
        ['tag.created', { tag, by: owner.id }],
        ['tag.renamed', { tag: { ...tag, name: 'Invoices' }, by: owner.id }],
        ['tag.deleted', { tag: { id: tag.id, name: 'Invoices' }, by: owner.id }],
      ]);
    }
    // One row per change of the list, however many conversations carry the tag; none names a conversation.
    const rows = await siteRows().andWhere('kind', 'like', 'tag.%').orderBy('position');
    expect(rows.map((r: { kind: string; account_id: string }) => [r.kind, r.account_id])).toEqual([
      ['tag.created', owner.id],
      ['tag.renamed', owner.id],
      ['tag.deleted', owner.id],
    ]);
    // In the feed's order with the conversation's events: the tagging comes before the rename.
    const order = agentStream.events.filter((e) => e.event !== 'ready').map((e) => e.event);
    expect(order.indexOf('conversation.tagged')).toBeLessThan(order.indexOf('tag.renamed'));
  });

  test('a refused change records nothing; the operator CLI records its changes with no member', async () => {
    const s = await stream(agent.cookie);
    const before = Number((await siteRows().count({ n: '*' }).first())!.n);
    const a = (await send('post', '/tags', owner.cookie, { name: 'Refunds' })).body.data;
    // A taken name, an agent renaming, an unknown tag: refused, nothing in the feed.
    expect((await send('post', '/tags', owner.cookie, { name: 'refunds' })).status).toBe(409);
    expect((await send('patch', `/tags/${a.id}`, agent.cookie, { name: 'Mine' })).status).toBe(403);
    expect((await send('delete', '/tags/tag_01jd8x3r5k0000000000000000', owner.cookie)).status).toBe(404);
    expect(Number((await siteRows().count({ n: '*' }).first())!.n)).toBe(before + 1);

    await cli('tag rename', '--site', site, '--tag', a.id, '--name', 'Refunds (CLI)');
    await cli('tag remove', '--site', site, '--tag', a.id);
    // Run in this process here; from the CLI's own process the hub's poll of the feed brings them.
    await s.waitFor((e) => e.event === 'tag.deleted' && (e.data as { tag: { id: string } }).tag.id === a.id);
    expect(tagEvents(s).map((e) => [e.event, e.data])).toEqual([
      ['tag.created', { tag: a, by: owner.id }],
      ['tag.renamed', { tag: { ...a, name: 'Refunds (CLI)' }, by: null }],
      ['tag.deleted', { tag: { id: a.id, name: 'Refunds (CLI)' }, by: null }],
    ]);
  });

  test('resume after a cut: the tag changes missed are replayed, once, in order', async () => {
    const first = await stream(owner.cookie);
    const a = (await send('post', '/tags', owner.cookie, { name: 'Shipping' })).body.data;
    const last = await first.waitFor((e) => e.event === 'tag.created' && (e.data as { tag: { id: string } }).tag.id === a.id);
    first.close();
    // While nobody listens: a rename, a conversation's message, a deletion.
    await send('patch', `/tags/${a.id}`, owner.cookie, { name: 'Delivery' });
    await h.visitorSay(site, 'tags-live-2', 'where is my parcel');
    await send('delete', `/tags/${a.id}`, owner.cookie);

    const resumed = await stream(agent.cookie, last.id!);
    await resumed.waitFor((e) => e.event === 'tag.deleted');
    const b = (await send('post', '/tags', owner.cookie, { name: 'After' })).body.data;
    await resumed.waitFor((e) => e.event === 'tag.created');
    const got: SseEvent[] = resumed.events.filter((e) => e.event !== 'ready');
    expect(got.map((e) => e.event)).toEqual(['tag.renamed', 'message.created', 'conversation.started', 'tag.deleted', 'tag.created']);
    expect(got[0].data).toEqual({ tag: { ...a, name: 'Delivery' }, by: owner.id });
    expect(got[3].data).toEqual({ tag: { id: a.id, name: 'Delivery' }, by: owner.id });
    expect((got[4].data as { tag: { id: string } }).tag.id).toBe(b.id);
    expect(new Set(got.map((e) => e.id)).size).toBe(got.length);
    expect(Number(got[0].id)).toBe(Number(last.id) + 1);
  });
});
