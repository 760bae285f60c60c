/**
 * Contract of the management API: every operation of openapi/manage.yaml, every status it
 * documents, provoked for real and checked against the document (the app validates its answers
 * too). A final test fails when the document gains an operation or status without a scenario here.
 */
import request from 'supertest';
import type { Harness } from '../helpers/harness';
import { documentChecks } from '../helpers/openapi';
import { manageDocument } from '../../server/http/openapi-document';
import { M, manageHarness, newMember, PASSWORD, SAME_ORIGIN, signIn } from './helpers';
import { listenHttps } from '../helpers/harness';
import { openSse } from '../window/helpers';

const { documentedOperations, assertMatchesDocument } = documentChecks(manageDocument(), { requiredHeadersOnly: true });

let h: Harness; // the main app
let limited: Harness; // RATE_LIMIT_PER_MINUTE=1
let broken: Harness; // its database has gone away
let site: string;
let owner: { id: string; cookie: string };
let agent: { id: string; cookie: string };
let ownerToken: string;

type Res = request.Response;
type Scenario = () => Promise<Res>;
type Method = 'get' | 'post' | 'patch' | 'delete';
type AccountsMethod = Exclude<keyof Harness['runtime']['services']['accounts'], 'hasher'>;
interface Call {
  cookie?: string;
  bearer?: string;
  body?: object | string;
  headers?: Record<string, string>;
  app?: Harness['app'];
}

beforeAll(async () => {
  h = await manageHarness();
  limited = await manageHarness({ env: { RATE_LIMIT_PER_MINUTE: '1' } });
  broken = await manageHarness();
  site = h.site.id;
  const o = await newMember(h, site, 'owner@example.com', 'owner');
  const a = await newMember(h, site, 'agent@example.com', 'agent');
  owner = { id: o.id, cookie: (await signIn(h, 'owner@example.com')).cookie };
  agent = { id: a.id, cookie: (await signIn(h, 'agent@example.com')).cookie };
  ownerToken = (await h.runtime.services.accounts.createToken({ manager: { accountId: o.id, email: o.email, via: 'session' }, clientIp: null }, 'contract')).token;
  await broken.runtime.db.destroy();
});

afterAll(async () => {
  await h.close();
  await limited.close();
  await broken.database.drop();
});

/** A request as a same-origin page sends it, with the session cookie or a token when given. */
function call(method: Method, path: string, c: Call = {}) {
  let r = request(c.app ?? h.app)[method](`${M}${path}`).set(c.headers ?? SAME_ORIGIN);
  if (c.cookie) r = r.set('Cookie', c.cookie);
  if (c.bearer) r = r.set('Authorization', `Bearer ${c.bearer}`);
  if (typeof c.body === 'string') r = r.set('Content-Type', 'text/plain').send(c.body);
  else if (c.body) r = r.send(c.body);
  return r;
}

/** The same request twice from a new owner on the app limited to one request a minute: the second is 429. */
async function exhausted(method: Method, path: (siteId: string, accountId: string) => string, body?: object, headers?: Record<string, string>): Promise<Res> {
  const s = await limited.newSite();
  const email = `limited-${Math.random().toString(36).slice(2)}@example.com`;
  const account = await newMember(limited, s.id, email, 'owner');
  const signed = await limited.runtime.services.accounts.signIn(email, PASSWORD, {});
  const cookie = `__Host-session=${signed.token}`;
  await call(method, path(s.id, account.id), { app: limited.app, cookie, body, headers });
  return call(method, path(s.id, account.id), { app: limited.app, cookie, body, headers });
}

/** An accounts-service method throwing something unexpected while `send` runs: the 500 envelope, nothing internal. */
function failing(method: AccountsMethod, send: () => request.Test): Scenario {
  return async () => {
    const spy = jest.spyOn(h.runtime.services.accounts, method as never).mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
    try {
      return await send();
    } finally {
      spy.mockRestore();
    }
  };
}

const DEAD_COOKIE = `__Host-session=${'A'.repeat(43)}`;
const CROSS_SITE = { 'Sec-Fetch-Site': 'cross-site' };
const TOO_BIG = { label: 'x'.repeat(70 * 1024) };
const OTHER_SITE = 'ws_00000000000000000000000000';
const NO_ACCOUNT = 'usr_00000000000000000000000000';

