/**
 * Account display names (issue 25, DECISIONS "The inbox in depth"): an account sets and clears
 * its own (`PATCH /me`: trimmed, at most 80 characters, no control or invisible characters), the
 * members list shows it, and the chat window's API names a reply by it unless the site turns
 * agents' names off (`setAgentNames`), then by the site's name, as it does replies no member wrote.
 * The real app, response validation on, both engines.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { countStatements } from '../helpers/held-statements';
import { manageHarness, memberWithToken, withToken } from './helpers';
import { allowOrigins, auth, getToken, ORIGIN, w } from '../window/helpers';

let h: Harness;
let owner: { id: string; token: string };
let agent: { id: string; token: string };
let outsider: { id: string; token: string };
let siteName: string;

type Method = Parameters<typeof withToken>[2];
const as = (who: { token: string }, method: Method, path: string, body?: object) => withToken(h, who, method, path, body);
const setName = (who: { token: string }, displayName: string | null) => as(who, 'patch', '/me', { displayName });

beforeAll(async () => {
  h = await manageHarness();
  await allowOrigins(h, h.site.id);
  siteName = (await h.runtime.services.access.getSite(h.site.id)).name;
  owner = await memberWithToken(h, h.site.id, 'olga.owner@example.com', 'owner');
  agent = await memberWithToken(h, h.site.id, 'anna@example.com', 'agent');
  const other = await h.newSite('Other');
  outsider = await memberWithToken(h, other.id, 'outsider@example.com', 'owner');
});
afterAll(() => h.close());

test('an account sets its display name (trimmed) and clears it; members lists show it, or the email’s local part', async () => {
  const set = await setName(agent, '  Anna   from Acme  ');
  expect(set.status).toBe(200);
  expect(set.body.data.account).toMatchObject({ id: agent.id, displayName: 'Anna   from Acme', name: 'Anna   from Acme' });
  expect(set.body.data.sites).toEqual([expect.objectContaining({ id: h.site.id, role: 'agent' })]);
  expect((await as(agent, 'get', '/me')).body.data.account.displayName).toBe('Anna   from Acme');

  const members = (await as(owner, 'get', `/sites/${h.site.id}/members`)).body.data as { email: string; displayName: string | null; name: string }[];
  expect(members.map((m) => [m.email, m.displayName, m.name])).toEqual([
    ['olga.owner@example.com', null, 'olga.owner'],
    ['anna@example.com', 'Anna   from Acme', 'Anna   from Acme'],
  ]);

  for (const cleared of [null, '', '   ']) {
    await setName(agent, 'Someone');
    const res = await setName(agent, cleared);
    expect(res.status).toBe(200);
    expect(res.body.data.account).toMatchObject({ displayName: null, name: 'anna' });
  }
  // Signed in by session, the same account reads it the same way.
  expect((await setName(agent, 'Anna')).body.data.account.name).toBe('Anna');
});

test('a display name is one line of at most 80 characters without control or invisible characters (400, the field named)', async () => {
  const refused: [string, unknown][] = [
    ['81 characters', 'x'.repeat(81)],
    ['81 code points of emoji', '😀'.repeat(81)],
    ['a line break', 'Anna\nSupport'],
    ['a tab', 'Anna\tSupport'],
    ['a bell', 'Anna\u0007'],
    ['a bidi override', 'Anna \u202Etroppus'],
    ['a zero-width space', 'An\u200Bna'],
    ['a line separator', 'An\u2028na'],
    ['a number', 42],
    ['missing', undefined],
  ];
  for (const [what, displayName] of refused) {
    const res = await as(agent, 'patch', '/me', displayName === undefined ? {} : { displayName });
    expect([what, res.status, res.body.error?.code]).toEqual([what, 400, 'invalid_request']);
  }
  const named = await setName(agent, 'x'.repeat(82) + '\u202E');
  expect(named.body.error.details).toEqual([expect.objectContaining({ path: '/body/displayName' })]);
  // Exactly 80, surrounded by spaces; emoji joined with ZWJ; accents composed.
  expect((await setName(agent, `  ${'😀'.repeat(80)}  `)).body.data.account.displayName).toBe('😀'.repeat(80));
  expect((await setName(agent, 'Anna 👩‍💻')).body.data.account.displayName).toBe('Anna 👩‍💻');
  expect((await setName(agent, 'Rene\u0301')).body.data.account.displayName).toBe('René');
  // Without a credential: 401; the change is the caller's own, nobody else's.
  expect((await request(h.app).patch('/manage/v1/me').set('Sec-Fetch-Site', 'same-origin').send({ displayName: 'x' })).status).toBe(401);
  await setName(agent, 'Anna');
});

describe('the chat window names replies', () => {
  let visitor: { token: string; visitorId: string };
  let conv: string;
  const windowMessages = async () => {
    const res = await request(h.app)
      .get(w(h.site.id, `/conversations/${conv}/messages?limit=100`))
      .set(auth(visitor.token))
      .set('Origin', ORIGIN);
    expect(res.status).toBe(200);
    return (res.body.data as { content: string; authorName: string | null }[]).map((m) => [m.content, m.authorName]);
  };
  const feedMessages = async () => {
    const res = await request(h.app).get(w(h.site.id, '/events/poll?lastEventId=start')).set(auth(visitor.token)).set('Origin', ORIGIN);
    expect(res.status).toBe(200);
    return (res.body.data as { event: string; data: { message?: { content: string; authorName: string | null } } }[])
      .filter((e) => e.event === 'message')
      .map((e) => [e.data.message!.content, e.data.message!.authorName]);
  };
  const reply = (who: { token: string }, content: string) =>
    as(who, 'post', `/sites/${h.site.id}/inbox/conversations/${conv}/messages`, { content }).then((r) => expect(r.status).toBe(201));

  beforeAll(async () => {
    const t = await getToken(h.app, h.site.id);
    visitor = { token: t.token, visitorId: t.visitorId };
    const sent = await request(h.app)
      .post(w(h.site.id, '/messages'))
      .set(auth(visitor.token))
      .set('Origin', ORIGIN)
      .send({ content: 'Hello?', clientMessageId: 'c-1' });
    expect(sent.status).toBe(201);
    expect(sent.body.data.message.authorName).toBeNull(); // the visitor's own
    conv = sent.body.data.conversation.id;
    await reply(agent, 'Hi, Anna here');
    await reply(owner, 'And Olga');
    // An integration through the public API: no member wrote it.
    const api = await request(h.app)
      .post(`/api/v1/conversations/${conv}/messages`)
      .set('Authorization', `Bearer ${h.site.key}`)
      .send({ content: 'From the CRM' });
    expect(api.status).toBe(201);
  });

  test('by the agent’s display name, else the email’s local part; the site’s name for an integration; null on the visitor’s', async () => {
    const expected = [
      ['Hello?', null],
      ['Hi, Anna here', 'Anna'],
      ['And Olga', 'olga.owner'],
      ['From the CRM', siteName],
    ];
    expect(await windowMessages()).toEqual(expected);
    expect(await feedMessages()).toEqual(expected);
    // A rename shows on older replies too.
    await setName(owner, 'Olga');
    expect((await windowMessages())[2]).toEqual(['And Olga', 'Olga']);
    // The API's own answer keeps the account id, never a name chosen for visitors.
    const pub = await request(h.app).get(`/api/v1/conversations/${conv}/messages`).set('Authorization', `Bearer ${h.site.key}`);
    expect(pub.body.data[1]).not.toHaveProperty('authorName');
  });

  test('an owner turns agents’ names off: every reply shows the site’s name, in the history and the feed, until turned on', async () => {
    expect((await as(owner, 'get', `/sites/${h.site.id}/agent-names`)).body.data).toEqual({ shown: true });
    const off = await as(owner, 'put', `/sites/${h.site.id}/agent-names`, { shown: false });
    expect(off.status).toBe(200);
    expect(off.body.data).toEqual({ shown: false });
    expect((await as(owner, 'get', `/sites/${h.site.id}/agent-names`)).body.data).toEqual({ shown: false });
    const hidden = [
      ['Hello?', null],
      ['Hi, Anna here', siteName],
      ['And Olga', siteName],
      ['From the CRM', siteName],
    ];
    expect(await windowMessages()).toEqual(hidden);
    expect(await feedMessages()).toEqual(hidden);
    // Identity settings saved later keep the choice (one row holds both).
    await h.runtime.services.access.setIdentity(h.site.id, { mode: 'optional' });
    expect((await windowMessages())[1]).toEqual(['Hi, Anna here', siteName]);

    expect((await as(owner, 'put', `/sites/${h.site.id}/agent-names`, { shown: true })).body.data).toEqual({ shown: true });
    expect((await windowMessages())[1]).toEqual(['Hi, Anna here', 'Anna']);
    const audit = (await as(owner, 'get', `/sites/${h.site.id}/audit-log?limit=100`)).body.data as { action: string }[];
    expect(audit.map((e) => e.action).filter((a) => a.startsWith('site.agent_names'))).toEqual(['site.agent_names_shown', 'site.agent_names_hidden']);
  });

  test('naming replies costs at most two statements a page of the feed, whatever the number of replies and authors', async () => {
    const statements = (run: () => Promise<unknown>) => countStatements(h.runtime.db, run);
    const third = await memberWithToken(h, h.site.id, 'third@example.com', 'agent');
    const conversationWith = async (visitorId: string, replies: { token: string }[]) => {
      const id = (await h.visitorSay(h.site.id, visitorId, 'Hello?')).conversation.id;
      for (const [i, who] of replies.entries())
        expect((await as(who, 'post', `/sites/${h.site.id}/inbox/conversations/${id}/messages`, { content: `reply ${i}` })).status).toBe(201);
    };
    const feed = (visitorId: string) => statements(() => h.runtime.services.window.feed.read(h.site.id, visitorId, { kind: 'start' }, 100));
    await conversationWith('cost-none', []);
    await conversationWith('cost-one', [agent]);
    await conversationWith(
      'cost-many',
      Array.from({ length: 21 }, (_, i) => [agent, owner, third][i % 3]),
    );
    const [none, one, many] = [await feed('cost-none'), await feed('cost-one'), await feed('cost-many')];
    expect(one - none).toBe(2); // the site's naming, the authors' names
    expect(many).toBe(one);
    // With names hidden, the authors are not read at all.
    await as(owner, 'put', `/sites/${h.site.id}/agent-names`, { shown: false });
    expect(await feed('cost-many')).toBe(none + 1);
    await as(owner, 'put', `/sites/${h.site.id}/agent-names`, { shown: true });
  });

  test('only owners read or change the setting; another site is 404; bad input is a 400', async () => {
    expect((await as(agent, 'get', `/sites/${h.site.id}/agent-names`)).status).toBe(403);
    expect((await as(agent, 'put', `/sites/${h.site.id}/agent-names`, { shown: false })).status).toBe(403);
    expect((await as(outsider, 'put', `/sites/${h.site.id}/agent-names`, { shown: false })).status).toBe(404);
    expect((await as(outsider, 'get', `/sites/${h.site.id}/agent-names`)).status).toBe(404);
    for (const body of [{}, { shown: 'no' }, { shown: false, extra: 1 }])
      expect((await as(owner, 'put', `/sites/${h.site.id}/agent-names`, body)).status).toBe(400);
    expect((await windowMessages())[1]).toEqual(['Hi, Anna here', 'Anna']);
  });
});