/** Every operation's answers that are made the same way: bad query, no credential, limits, failures, no database. */
function common(method: Method, path: string, service: AccountsMethod, body?: object): Record<string, Scenario> {
  const sep = path.includes('?') ? '&' : '?';
  return {
    400: () => call(method, `${path}${sep}unknown=1`, { cookie: owner.cookie, body }),
    401: () => call(method, path, { body }),
    429: () => exhausted(method, () => path, body),
    500: failing(service, () => call(method, path, { cookie: owner.cookie, body })),
    503: () => call(method, path, { app: broken.app, cookie: DEAD_COOKIE, body }),
  };
}

/** What a body-taking change answers besides: cross-site, too big, not JSON. */
function writes(method: Method, path: string, body: object): Record<string, Scenario> {
  return {
    403: () => call(method, path, { cookie: owner.cookie, body, headers: CROSS_SITE }),
    413: () => call(method, path, { cookie: owner.cookie, body: TOO_BIG }),
    415: () => call(method, path, { cookie: owner.cookie, body: 'label=x' }),
  };
}

async function invitation(email: string, role: 'owner' | 'agent' = 'agent') {
  return (await call('post', `/sites/${site}/invitations`, { cookie: owner.cookie, body: { email, role } })).body.data as { token: string };
}

let counter = 0;
const fresh = (prefix: string) => `${prefix}-${++counter}@example.com`;

const scenarios: Record<string, Record<string, Scenario>> = {
  signIn: {
    ...common('post', '/session', 'signIn', { email: 'owner@example.com', password: PASSWORD }),
    200: () => call('post', '/session', { body: { email: 'owner@example.com', password: PASSWORD } }),
    400: () => call('post', '/session', { body: { email: 'owner@example.com' } }),
    401: () => call('post', '/session', { body: { email: 'owner@example.com', password: 'wrong password!' } }),
    403: () => call('post', '/session', { body: { email: 'owner@example.com', password: PASSWORD }, headers: CROSS_SITE }),
    413: () => call('post', '/session', { body: { email: 'owner@example.com', password: 'x'.repeat(70 * 1024) } }),
    415: () => call('post', '/session', { body: 'email=owner@example.com' }),
    429: async () => {
      // Requests without a session share one budget per client address (1 a minute on this app).
      await call('post', '/session', { app: limited.app, body: { email: 'a@example.com', password: PASSWORD } });
      return call('post', '/session', { app: limited.app, body: { email: 'a@example.com', password: PASSWORD } });
    },
    503: () => call('post', '/session', { app: broken.app, body: { email: 'owner@example.com', password: PASSWORD } }),
  },
  signOut: {
    ...common('delete', '/session', 'signOut'),
    204: async () => call('delete', '/session', { cookie: (await signIn(h, 'owner@example.com')).cookie }),
    403: () => call('delete', '/session', { cookie: owner.cookie, headers: CROSS_SITE }),
  },
  getMe: {
    ...common('get', '/me', 'me'),
    200: () => call('get', '/me', { cookie: owner.cookie }),
  },
  listSessions: {
    ...common('get', '/sessions', 'listSessions'),
    200: () => call('get', '/sessions', { cookie: owner.cookie }),
  },
  endSession: {
    ...common('delete', '/sessions/ses_00000000000000000000000000', 'endSession'),
    204: async () => {
      const other = await signIn(h, 'owner@example.com');
      return call('delete', `/sessions/${other.res.body.data.session.id}`, { cookie: owner.cookie });
    },
    400: () => call('delete', '/sessions/not-a-session', { cookie: owner.cookie }),
    403: () => call('delete', '/sessions/ses_00000000000000000000000000', { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('delete', '/sessions/ses_00000000000000000000000000', { cookie: owner.cookie }),
  },
  changePassword: {
    ...common('post', '/password', 'changePassword', { currentPassword: PASSWORD, newPassword: PASSWORD }),
    ...writes('post', '/password', { currentPassword: PASSWORD, newPassword: PASSWORD }),
    // Same password again: the owner's other sessions end, the fixture's (current) one stays.
    204: () => call('post', '/password', { cookie: owner.cookie, body: { currentPassword: PASSWORD, newPassword: PASSWORD } }),
  },
  listTokens: {
    ...common('get', '/tokens', 'listTokens'),
    200: () => call('get', '/tokens', { cookie: owner.cookie }),
  },
  createToken: {
    ...common('post', '/tokens', 'createToken', { label: 'ci' }),
    ...writes('post', '/tokens', { label: 'ci' }),
    201: () => call('post', '/tokens', { cookie: owner.cookie, body: { label: 'ci' } }),
  },
  revokeToken: {
    ...common('delete', '/tokens/mtk_00000000000000000000000000', 'revokeToken'),
    204: async () => {
      const t = await call('post', '/tokens', { cookie: owner.cookie, body: { label: 'to revoke' } });
      return call('delete', `/tokens/${t.body.data.id}`, { cookie: owner.cookie });
    },
    400: () => call('delete', '/tokens/wcm_secret', { cookie: owner.cookie }),
    403: () => call('delete', '/tokens/mtk_00000000000000000000000000', { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('delete', '/tokens/mtk_00000000000000000000000000', { cookie: owner.cookie }),
  },
  listMySites: {
    ...common('get', '/sites', 'mySites'),
    200: () => call('get', '/sites', { bearer: ownerToken }),
  },
  listMembers: {},
  changeMemberRole: {},
  removeMember: {},
  endMemberSessions: {},
  createInvitation: {},
  acceptInvitation: {
    200: async () => call('post', '/invitations/accept', { body: { token: (await invitation(fresh('invited'))).token, email: `invited-${counter}@example.com`, password: PASSWORD } }),
    400: () => call('post', '/invitations/accept', { body: { token: 'short' } }),
    401: async () => {
      const email = fresh('existing');
      await newMember(h, h.site.id, email, 'agent');
      const inv = await invitation(email, 'owner');
      return call('post', '/invitations/accept', { body: { token: inv.token, email, password: 'not the password' } });
    },
    403: () => call('post', '/invitations/accept', { body: { token: 'A'.repeat(43) }, headers: CROSS_SITE }),
    404: () => call('post', '/invitations/accept', { cookie: owner.cookie, body: { token: 'A'.repeat(43) } }),
    413: () => call('post', '/invitations/accept', { body: { token: 'x'.repeat(70 * 1024) } }),
    415: () => call('post', '/invitations/accept', { body: 'token=x' }),
    429: async () => {
      await call('post', '/invitations/accept', { app: limited.app, body: { token: 'A'.repeat(43) } });
      return call('post', '/invitations/accept', { app: limited.app, body: { token: 'A'.repeat(43) } });
    },
    500: failing('acceptInvitation', () => call('post', '/invitations/accept', { cookie: owner.cookie, body: { token: 'A'.repeat(43) } })),
    503: () => call('post', '/invitations/accept', { app: broken.app, body: { token: 'A'.repeat(43), email: 'x@example.com', password: PASSWORD } }),
  },
  listAuditLog: {},
  listInboxConversations: {},
  getInboxConversation: {},
  listInboxMessages: {},
  replyFromInbox: {},
  closeInboxConversation: {},
  assignInboxConversation: {},
  markInboxConversationRead: {},
  streamInbox: {},
};

// The site routes are built once the fixtures exist (their paths name the site).
function siteScenarios() {
  const members = `/sites/${site}/members`;
  const member = (id: string) => `${members}/${id}`;
  Object.assign(scenarios.listMembers, {
    ...common('get', members, 'listMembers'),
    200: () => call('get', members, { cookie: agent.cookie }),
    404: () => call('get', `/sites/${OTHER_SITE}/members`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/members`),
  });
  Object.assign(scenarios.changeMemberRole, {
    ...common('patch', member(NO_ACCOUNT), 'changeRole', { role: 'agent' }),
    ...writes('patch', member(NO_ACCOUNT), { role: 'agent' }),
    200: async () => {
      const m = await newMember(h, site, fresh('promote'), 'agent');
      return call('patch', member(m.id), { cookie: owner.cookie, body: { role: 'owner' } });
    },
    404: () => call('patch', member(NO_ACCOUNT), { cookie: owner.cookie, body: { role: 'agent' } }),
    429: () => exhausted('patch', (s, a) => `/sites/${s}/members/${a}`, { role: 'owner' }),
  });
  Object.assign(scenarios.removeMember, {
    ...common('delete', member(NO_ACCOUNT), 'removeMember'),
    204: async () => {
      const m = await newMember(h, site, fresh('remove'), 'agent');
      return call('delete', member(m.id), { cookie: owner.cookie });
    },
    403: () => call('delete', member(owner.id), { cookie: agent.cookie }),
    404: () => call('delete', member(NO_ACCOUNT), { cookie: owner.cookie }),
    429: () => exhausted('delete', (s) => `/sites/${s}/members/${NO_ACCOUNT}`),
  });
  Object.assign(scenarios.endMemberSessions, {
    ...common('delete', `${member(agent.id)}/sessions`, 'endMemberSessions'),
    200: async () => {
      const m = await newMember(h, site, fresh('signed-out'), 'agent');
      return call('delete', `${member(m.id)}/sessions`, { cookie: owner.cookie });
    },
    403: () => call('delete', `${member(owner.id)}/sessions`, { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('delete', `${member(NO_ACCOUNT)}/sessions`, { cookie: owner.cookie }),
    429: () => exhausted('delete', (s, a) => `/sites/${s}/members/${a}/sessions`),
  });
  const invitations = `/sites/${site}/invitations`;
  Object.assign(scenarios.createInvitation, {
    ...common('post', invitations, 'createInvitation', { email: 'x@example.com', role: 'agent' }),
    ...writes('post', invitations, { email: 'x@example.com', role: 'agent' }),
    201: () => call('post', invitations, { cookie: owner.cookie, body: { email: fresh('new'), role: 'agent' } }),
    404: () => call('post', `/sites/${OTHER_SITE}/invitations`, { cookie: owner.cookie, body: { email: 'x@example.com', role: 'agent' } }),
    429: () => exhausted('post', (s) => `/sites/${s}/invitations`, { email: 'x@example.com', role: 'agent' }),
  });
  const audit = `/sites/${site}/audit-log`;
  Object.assign(scenarios.listAuditLog, {
    ...common('get', audit, 'auditLog'),
    200: () => call('get', `${audit}?limit=2`, { cookie: owner.cookie }),
    400: () => call('get', `${audit}?limit=101`, { cookie: owner.cookie }),
    403: () => call('get', audit, { cookie: agent.cookie }),
    404: () => call('get', `/sites/${OTHER_SITE}/audit-log`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/audit-log`),
  });
  inboxScenarios();
}

const NO_CONVERSATION = 'conv_00000000000000000000000000';
let visitorCount = 0;
/** A fresh open conversation of the fixture site. */
const conversation = async () => (await h.visitorSay(site, `contract-visitor-${++visitorCount}`, 'hello')).conversation.id as string;

function inboxScenarios() {
  const inbox = `/sites/${site}/inbox/conversations`;
  const one = (id: string) => `${inbox}/${id}`;
  const missing = one(NO_CONVERSATION);
  const otherSite = `/sites/${OTHER_SITE}/inbox/conversations`;
  Object.assign(scenarios.listInboxConversations, {
    ...common('get', inbox, 'requireRole'),
    200: async () => {
      await conversation();
      return call('get', `${inbox}?assignee=unassigned&unread=true&limit=2`, { cookie: agent.cookie });
    },
    400: () => call('get', `${inbox}?assignee=someone`, { cookie: owner.cookie }),
    404: () => call('get', otherSite, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations`),
  });
  Object.assign(scenarios.getInboxConversation, {
    ...common('get', missing, 'requireRole'),
    200: async () => call('get', one(await conversation()), { cookie: agent.cookie }),
    400: () => call('get', one('not-a-conversation'), { cookie: owner.cookie }),
    404: () => call('get', missing, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}`),
  });
  Object.assign(scenarios.listInboxMessages, {
    ...common('get', `${missing}/messages`, 'requireRole'),
    200: async () => call('get', `${one(await conversation())}/messages?order=desc`, { cookie: agent.cookie }),
    400: () => call('get', `${missing}/messages?order=sideways`, { cookie: owner.cookie }),
    404: () => call('get', `${missing}/messages`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/messages`),
  });
  const reply = { content: 'Thanks, looking into it.' };
  Object.assign(scenarios.replyFromInbox, {
    ...common('post', `${missing}/messages`, 'requireRole', reply),
    ...writes('post', `${missing}/messages`, reply),
    201: async () => call('post', `${one(await conversation())}/messages`, { cookie: agent.cookie, body: reply }),
    400: () => call('post', `${missing}/messages`, { cookie: owner.cookie, body: { content: 'x', format: 'html' } }),
    404: () => call('post', `${missing}/messages`, { cookie: owner.cookie, body: reply }),
    409: async () => {
      const id = await conversation();
      await call('post', `${one(id)}/close`, { cookie: owner.cookie });
      return call('post', `${one(id)}/messages`, { cookie: owner.cookie, body: reply });
    },
    422: async () => {
      const id = await conversation();
      const headers = { ...SAME_ORIGIN, 'Idempotency-Key': `contract-${id}` };
      await call('post', `${one(id)}/messages`, { cookie: owner.cookie, body: reply, headers });
      return call('post', `${one(id)}/messages`, { cookie: owner.cookie, body: { content: 'something else' }, headers });
    },
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/messages`, reply),
  });
  Object.assign(scenarios.closeInboxConversation, {
    ...common('post', `${missing}/close`, 'requireRole'),
    200: async () => call('post', `${one(await conversation())}/close`, { cookie: agent.cookie }),
    400: () => call('post', `${one('nope')}/close`, { cookie: owner.cookie }),
    403: () => call('post', `${missing}/close`, { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('post', `${missing}/close`, { cookie: owner.cookie }),
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/close`),
  });
  Object.assign(scenarios.assignInboxConversation, {
    ...common('post', `${missing}/assignee`, 'requireRole', { assigneeId: null }),
    ...writes('post', `${missing}/assignee`, { assigneeId: null }),
    200: async () => call('post', `${one(await conversation())}/assignee`, { cookie: agent.cookie, body: { assigneeId: agent.id } }),
    400: () => call('post', `${missing}/assignee`, { cookie: owner.cookie, body: { assigneeId: 'someone' } }),
    403: async () => call('post', `${one(await conversation())}/assignee`, { cookie: agent.cookie, body: { assigneeId: owner.id } }),
    404: () => call('post', `${missing}/assignee`, { cookie: owner.cookie, body: { assigneeId: null } }),
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/assignee`, { assigneeId: null }),
  });
  Object.assign(scenarios.markInboxConversationRead, {
    ...common('post', `${missing}/read`, 'requireRole'),
    200: async () => call('post', `${one(await conversation())}/read`, { cookie: agent.cookie }),
    400: () => call('post', `${one('nope')}/read`, { cookie: owner.cookie }),
    403: () => call('post', `${missing}/read`, { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('post', `${missing}/read`, { cookie: owner.cookie }),
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/read`),
  });
  const events = `/sites/${site}/inbox/events`;
  Object.assign(scenarios.streamInbox, {
    ...common('get', events, 'requireRole'),
    // A stream never ends by itself: read it until its first event, then hang up.
    200: async () => {
      const server = await listenHttps(h.app);
      try {
        const s = await openSse(server, `${M}${events}`, { Cookie: agent.cookie });
        await s.waitFor((e) => e.event === 'ready');
        s.close();
        return { status: s.status, headers: s.headers, body: undefined } as unknown as Res;
      } finally {
        await server.close();
      }
    },
    400: () => call('get', events, { cookie: owner.cookie, headers: { 'Last-Event-ID': 'not-a-position' } }),
    404: () => call('get', `/sites/${OTHER_SITE}/inbox/events`, { cookie: owner.cookie }),
    // The first request must not become a stream (it would never end): a bad Last-Event-ID is answered at once.
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/events`, undefined, { 'Last-Event-ID': 'x' }),
  });
}

const pairs = documentedOperations().flatMap((op) => op.statuses.map((status) => [op.operationId, status] as const));

describe.each(pairs)('%s answers %s', (operationId, status) => {
  test('as the document says', async () => {
    if (!scenarios.listAuditLog[200]) siteScenarios();
    const scenario = scenarios[operationId]?.[status];
    expect(scenario).toBeDefined();
    const res = await scenario!();
    expect(res.status).toBe(Number(status));
    assertMatchesDocument(operationId, res as never);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(Object.keys(res.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
    if (res.status === 204) expect(res.text).toBe('');
    if (res.status >= 400) {
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(JSON.stringify(res.body)).not.toMatch(/boom|secret internal|at .*\.ts:/);
    }
    if (status === '403') expect(['forbidden', 'cross_site_request']).toContain(res.body.error.code);
  });
});

test('every documented operation and status has a scenario, and no scenario is stale', () => {
  if (!scenarios.listAuditLog[200]) siteScenarios();
  const documented = new Set(pairs.map(([op, status]) => `${op} ${status}`));
  const covered = new Set(Object.entries(scenarios).flatMap(([op, byStatus]) => Object.keys(byStatus).map((s) => `${op} ${s}`)));
  expect([...documented].filter((p) => !covered.has(p))).toEqual([]);
  expect([...covered].filter((p) => !documented.has(p))).toEqual([]);
});
