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
import { deliveryEnv, Receiver, startReceiver } from '../webhooks/helpers';
import { listenHttps } from '../helpers/harness';
import { openSse } from '../window/helpers';
import { holdStatements } from '../helpers/held-statements';
import { waitFor } from '../helpers/wait';
import { sha256Hex } from '../../server/platform/crypto';

const { documentedOperations, assertMatchesDocument } = documentChecks(manageDocument(), { requiredHeadersOnly: true });

let h: Harness; // the main app
let limited: Harness; // RATE_LIMIT_PER_MINUTE=1
let broken: Harness; // its database has gone away
let site: string;
let owner: { id: string; cookie: string };
let agent: { id: string; cookie: string };
let ownerToken: string;
let receiver: Receiver; // the event address of the main app's site

type Res = request.Response;
type Scenario = () => Promise<Res>;
type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Accounts = Harness['runtime']['services']['accounts'];
/** A method of one of the accounts services, as `service.method`. */
type AccountsMethod = { [S in keyof Accounts]: `${S}.${Exclude<keyof Accounts[S], 'hasher'> & string}` }[keyof Accounts];
interface Call {
  cookie?: string;
  bearer?: string;
  body?: object | string;
  headers?: Record<string, string>;
  app?: Harness['app'];
}

beforeAll(async () => {
  receiver = await startReceiver();
  // Hundreds of scenarios from one session in a minute or two: the per-minute budget (300) would
  // answer 429 where a scenario expects another status, the sooner the faster the engine. The 429s
  // are `limited`'s, a harness of their own with a budget of one.
  h = await manageHarness({ env: { ...deliveryEnv(receiver), RATE_LIMIT_PER_MINUTE: '100000' } });
  limited = await manageHarness({ env: { RATE_LIMIT_PER_MINUTE: '1' } });
  broken = await manageHarness();
  site = h.site.id;
  const o = await newMember(h, site, 'owner@example.com', 'owner');
  const a = await newMember(h, site, 'agent@example.com', 'agent');
  owner = { id: o.id, cookie: (await signIn(h, 'owner@example.com')).cookie };
  agent = { id: a.id, cookie: (await signIn(h, 'agent@example.com')).cookie };
  ownerToken = (await h.runtime.services.accounts.tokens.create({ manager: { accountId: o.id, email: o.email, via: 'session' }, clientIp: null }, 'contract'))
    .token;
  await broken.runtime.db.destroy();
});

afterAll(async () => {
  await h.close();
  await limited.close();
  await broken.database.drop();
  await receiver.close();
});

/** A request as a same-origin page sends it, with the session cookie or a token when given. */
function call(method: Method, path: string, c: Call = {}) {
  let r = request(c.app ?? h.app)
    [method](`${M}${path}`)
    .set(c.headers ?? SAME_ORIGIN);
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
  const signed = await limited.runtime.services.accounts.signIn.signIn(email, PASSWORD, {});
  const cookie = `__Host-session=${signed.token}`;
  await call(method, path(s.id, account.id), { app: limited.app, cookie, body, headers });
  return call(method, path(s.id, account.id), { app: limited.app, cookie, body, headers });
}

/** An accounts-service method throwing something unexpected while `send` runs: the 500 envelope, nothing internal. */
function failing(method: AccountsMethod, send: () => request.Test): Scenario {
  return async () => {
    const [service, name] = method.split('.') as [keyof Accounts, string];
    const spy = jest
      .spyOn(h.runtime.services.accounts[service], name as never)
      .mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
    try {
      return await send();
    } finally {
      spy.mockRestore();
    }
  };
}

type WebhooksMethod = keyof Harness['runtime']['services']['webhooks'];

/** A webhook-service method (or the timeline, `timeline`) throwing something unexpected while `send` runs. */
function failingEvents(method: WebhooksMethod | 'timeline', send: () => request.Test): Scenario {
  return async () => {
    const services = h.runtime.services;
    const spy =
      method === 'timeline'
        ? jest.spyOn(services, 'timeline').mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never)
        : jest.spyOn(services.webhooks, method as never).mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
    try {
      return await send();
    } finally {
      spy.mockRestore();
    }
  };
}

/** common() for the event address and delivery log operations (their 500 comes from the webhook service). */
function commonEvents(method: Method, path: string, service: WebhooksMethod | 'timeline', body?: object): Record<string, Scenario> {
  const sep = path.includes('?') ? '&' : '?';
  return {
    400: () => call(method, `${path}${sep}unknown=1`, { cookie: owner.cookie, body }),
    401: () => call(method, path, { body }),
    500: failingEvents(service, () => call(method, path, { cookie: owner.cookie, body })),
    503: () => call(method, path, { app: broken.app, cookie: DEAD_COOKIE, body }),
  };
}

/** The main site's event address, at the local receiver (made once). */
async function ensureAddress() {
  const webhooks = h.runtime.services.webhooks;
  if (!(await h.runtime.db('webhook_endpoints').where({ site_id: site }).first())) await webhooks.setEndpoint(site, receiver.url('/contract'));
  await webhooks.setEnabled(site, true);
}

/** The main site's address without a pending roll (a rotation drops one). */
async function noRoll() {
  await ensureAddress();
  await h.runtime.services.webhooks.rotateSecret(site);
}

/** A real (not test) event of the main site with a pending delivery, and its conversation. */
async function pendingEvent() {
  await ensureAddress();
  const said = await h.visitorSay(site, `contract-${++counter}`, 'hello');
  const row = await h.runtime.db('events').where({ conversation_id: said.conversation.id, name: 'message.created' }).first('id');
  return { eventId: row.id as string, conversationId: said.conversation.id };
}

const NO_EVENT = encodeURIComponent('message.created:00000000000000000000000000');
const SINCE = '2026-01-01T00:00:00.000Z';
const SINCE_Q = encodeURIComponent(SINCE);

const DEAD_COOKIE = `__Host-session=${'A'.repeat(43)}`;
const CROSS_SITE = { 'Sec-Fetch-Site': 'cross-site' };
const TOO_BIG = { label: 'x'.repeat(70 * 1024) };
const OTHER_SITE = 'ws_00000000000000000000000000';
const NO_ACCOUNT = 'usr_00000000000000000000000000';
const SETUP = { token: 'A'.repeat(43), email: 'first@example.com', password: PASSWORD };

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
  return (await call('post', `/sites/${site}/invitations`, { cookie: owner.cookie, body: { email, role } })).body.data as { id: string; token: string };
}

/** The owner's unsubscribe link (their emails of waiting visitors on the main site), as a path under the entry. */
const unsubscribePath = () => new URL(h.runtime.services.unsubscribe.url({ kind: 'member', siteId: site, accountId: owner.id })).pathname.slice(M.length);
const FORGED_UNSUBSCRIBE = `${Buffer.from('["member","x","y"]').toString('base64url')}.${'A'.repeat(43)}`;
/** RFC 8058's POST as a mail provider sends it: a form, no cookie, no Origin. */
const oneClick = (path: string, form = 'List-Unsubscribe=One-Click', app = h.app) =>
  request(app).post(`${M}${path}`).set('Content-Type', 'application/x-www-form-urlencoded').send(form);

let counter = 0;
const fresh = (prefix: string) => `${prefix}-${++counter}@example.com`;

/**
 * An email link of a new account of its own, to `to` (its own address by default), written here as
 * the service writes it, so its token is known.
 */
async function emailLink(email: string, to = email): Promise<string> {
  const account = await h.runtime.services.accounts.registry.create(email, PASSWORD);
  const token = `contract${++counter}${'A'.repeat(30)}`;
  const at = Date.now();
  await h.runtime.db('email_links').insert({
    id: `elk_contract${counter}`,
    account_id: account.id,
    email: to,
    token_hash: sha256Hex(token),
    created_at: at,
    expires_at: at + 24 * 3600_000,
    used_at: null,
  });
  return token;
}

const scenarios: Record<string, Record<string, Scenario>> = {
  // Forgot password: public, the same answer for any email.
  requestPasswordReset: {
    202: () => call('post', '/password-resets', { body: { email: 'owner@example.com' } }),
    400: () => call('post', '/password-resets', { body: {} }),
    // Like every operation, it refuses a request that carries a wrong management token.
    401: () => call('post', '/password-resets', { body: { email: 'owner@example.com' }, bearer: 'wcm_notarealtoken0000000000000000000000000000' }),
    403: () => call('post', '/password-resets', { body: { email: 'owner@example.com' }, headers: CROSS_SITE }),
    413: () => call('post', '/password-resets', { body: { email: 'x'.repeat(70 * 1024) } }),
    415: () => call('post', '/password-resets', { body: 'email=owner@example.com' }),
    429: async () => {
      await call('post', '/password-resets', { app: limited.app, body: { email: 'a@example.com' } });
      return call('post', '/password-resets', { app: limited.app, body: { email: 'a@example.com' } });
    },
    500: failing('passwordReset.request', () => call('post', '/password-resets', { body: { email: 'owner@example.com' } })),
    503: () => call('post', '/password-resets', { app: broken.app, body: { email: 'owner@example.com' } }),
  },
  completePasswordReset: {
    200: async () => {
      // A link of an account of its own (the owner's sessions serve the other scenarios); its token
      // is known here because the row is written here, as the service writes it.
      const email = `reset-${++counter}@example.com`;
      const account = await h.runtime.services.accounts.registry.create(email, PASSWORD);
      const token = `contract${counter}${'A'.repeat(30)}`;
      const at = Date.now();
      await h.runtime.db('password_resets').insert({
        id: `pwr_contract${counter}`,
        account_id: account.id,
        token_hash: sha256Hex(token),
        created_at: at,
        expires_at: at + 3600_000,
        used_at: null,
      });
      return call('post', '/password-resets/complete', { body: { token, newPassword: 'a brand new passphrase' } });
    },
    400: () => call('post', '/password-resets/complete', { body: { token: 'A'.repeat(43) } }),
    401: () =>
      call('post', '/password-resets/complete', {
        body: { token: 'A'.repeat(43), newPassword: PASSWORD },
        bearer: 'wcm_notarealtoken0000000000000000000000000000',
      }),
    403: () => call('post', '/password-resets/complete', { body: { token: 'A'.repeat(43), newPassword: PASSWORD }, headers: CROSS_SITE }),
    404: () => call('post', '/password-resets/complete', { body: { token: 'A'.repeat(43), newPassword: PASSWORD } }),
    413: () => call('post', '/password-resets/complete', { body: { token: 'A'.repeat(43), newPassword: 'x'.repeat(70 * 1024) } }),
    415: () => call('post', '/password-resets/complete', { body: 'token=x' }),
    429: async () => {
      await call('post', '/password-resets/complete', { app: limited.app, body: { token: 'A'.repeat(43), newPassword: PASSWORD } });
      return call('post', '/password-resets/complete', { app: limited.app, body: { token: 'A'.repeat(43), newPassword: PASSWORD } });
    },
    500: failing('passwordReset.complete', () => call('post', '/password-resets/complete', { body: { token: 'A'.repeat(43), newPassword: PASSWORD } })),
    503: () => call('post', '/password-resets/complete', { app: broken.app, body: { token: 'A'.repeat(43), newPassword: PASSWORD } }),
  },
  // Verified email and changing it: the owner's email is verified (made by the CLI's service).
  resendEmailVerification: {
    ...common('post', '/email-verifications', 'emailVerification.resend'),
    202: () => call('post', '/email-verifications', { cookie: owner.cookie }),
    403: () => call('post', '/email-verifications', { cookie: owner.cookie, headers: CROSS_SITE }),
  },
  requestEmailChange: {
    ...common('post', '/email-changes', 'emailVerification.requestChange', { newEmail: 'moved@example.com', password: PASSWORD }),
    ...writes('post', '/email-changes', { newEmail: 'moved@example.com', password: PASSWORD }),
    // Nothing changes until the link is used: the owner keeps its email.
    202: () => call('post', '/email-changes', { cookie: owner.cookie, body: { newEmail: fresh('moved'), password: PASSWORD } }),
  },
  completeEmailLink: {
    200: async () => call('post', '/email-links/complete', { body: { token: await emailLink(fresh('verify')) } }),
    400: () => call('post', '/email-links/complete', { body: {} }),
    401: () => call('post', '/email-links/complete', { body: { token: 'A'.repeat(43) }, bearer: 'wcm_notarealtoken0000000000000000000000000000' }),
    403: () => call('post', '/email-links/complete', { body: { token: 'A'.repeat(43) }, headers: CROSS_SITE }),
    404: () => call('post', '/email-links/complete', { body: { token: 'A'.repeat(43) } }),
    // A link to an address another account has by now.
    409: async () => call('post', '/email-links/complete', { body: { token: await emailLink(fresh('mover'), 'owner@example.com') } }),
    413: () => call('post', '/email-links/complete', { body: { token: 'x'.repeat(70 * 1024) } }),
    415: () => call('post', '/email-links/complete', { body: 'token=x' }),
    429: async () => {
      await call('post', '/email-links/complete', { app: limited.app, body: { token: 'A'.repeat(43) } });
      return call('post', '/email-links/complete', { app: limited.app, body: { token: 'A'.repeat(43) } });
    },
    500: failing('emailVerification.complete', () => call('post', '/email-links/complete', { body: { token: 'A'.repeat(43) } })),
    503: () => call('post', '/email-links/complete', { app: broken.app, body: { token: 'A'.repeat(43) } }),
  },
  // One-click unsubscribe: public, from any origin, the token its credential.
  showUnsubscribe: {
    200: () => call('get', unsubscribePath(), { headers: {} }),
    400: () => call('get', '/unsubscribe/not~a~token', { headers: {} }),
    404: () => call('get', `/unsubscribe/${FORGED_UNSUBSCRIBE}`, { headers: {} }),
    // A management token that is not valid is refused wherever it is presented, public operations included.
    401: () => call('get', unsubscribePath(), { headers: {}, bearer: 'wcm_notarealtoken0000000000000000000000000000' }),
    // The page is made from the token alone (no database: never 503); a fault in it is the envelope's 500.
    500: async () => {
      const spy = jest.spyOn(h.runtime.services.unsubscribe, 'verify').mockImplementation(() => {
        throw new Error('boom: secret internal detail');
      });
      try {
        return await call('get', unsubscribePath(), { headers: {} });
      } finally {
        spy.mockRestore();
      }
    },
    429: async () => {
      await call('get', `/unsubscribe/${FORGED_UNSUBSCRIBE}`, { app: limited.app, headers: {} });
      return call('get', `/unsubscribe/${FORGED_UNSUBSCRIBE}`, { app: limited.app, headers: {} });
    },
  },
  unsubscribe: {
    200: () => oneClick(unsubscribePath()),
    400: () => oneClick(unsubscribePath(), 'List-Unsubscribe=Yes'),
    404: () => oneClick(`/unsubscribe/${FORGED_UNSUBSCRIBE}`),
    401: () =>
      request(h.app)
        .post(`${M}${unsubscribePath()}`)
        .set('Authorization', 'Bearer wcm_notarealtoken0000000000000000000000000000')
        .set('Content-Type', 'application/x-www-form-urlencoded')
        .send('List-Unsubscribe=One-Click'),
    413: () => oneClick(unsubscribePath(), `List-Unsubscribe=${'x'.repeat(4096)}`),
    415: () => call('post', unsubscribePath(), { headers: {}, body: { 'List-Unsubscribe': 'One-Click' } }),
    500: failingAlerts('unsubscribe', () => oneClick(unsubscribePath())),
    // A link of the broken app's own key: it verifies, then its database is away.
    503: () =>
      oneClick(
        new URL(broken.runtime.services.unsubscribe.url({ kind: 'member', siteId: site, accountId: owner.id })).pathname.slice(M.length),
        undefined,
        broken.app,
      ),
    429: async () => {
      await oneClick(`/unsubscribe/${FORGED_UNSUBSCRIBE}`, undefined, limited.app);
      return oneClick(`/unsubscribe/${FORGED_UNSUBSCRIBE}`, undefined, limited.app);
    },
  },
  // A site's mail log and test email, a member's emails of waiting visitors (mailScenarios).
  getMyAlerts: {},
  setMyAlerts: {},
  listMailLog: {},
  sendTestEmail: {},
  signIn: {
    ...common('post', '/session', 'signIn.signIn', { email: 'owner@example.com', password: PASSWORD }),
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
  getSession: {
    ...common('get', '/session', 'signIn.listSessions'),
    // Signed out is not an error here: data null.
    200: () => call('get', '/session'),
    401: () => call('get', '/session', { bearer: 'wcm_notarealtoken0000000000000000000000000000' }),
  },
  signOut: {
    ...common('delete', '/session', 'signIn.signOut'),
    204: async () => call('delete', '/session', { cookie: (await signIn(h, 'owner@example.com')).cookie }),
    403: () => call('delete', '/session', { cookie: owner.cookie, headers: CROSS_SITE }),
  },
  getMe: {
    ...common('get', '/me', 'signIn.me'),
    200: () => call('get', '/me', { cookie: owner.cookie }),
  },
  listSessions: {
    ...common('get', '/sessions', 'signIn.listSessions'),
    200: () => call('get', '/sessions', { cookie: owner.cookie }),
  },
  endSession: {
    ...common('delete', '/sessions/ses_00000000000000000000000000', 'signIn.endSession'),
    204: async () => {
      const other = await signIn(h, 'owner@example.com');
      return call('delete', `/sessions/${other.res.body.data.session.id}`, { cookie: owner.cookie });
    },
    400: () => call('delete', '/sessions/not-a-session', { cookie: owner.cookie }),
    403: () => call('delete', '/sessions/ses_00000000000000000000000000', { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('delete', '/sessions/ses_00000000000000000000000000', { cookie: owner.cookie }),
  },
  changePassword: {
    ...common('post', '/password', 'signIn.changePassword', { currentPassword: PASSWORD, newPassword: PASSWORD }),
    ...writes('post', '/password', { currentPassword: PASSWORD, newPassword: PASSWORD }),
    // Same password again: the owner's other sessions end, the fixture's (current) one stays.
    204: () => call('post', '/password', { cookie: owner.cookie, body: { currentPassword: PASSWORD, newPassword: PASSWORD } }),
  },
  reauthenticate: {
    ...common('post', '/session/sudo', 'signIn.reauthenticate', { password: PASSWORD }),
    ...writes('post', '/session/sudo', { password: PASSWORD }),
    200: () => call('post', '/session/sudo', { cookie: owner.cookie, body: { password: PASSWORD } }),
  },
  listSecurityLog: {
    ...common('get', '/security-log', 'securityLog.page'),
    200: () => call('get', '/security-log', { cookie: owner.cookie }),
  },
  listTokens: {
    ...common('get', '/tokens', 'tokens.list'),
    200: () => call('get', '/tokens', { cookie: owner.cookie }),
  },
  createToken: {
    ...common('post', '/tokens', 'tokens.create', { label: 'ci' }),
    ...writes('post', '/tokens', { label: 'ci' }),
    201: () => call('post', '/tokens', { cookie: owner.cookie, body: { label: 'ci' } }),
  },
  revokeToken: {
    ...common('delete', '/tokens/mtk_00000000000000000000000000', 'tokens.revoke'),
    204: async () => {
      const t = await call('post', '/tokens', { cookie: owner.cookie, body: { label: 'to revoke' } });
      return call('delete', `/tokens/${t.body.data.id}`, { cookie: owner.cookie });
    },
    400: () => call('delete', '/tokens/wcm_secret', { cookie: owner.cookie }),
    403: () => call('delete', '/tokens/mtk_00000000000000000000000000', { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('delete', '/tokens/mtk_00000000000000000000000000', { cookie: owner.cookie }),
  },
  listMySites: {
    ...common('get', '/sites', 'members.mySites'),
    200: () => call('get', '/sites', { bearer: ownerToken }),
  },
  updateMe: {
    ...common('patch', '/me', 'profile.setDisplayName', { displayName: 'Olga' }),
    ...writes('patch', '/me', { displayName: 'Olga' }),
    200: () => call('patch', '/me', { cookie: owner.cookie, body: { displayName: 'Olga' } }),
    400: () => call('patch', '/me', { cookie: owner.cookie, body: { displayName: 'Olga\u202E' } }),
  },
  listSharedReplies: {},
  createSharedReply: {},
  importSharedReplies: {},
  updateSharedReply: {},
  deleteSharedReply: {},
  listConversationSharedReplies: {},
  listTags: {},
  createTag: {},
  renameTag: {},
  deleteTag: {},
  tagInboxConversation: {},
  untagInboxConversation: {},
  getAgentNames: {},
  setAgentNames: {},
  listMembers: {},
  changeMemberRole: {},
  removeMember: {},
  endMemberSessions: {},
  createInvitation: {},
  listInvitations: {},
  revokeInvitation: {},
  acceptInvitation: {
    200: async () =>
      call('post', '/invitations/accept', {
        body: { token: (await invitation(fresh('invited'))).token, email: `invited-${counter}@example.com`, password: PASSWORD },
      }),
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
    500: failing('invitations.accept', () => call('post', '/invitations/accept', { cookie: owner.cookie, body: { token: 'A'.repeat(43) } })),
    503: () => call('post', '/invitations/accept', { app: broken.app, body: { token: 'A'.repeat(43), email: 'x@example.com', password: PASSWORD } }),
  },
  completeSetup: {
    201: async () => {
      // A service with no account yet: a first start.
      const first = await manageHarness();
      try {
        const link = (await first.runtime.services.accounts.setup.issueLink())!;
        const token = new URL(link.url).hash.replace('#token=', '');
        return await call('post', '/setup', { app: first.app, body: { token, email: 'first@example.com', password: PASSWORD } });
      } finally {
        await first.close();
      }
    },
    400: () => call('post', '/setup', { body: { token: 'A'.repeat(43), email: 'first@example.com' } }),
    // No credential is needed, but one that is sent is checked like everywhere: a dead token is 401.
    401: () => call('post', '/setup', { body: SETUP, bearer: 'wcm_notarealtoken0000000000000000000000000000' }),
    403: () => call('post', '/setup', { body: SETUP, headers: CROSS_SITE }),
    404: () => call('post', '/setup', { body: SETUP }),
    413: () => call('post', '/setup', { body: { ...SETUP, password: 'x'.repeat(70 * 1024) } }),
    415: () => call('post', '/setup', { body: 'token=x' }),
    429: async () => {
      await call('post', '/setup', { app: limited.app, body: SETUP });
      return call('post', '/setup', { app: limited.app, body: SETUP });
    },
    500: failing('setup.complete', () => call('post', '/setup', { body: SETUP })),
    503: () => call('post', '/setup', { app: broken.app, body: SETUP }),
  },
  listAuditLog: {},
  // An owner's sites and keys (ownerScenarios).
  createSite: {},
  getSite: {},
  updateSite: {},
  listAllowedOrigins: {},
  replaceAllowedOrigins: {},
  addAllowedOrigin: {},
  removeAllowedOrigin: {},
  rotateIdentitySecret: {},
  getEmbedSnippet: {},
  getVisitorFiles: {},
  updateVisitorFiles: {},
  revokeVisitors: {},
  checkEmbed: {},
  listKeys: {},
  createKey: {},
  revokeKey: {},
  getEventAddress: {},
  setEventAddress: {},
  changeEventAddressState: {},
  rotateEventSecret: {},
  rollEventSecret: {},
  cancelEventSecretRoll: {},
  switchEventSecret: {},
  sendTestEvent: {},
  listDeliveries: {},
  getDelivery: {},
  redeliverDelivery: {},
  countRecoverableDeliveries: {},
  recoverDeliveries: {},
  getConversationTimeline: {},
  listInboxConversations: {},
  getInboxConversation: {},
  listInboxMessages: {},
  replyFromInbox: {},
  closeInboxConversation: {},
  assignInboxConversation: {},
  markInboxConversationRead: {},
  reportAgentTyping: {},
  getInboxSeen: {},
  streamInbox: {},
  listInboxNotes: {},
  createInboxNote: {},
  updateInboxNote: {},
  deleteInboxNote: {},
  // The visitor in context (visitorScenarios).
  getVisitorContextSettings: {},
  updateVisitorContextSettings: {},
  getBusinessHours: {},
  updateBusinessHours: {},
  deleteVisitorData: {},
  getInboxVisitor: {},
};

// The site routes are built once the fixtures exist (their paths name the site).
function siteScenarios() {
  const members = `/sites/${site}/members`;
  const member = (id: string) => `${members}/${id}`;
  Object.assign(scenarios.listMembers, {
    ...common('get', members, 'members.list'),
    200: () => call('get', members, { cookie: agent.cookie }),
    404: () => call('get', `/sites/${OTHER_SITE}/members`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/members`),
  });
  Object.assign(scenarios.changeMemberRole, {
    ...common('patch', member(NO_ACCOUNT), 'members.changeRole', { role: 'agent' }),
    ...writes('patch', member(NO_ACCOUNT), { role: 'agent' }),
    200: async () => {
      const m = await newMember(h, site, fresh('promote'), 'agent');
      return call('patch', member(m.id), { cookie: owner.cookie, body: { role: 'owner' } });
    },
    404: () => call('patch', member(NO_ACCOUNT), { cookie: owner.cookie, body: { role: 'agent' } }),
    429: () => exhausted('patch', (s, a) => `/sites/${s}/members/${a}`, { role: 'owner' }),
  });
  Object.assign(scenarios.removeMember, {
    ...common('delete', member(NO_ACCOUNT), 'members.remove'),
    204: async () => {
      const m = await newMember(h, site, fresh('remove'), 'agent');
      return call('delete', member(m.id), { cookie: owner.cookie });
    },
    403: () => call('delete', member(owner.id), { cookie: agent.cookie }),
    404: () => call('delete', member(NO_ACCOUNT), { cookie: owner.cookie }),
    429: () => exhausted('delete', (s) => `/sites/${s}/members/${NO_ACCOUNT}`),
  });
  Object.assign(scenarios.endMemberSessions, {
    ...common('delete', `${member(agent.id)}/sessions`, 'members.endSessions'),
    200: async () => {
      const m = await newMember(h, site, fresh('signed-out'), 'agent');
      return call('delete', `${member(m.id)}/sessions`, { cookie: owner.cookie });
    },
    403: () => call('delete', `${member(owner.id)}/sessions`, { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('delete', `${member(NO_ACCOUNT)}/sessions`, { cookie: owner.cookie }),
    // Another member's sessions (none): ending the caller's own would make the second request 401,
    // or 429 by the client address's budget, depending on the minute.
    429: () => exhausted('delete', (s) => `/sites/${s}/members/${NO_ACCOUNT}/sessions`),
  });
  const invitations = `/sites/${site}/invitations`;
  Object.assign(scenarios.createInvitation, {
    ...common('post', invitations, 'invitations.create', { email: 'x@example.com', role: 'agent' }),
    ...writes('post', invitations, { email: 'x@example.com', role: 'agent' }),
    201: () => call('post', invitations, { cookie: owner.cookie, body: { email: fresh('new'), role: 'agent' } }),
    404: () => call('post', `/sites/${OTHER_SITE}/invitations`, { cookie: owner.cookie, body: { email: 'x@example.com', role: 'agent' } }),
    429: () => exhausted('post', (s) => `/sites/${s}/invitations`, { email: 'x@example.com', role: 'agent' }),
  });
  Object.assign(scenarios.listInvitations, {
    ...common('get', invitations, 'invitations.list'),
    200: () => call('get', `${invitations}?limit=2`, { cookie: owner.cookie }),
    400: () => call('get', `${invitations}?limit=0`, { cookie: owner.cookie }),
    403: () => call('get', invitations, { cookie: agent.cookie }),
    404: () => call('get', `/sites/${OTHER_SITE}/invitations`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/invitations`),
  });
  const NO_INVITATION = `${invitations}/inv_00000000000000000000000000`;
  Object.assign(scenarios.revokeInvitation, {
    ...common('delete', NO_INVITATION, 'invitations.revoke'),
    204: async () => call('delete', `${invitations}/${(await invitation(fresh('withdrawn'))).id}`, { cookie: owner.cookie }),
    400: () => call('delete', `${invitations}/not-an-id`, { cookie: owner.cookie }),
    403: () => call('delete', NO_INVITATION, { cookie: agent.cookie }),
    404: () => call('delete', NO_INVITATION, { cookie: owner.cookie }),
    429: () => exhausted('delete', (s) => `/sites/${s}/invitations/inv_00000000000000000000000000`),
  });
  const audit = `/sites/${site}/audit-log`;
  Object.assign(scenarios.listAuditLog, {
    ...common('get', audit, 'audit.page'),
    200: () => call('get', `${audit}?limit=2`, { cookie: owner.cookie }),
    400: () => call('get', `${audit}?limit=101`, { cookie: owner.cookie }),
    403: () => call('get', audit, { cookie: agent.cookie }),
    404: () => call('get', `/sites/${OTHER_SITE}/audit-log`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/audit-log`),
  });
  mailScenarios();
  ownerScenarios();
  eventScenarios();
  inboxScenarios();
  replyScenarios();
  tagScenarios();
  noteScenarios();
  visitorScenarios();
}

type SiteAdminMethod = keyof Harness['runtime']['services']['siteAdmin'];

/** `common` for the site admin service's operations: its 500 comes from that service. */
function ownerCommon(method: Method, path: string, service: SiteAdminMethod, body?: object): Record<string, Scenario> {
  return {
    ...common(method, path, 'signIn.me', body),
    500: async () => {
      const spy = jest
        .spyOn(h.runtime.services.siteAdmin, service as never)
        .mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
      try {
        return await call(method, path, { cookie: owner.cookie, body });
      } finally {
        spy.mockRestore();
      }
    },
  };
}

function ownerScenarios() {
  const siteOf = `/sites/${site}`;
  const other = (path: string) => path.replace(site, OTHER_SITE);
  /** An owner-only operation: the agent's 403, another site's 404, a fresh owner's 429. */
  const ownerOnly = (method: Method, path: string, tail: string, body?: object): Record<string, Scenario> => ({
    403: () => call(method, path, { cookie: agent.cookie, body }),
    404: () => call(method, other(path), { cookie: owner.cookie, body }),
    429: () => exhausted(method, (s) => `/sites/${s}${tail}`, body),
  });
  const ORIGIN = { origin: 'https://shop.example' };
  Object.assign(scenarios.createSite, {
    ...ownerCommon('post', '/sites', 'createSite', { name: 'Contract' }),
    ...writes('post', '/sites', { name: 'Contract' }),
    201: () => call('post', '/sites', { cookie: owner.cookie, body: { name: 'Contract' } }),
    429: () => exhausted('post', () => '/sites', { name: 'Contract' }),
  });
  Object.assign(scenarios.getSite, {
    ...ownerCommon('get', siteOf, 'getSite'),
    ...ownerOnly('get', siteOf, ''),
    200: () => call('get', siteOf, { bearer: ownerToken }),
  });
  Object.assign(scenarios.updateSite, {
    ...ownerCommon('patch', siteOf, 'updateSite', { name: 'Renamed' }),
    ...writes('patch', siteOf, { name: 'Renamed' }),
    ...ownerOnly('patch', siteOf, '', { name: 'Renamed' }),
    200: () => call('patch', siteOf, { cookie: owner.cookie, body: { name: 'Renamed', identityMode: 'optional' } }),
  });
  const origins = `${siteOf}/allowed-origins`;
  Object.assign(scenarios.listAllowedOrigins, {
    ...ownerCommon('get', origins, 'listOrigins'),
    ...ownerOnly('get', origins, '/allowed-origins'),
    200: () => call('get', origins, { cookie: owner.cookie }),
  });
  Object.assign(scenarios.replaceAllowedOrigins, {
    ...ownerCommon('put', origins, 'replaceOrigins', { origins: [] }),
    ...writes('put', origins, { origins: [] }),
    ...ownerOnly('put', origins, '/allowed-origins', { origins: [] }),
    200: () => call('put', origins, { cookie: owner.cookie, body: { origins: ['https://shop.example', 'https://www.shop.example'] } }),
  });
  Object.assign(scenarios.addAllowedOrigin, {
    ...ownerCommon('post', origins, 'addOrigin', ORIGIN),
    ...writes('post', origins, ORIGIN),
    ...ownerOnly('post', origins, '/allowed-origins', ORIGIN),
    200: () => call('post', origins, { cookie: owner.cookie, body: ORIGIN }),
  });
  const removal = `${origins}?origin=${encodeURIComponent('https://gone.example')}`;
  Object.assign(scenarios.removeAllowedOrigin, {
    ...ownerCommon('delete', removal, 'removeOrigin'),
    ...ownerOnly('delete', removal, `/allowed-origins?origin=${encodeURIComponent('https://gone.example')}`),
    200: async () => {
      await call('post', origins, { cookie: owner.cookie, body: { origin: 'https://gone.example' } });
      return call('delete', removal, { cookie: owner.cookie });
    },
    400: () => call('delete', origins, { cookie: owner.cookie }),
    404: () => call('delete', `${origins}?origin=${encodeURIComponent('https://never.example')}`, { cookie: owner.cookie }),
  });
  const rotate = `${siteOf}/identity-secret/rotate`;
  Object.assign(scenarios.rotateIdentitySecret, {
    ...ownerCommon('post', rotate, 'rotateIdentitySecret'),
    ...ownerOnly('post', rotate, '/identity-secret/rotate'),
    200: () => call('post', rotate, { cookie: owner.cookie }),
  });
  const embed = `${siteOf}/embed`;
  Object.assign(scenarios.getEmbedSnippet, {
    ...ownerCommon('get', embed, 'embed'),
    ...ownerOnly('get', embed, '/embed'),
    200: () => call('get', embed, { cookie: owner.cookie }),
  });
  const embedCheck = `${siteOf}/embed/check`;
  const PAGE = { url: 'https://shop.example/' };
  Object.assign(scenarios.checkEmbed, {
    ...common('post', embedCheck, 'signIn.me', PAGE),
    ...writes('post', embedCheck, PAGE),
    ...ownerOnly('post', embedCheck, '/embed/check', PAGE),
    500: async () => {
      const spy = jest.spyOn(h.runtime.services.embedCheck, 'check').mockImplementation(() => Promise.reject(new Error('boom: secret internal detail')));
      try {
        return await call('post', embedCheck, { cookie: owner.cookie, body: PAGE });
      } finally {
        spy.mockRestore();
      }
    },
    // The local receiver's page is reachable (it answers text, so the check says `not_html`).
    200: async () => {
      await call('post', origins, { cookie: owner.cookie, body: { origin: new URL(receiver.url('/')).origin } });
      return call('post', embedCheck, { cookie: owner.cookie, body: { url: receiver.url('/embed-page') } });
    },
    400: () => call('post', embedCheck, { cookie: owner.cookie, body: { url: 'https://not-allowed.example/' } }),
  });
  const files = `${siteOf}/visitor-files`;
  const FILES = { enabled: true, types: ['image/*'] };
  Object.assign(scenarios.getVisitorFiles, {
    ...ownerCommon('get', files, 'visitorFiles'),
    ...ownerOnly('get', files, '/visitor-files'),
    200: () => call('get', files, { bearer: ownerToken }),
  });
  Object.assign(scenarios.updateVisitorFiles, {
    ...ownerCommon('patch', files, 'updateVisitorFiles', FILES),
    ...writes('patch', files, FILES),
    ...ownerOnly('patch', files, '/visitor-files', FILES),
    200: () => call('patch', files, { cookie: owner.cookie, body: { types: null } }),
    400: () => call('patch', files, { cookie: owner.cookie, body: { types: ['not a type'] } }),
  });
  const revocations = `${siteOf}/visitor-revocations`;
  const VISITOR = { visitorId: 'visitor-42' };
  Object.assign(scenarios.revokeVisitors, {
    ...ownerCommon('post', revocations, 'revokeVisitors', VISITOR),
    ...writes('post', revocations, VISITOR),
    ...ownerOnly('post', revocations, '/visitor-revocations', VISITOR),
    200: () => call('post', revocations, { bearer: ownerToken, body: { all: true } }),
    400: () => call('post', revocations, { cookie: owner.cookie, body: { visitorId: 'v', all: true } }),
  });
  const keys = `${siteOf}/keys`;
  const KEY = { label: 'Zapier', scopes: ['conversations:read'] };
  Object.assign(scenarios.listKeys, {
    ...ownerCommon('get', keys, 'listKeys'),
    ...ownerOnly('get', keys, '/keys'),
    200: () => call('get', `${keys}?limit=1`, { cookie: owner.cookie }),
    400: () => call('get', `${keys}?limit=0`, { cookie: owner.cookie }),
  });
  Object.assign(scenarios.createKey, {
    ...ownerCommon('post', keys, 'createKey', KEY),
    ...writes('post', keys, KEY),
    ...ownerOnly('post', keys, '/keys', KEY),
    201: () => call('post', keys, { bearer: ownerToken, body: KEY }),
    400: () => call('post', keys, { cookie: owner.cookie, body: { label: 'x', scopes: ['everything'] } }),
  });
  const NO_KEY = `${keys}/key_00000000000000000000000000`;
  Object.assign(scenarios.revokeKey, {
    ...ownerCommon('delete', NO_KEY, 'revokeKey'),
    ...ownerOnly('delete', NO_KEY, '/keys/key_00000000000000000000000000'),
    200: async () => {
      const made = await call('post', keys, { cookie: owner.cookie, body: KEY });
      return call('delete', `${keys}/${made.body.data.id}`, { cookie: owner.cookie });
    },
    400: () => call('delete', `${keys}/wck_secret`, { cookie: owner.cookie }),
    404: () => call('delete', NO_KEY, { cookie: owner.cookie }),
  });
}

function eventScenarios() {
  const address = `/sites/${site}/event-address`;
  const other = `/sites/${OTHER_SITE}/event-address`;
  const url = { url: 'https://localhost:9/contract' };
  const ownerOnly = (method: Method, path: string, body?: object) => () => call(method, path, { cookie: agent.cookie, body });
  Object.assign(scenarios.getEventAddress, {
    ...commonEvents('get', address, 'getEndpoint'),
    200: async () => {
      await ensureAddress();
      return call('get', address, { cookie: owner.cookie });
    },
    403: ownerOnly('get', address),
    404: () => call('get', other, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/event-address`),
  });
  Object.assign(scenarios.setEventAddress, {
    ...commonEvents('put', address, 'setEndpoint', url),
    ...writes('put', address, url),
    200: async () => {
      await ensureAddress();
      return call('put', address, { cookie: owner.cookie, body: { url: receiver.url('/contract'), events: ['message.created'] } });
    },
    201: async () => {
      const s = await h.newSite();
      const email = fresh('address-owner');
      await newMember(h, s.id, email, 'owner');
      const { cookie } = await signIn(h, email);
      return call('put', `/sites/${s.id}/event-address`, { cookie, body: { url: receiver.url('/contract') } });
    },
    404: () => call('put', other, { cookie: owner.cookie, body: url }),
    429: () => exhausted('put', (s) => `/sites/${s}/event-address`, url),
  });
  Object.assign(scenarios.changeEventAddressState, {
    ...commonEvents('patch', address, 'setEnabled', { enabled: true }),
    ...writes('patch', address, { enabled: true }),
    200: async () => {
      await ensureAddress();
      return call('patch', address, { cookie: owner.cookie, body: { enabled: false } });
    },
    404: () => call('patch', other, { cookie: owner.cookie, body: { enabled: true } }),
    429: () => exhausted('patch', (s) => `/sites/${s}/event-address`, { enabled: true }),
  });
  const rotate = `${address}/secret/rotate`;
  Object.assign(scenarios.rotateEventSecret, {
    ...commonEvents('post', rotate, 'rotateSecret'),
    200: async () => {
      await ensureAddress();
      return call('post', rotate, { cookie: owner.cookie });
    },
    403: ownerOnly('post', rotate),
    404: () => call('post', `${other}/secret/rotate`, { cookie: owner.cookie }),
    429: () => exhausted('post', (s) => `/sites/${s}/event-address/secret/rotate`),
  });
  const roll = `${address}/secret/roll`;
  Object.assign(scenarios.rollEventSecret, {
    ...commonEvents('post', roll, 'rollSecret', { switchInHours: 24 }),
    ...writes('post', roll, { switchInHours: 24 }),
    200: async () => {
      await noRoll();
      return call('post', roll, { cookie: owner.cookie, body: { switchInHours: 48 } });
    },
    404: () => call('post', `${other}/secret/roll`, { cookie: owner.cookie, body: {} }),
    409: async () => {
      await noRoll();
      await h.runtime.services.webhooks.rollSecret(site);
      return call('post', roll, { cookie: owner.cookie, body: {} });
    },
    429: () => exhausted('post', (s) => `/sites/${s}/event-address/secret/roll`, {}),
  });
  Object.assign(scenarios.cancelEventSecretRoll, {
    ...commonEvents('delete', roll, 'cancelSecretRoll'),
    200: async () => {
      await noRoll();
      await h.runtime.services.webhooks.rollSecret(site);
      return call('delete', roll, { cookie: owner.cookie });
    },
    400: async () => {
      await noRoll();
      return call('delete', roll, { cookie: owner.cookie });
    },
    403: ownerOnly('delete', roll),
    404: () => call('delete', `${other}/secret/roll`, { cookie: owner.cookie }),
    409: async () => {
      // Switching now: too late to take the roll back.
      await noRoll();
      await h.runtime.services.webhooks.rollSecret(site);
      await h.runtime.services.webhooks.switchSecret(site);
      return call('delete', roll, { cookie: owner.cookie });
    },
    429: () => exhausted('delete', (s) => `/sites/${s}/event-address/secret/roll`),
  });
  const switchNow = `${address}/secret/switch`;
  Object.assign(scenarios.switchEventSecret, {
    ...commonEvents('post', switchNow, 'switchSecret'),
    200: async () => {
      await noRoll();
      await h.runtime.services.webhooks.rollSecret(site);
      return call('post', switchNow, { cookie: owner.cookie });
    },
    400: async () => {
      await ensureAddress();
      await h.runtime.services.webhooks.rotateSecret(site); // no roll pending
      return call('post', switchNow, { cookie: owner.cookie });
    },
    403: ownerOnly('post', switchNow),
    404: () => call('post', `${other}/secret/switch`, { cookie: owner.cookie }),
    429: () => exhausted('post', (s) => `/sites/${s}/event-address/secret/switch`),
  });
  const test = `${address}/test`;
  Object.assign(scenarios.sendTestEvent, {
    ...commonEvents('post', test, 'sendTest', { event: 'message.created' }),
    ...writes('post', test, { event: 'message.created' }),
    200: async () => {
      await ensureAddress();
      return call('post', test, { cookie: owner.cookie, body: { event: 'conversation.started' } });
    },
    404: () => call('post', `/sites/${OTHER_SITE}/event-address/test`, { cookie: owner.cookie, body: { event: 'message.created' } }),
    429: () => exhausted('post', (s) => `/sites/${s}/event-address/test`, { event: 'message.created' }),
  });
  const deliveries = `/sites/${site}/deliveries`;
  Object.assign(scenarios.listDeliveries, {
    ...commonEvents('get', deliveries, 'listDeliveries'),
    200: async () => {
      await pendingEvent();
      return call('get', `${deliveries}?event=message.created&outcome=pending&since=${SINCE_Q}&limit=2`, { cookie: owner.cookie });
    },
    403: ownerOnly('get', deliveries),
    404: () => call('get', `/sites/${OTHER_SITE}/deliveries`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/deliveries`),
  });
  const delivery = `${deliveries}/${NO_EVENT}`;
  Object.assign(scenarios.getDelivery, {
    ...commonEvents('get', delivery, 'getDelivery'),
    200: async () => {
      const { eventId } = await pendingEvent();
      return call('get', `${deliveries}/${encodeURIComponent(eventId)}`, { cookie: owner.cookie });
    },
    403: ownerOnly('get', delivery),
    404: () => call('get', delivery, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/deliveries/${NO_EVENT}`),
  });
  Object.assign(scenarios.redeliverDelivery, {
    ...commonEvents('post', `${delivery}/redeliver`, 'redeliverEvent'),
    202: async () => {
      const { eventId } = await pendingEvent();
      return call('post', `${deliveries}/${encodeURIComponent(eventId)}/redeliver`, { cookie: owner.cookie });
    },
    403: ownerOnly('post', `${delivery}/redeliver`),
    404: () => call('post', `${delivery}/redeliver`, { cookie: owner.cookie }),
    429: () => exhausted('post', (s) => `/sites/${s}/deliveries/${NO_EVENT}/redeliver`),
  });
  const recovery = `/sites/${site}/delivery-recovery`;
  Object.assign(scenarios.countRecoverableDeliveries, {
    ...commonEvents('get', `${recovery}?since=${SINCE_Q}`, 'countFailedSince'),
    200: () => call('get', `${recovery}?since=${SINCE_Q}`, { cookie: owner.cookie }),
    403: ownerOnly('get', `${recovery}?since=${SINCE_Q}`),
    404: () => call('get', `/sites/${OTHER_SITE}/delivery-recovery?since=${SINCE_Q}`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/delivery-recovery?since=${SINCE_Q}`),
  });
  Object.assign(scenarios.recoverDeliveries, {
    ...commonEvents('post', recovery, 'redeliverFailedSince', { since: SINCE }),
    ...writes('post', recovery, { since: SINCE }),
    202: async () => {
      await ensureAddress();
      return call('post', recovery, { cookie: owner.cookie, body: { since: SINCE } });
    },
    404: () => call('post', `/sites/${OTHER_SITE}/delivery-recovery`, { cookie: owner.cookie, body: { since: SINCE } }),
    429: () => exhausted('post', (s) => `/sites/${s}/delivery-recovery`, { since: SINCE }),
  });
  const noConversation = `/sites/${site}/conversations/conv_00000000000000000000000000/timeline`;
  Object.assign(scenarios.getConversationTimeline, {
    ...commonEvents('get', noConversation, 'timeline'),
    200: async () => {
      const { conversationId } = await pendingEvent();
      return call('get', `/sites/${site}/conversations/${conversationId}/timeline?limit=10`, { cookie: agent.cookie });
    },
    404: () => call('get', noConversation, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/conversations/conv_00000000000000000000000000/timeline`),
  });
}

const NO_CONVERSATION = 'conv_00000000000000000000000000';
let visitorCount = 0;
/** A fresh open conversation of the fixture site. */
const conversation = async () => (await h.visitorSay(site, `contract-visitor-${++visitorCount}`, 'hello')).conversation.id as string;

/** The inbox's 500 is a fault in the session's read, which brings the caller's role with it (manage/entry.ts). */
function inboxScenarios() {
  const inbox = `/sites/${site}/inbox/conversations`;
  const one = (id: string) => `${inbox}/${id}`;
  const missing = one(NO_CONVERSATION);
  const otherSite = `/sites/${OTHER_SITE}/inbox/conversations`;
  Object.assign(scenarios.listInboxConversations, {
    ...common('get', inbox, 'signIn.authenticate'),
    200: async () => {
      await conversation();
      return call('get', `${inbox}?assignee=unassigned&unread=true&limit=2`, { cookie: agent.cookie });
    },
    400: () => call('get', `${inbox}?assignee=someone`, { cookie: owner.cookie }),
    404: () => call('get', otherSite, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations`),
  });
  Object.assign(scenarios.getInboxConversation, {
    ...common('get', missing, 'signIn.authenticate'),
    200: async () => call('get', one(await conversation()), { cookie: agent.cookie }),
    400: () => call('get', one('not-a-conversation'), { cookie: owner.cookie }),
    404: () => call('get', missing, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}`),
  });
  Object.assign(scenarios.listInboxMessages, {
    ...common('get', `${missing}/messages`, 'signIn.authenticate'),
    200: async () => call('get', `${one(await conversation())}/messages?order=desc`, { cookie: agent.cookie }),
    400: () => call('get', `${missing}/messages?order=sideways`, { cookie: owner.cookie }),
    404: () => call('get', `${missing}/messages`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/messages`),
  });
  const reply = { content: 'Thanks, looking into it.' };
  Object.assign(scenarios.replyFromInbox, {
    ...common('post', `${missing}/messages`, 'signIn.authenticate', reply),
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
    ...common('post', `${missing}/close`, 'signIn.authenticate'),
    200: async () => call('post', `${one(await conversation())}/close`, { cookie: agent.cookie }),
    400: () => call('post', `${one('nope')}/close`, { cookie: owner.cookie }),
    403: () => call('post', `${missing}/close`, { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('post', `${missing}/close`, { cookie: owner.cookie }),
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/close`),
  });
  Object.assign(scenarios.assignInboxConversation, {
    ...common('post', `${missing}/assignee`, 'signIn.authenticate', { assigneeId: null }),
    ...writes('post', `${missing}/assignee`, { assigneeId: null }),
    200: async () => call('post', `${one(await conversation())}/assignee`, { cookie: agent.cookie, body: { assigneeId: agent.id } }),
    400: () => call('post', `${missing}/assignee`, { cookie: owner.cookie, body: { assigneeId: 'someone' } }),
    403: async () => call('post', `${one(await conversation())}/assignee`, { cookie: agent.cookie, body: { assigneeId: owner.id } }),
    404: () => call('post', `${missing}/assignee`, { cookie: owner.cookie, body: { assigneeId: null } }),
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/assignee`, { assigneeId: null }),
  });
  Object.assign(scenarios.markInboxConversationRead, {
    ...common('post', `${missing}/read`, 'signIn.authenticate'),
    200: async () => call('post', `${one(await conversation())}/read`, { cookie: agent.cookie }),
    400: () => call('post', `${one('nope')}/read`, { cookie: owner.cookie }),
    403: () => call('post', `${missing}/read`, { cookie: owner.cookie, headers: CROSS_SITE }),
    404: () => call('post', `${missing}/read`, { cookie: owner.cookie }),
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/read`),
  });
  const typing = { typing: true };
  Object.assign(scenarios.reportAgentTyping, {
    ...common('post', `${missing}/typing`, 'signIn.authenticate', typing),
    ...writes('post', `${missing}/typing`, typing),
    204: async () => call('post', `${one(await conversation())}/typing`, { cookie: agent.cookie, body: typing }),
    400: () => call('post', `${missing}/typing`, { cookie: owner.cookie, body: { typing: 'yes' } }),
    404: () => call('post', `${missing}/typing`, { cookie: owner.cookie, body: typing }),
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/typing`, typing),
  });
  Object.assign(scenarios.getInboxSeen, {
    ...common('get', `${missing}/seen`, 'signIn.authenticate'),
    200: async () => call('get', `${one(await conversation())}/seen`, { cookie: agent.cookie }),
    400: () => call('get', `${one('nope')}/seen`, { cookie: owner.cookie }),
    404: () => call('get', `${missing}/seen`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/seen`),
  });
  const events = `/sites/${site}/inbox/events`;
  Object.assign(scenarios.streamInbox, {
    ...common('get', events, 'signIn.authenticate'),
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

type Services = Harness['runtime']['services'];

/** `common` for a feature service's operations (shared replies, tags): their 500 comes from that service. */
function featureCommon<F extends 'replies' | 'tags'>(
  feature: F,
  method: Method,
  path: string,
  service: keyof Services[F],
  body?: object,
): Record<string, Scenario> {
  return {
    ...common(method, path, 'signIn.me', body),
    500: async () => {
      const spy = jest
        .spyOn(h.runtime.services[feature], service as never)
        .mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
      try {
        return await call(method, path, { cookie: owner.cookie, body });
      } finally {
        spy.mockRestore();
      }
    },
  };
}
const repliesCommon = (method: Method, path: string, service: keyof Services['replies'], body?: object) =>
  featureCommon('replies', method, path, service, body);
const tagsCommon = (method: Method, path: string, service: keyof Services['tags'], body?: object) => featureCommon('tags', method, path, service, body);

/** Tags (server/tags/): the site's list (owners) and the tags on conversations (members). */
function tagScenarios() {
  const list = `/sites/${site}/tags`;
  const NO_TAG = `${list}/tag_00000000000000000000000000`;
  const made = async (name: string) => (await call('post', list, { cookie: owner.cookie, body: { name } })).body.data.id as string;
  const on = (conversationId: string, tagId: string, siteId = site) => `/sites/${siteId}/inbox/conversations/${conversationId}/tags/${tagId}`;
  Object.assign(scenarios.listTags, {
    ...tagsCommon('get', list, 'list'),
    200: async () => {
      await made(`Listed ${++counter}`);
      return call('get', list, { cookie: agent.cookie });
    },
    404: () => call('get', `/sites/${OTHER_SITE}/tags`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/tags`),
  });
  Object.assign(scenarios.createTag, {
    ...tagsCommon('post', list, 'create', { name: 'Contract' }),
    ...writes('post', list, { name: 'Contract' }),
    201: () => call('post', list, { cookie: owner.cookie, body: { name: `Made ${++counter}` } }),
    400: () => call('post', list, { cookie: owner.cookie, body: { name: 'x'.repeat(51) } }),
    404: () => call('post', `/sites/${OTHER_SITE}/tags`, { cookie: owner.cookie, body: { name: 'x' } }),
    409: async () => {
      await made('Taken tag');
      return call('post', list, { cookie: owner.cookie, body: { name: 'TAKEN TAG' } });
    },
    429: () => exhausted('post', (s) => `/sites/${s}/tags`, { name: 'x' }),
  });
  Object.assign(scenarios.renameTag, {
    ...tagsCommon('patch', NO_TAG, 'rename', { name: 'x' }),
    ...writes('patch', NO_TAG, { name: 'x' }),
    200: async () => call('patch', `${list}/${await made(`To rename ${++counter}`)}`, { cookie: owner.cookie, body: { name: `Renamed ${++counter}` } }),
    400: () => call('patch', NO_TAG, { cookie: owner.cookie, body: {} }),
    404: () => call('patch', NO_TAG, { cookie: owner.cookie, body: { name: 'x' } }),
    409: async () => {
      await made('Kept tag');
      return call('patch', `${list}/${await made(`Clash ${++counter}`)}`, { cookie: owner.cookie, body: { name: 'kept TAG' } });
    },
    429: () => exhausted('patch', (s) => `/sites/${s}/tags/tag_00000000000000000000000000`, { name: 'x' }),
  });
  Object.assign(scenarios.deleteTag, {
    ...tagsCommon('delete', NO_TAG, 'remove'),
    204: async () => call('delete', `${list}/${await made(`To delete ${++counter}`)}`, { cookie: owner.cookie }),
    400: () => call('delete', `${list}/not-a-tag`, { cookie: owner.cookie }),
    403: () => call('delete', NO_TAG, { cookie: agent.cookie }),
    404: () => call('delete', NO_TAG, { cookie: owner.cookie }),
    429: () => exhausted('delete', (s) => `/sites/${s}/tags/tag_00000000000000000000000000`),
  });
  const NO_TAG_ID = 'tag_00000000000000000000000000';
  for (const [operation, method, service] of [
    ['tagInboxConversation', 'put', 'apply'],
    ['untagInboxConversation', 'delete', 'unapply'],
  ] as const) {
    Object.assign(scenarios[operation], {
      ...tagsCommon(method, on(NO_CONVERSATION, NO_TAG_ID), service),
      200: async () => call(method, on(await conversation(), await made(`Applied ${++counter}`)), { cookie: agent.cookie }),
      400: () => call(method, on('not-a-conversation', NO_TAG_ID), { cookie: agent.cookie }),
      403: () => call(method, on(NO_CONVERSATION, NO_TAG_ID), { cookie: agent.cookie, headers: CROSS_SITE }),
      404: async () => call(method, on(await conversation(), NO_TAG_ID), { cookie: agent.cookie }),
      429: () => exhausted(method, (s) => on(NO_CONVERSATION, NO_TAG_ID, s)),
    });
  }
}

/** Shared replies (server/replies/) and the agent-names setting. */
function replyScenarios() {
  const list = `/sites/${site}/shared-replies`;
  const NO_REPLY = `${list}/srp_00000000000000000000000000`;
  const made = async (title: string) =>
    (await call('post', list, { cookie: owner.cookie, body: { title, body: 'Hello {visitor.name}' } })).body.data.id as string;
  const reply = { title: 'Contract', body: 'Hello {visitor.name}' };
  Object.assign(scenarios.listSharedReplies, {
    ...repliesCommon('get', list, 'list'),
    200: async () => {
      await made(`Listed ${++counter}`);
      return call('get', list, { cookie: agent.cookie });
    },
    404: () => call('get', `/sites/${OTHER_SITE}/shared-replies`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/shared-replies`),
  });
  Object.assign(scenarios.createSharedReply, {
    ...repliesCommon('post', list, 'create', reply),
    ...writes('post', list, reply),
    201: () => call('post', list, { cookie: owner.cookie, body: { title: `Made ${++counter}`, body: 'Hi {visitor.firstName|there}' } }),
    400: () => call('post', list, { cookie: owner.cookie, body: { title: 'Typo', body: 'Hi {visitor.nmae}' } }),
    404: () => call('post', `/sites/${OTHER_SITE}/shared-replies`, { cookie: owner.cookie, body: reply }),
    409: async () => {
      await made('Taken');
      return call('post', list, { cookie: owner.cookie, body: { title: 'TAKEN', body: 'x' } });
    },
    429: () => exhausted('post', (s) => `/sites/${s}/shared-replies`, reply),
  });
  const batch = { replies: [reply] };
  const imports = `/sites/${site}/shared-reply-imports`;
  Object.assign(scenarios.importSharedReplies, {
    ...repliesCommon('post', imports, 'import', batch),
    ...writes('post', imports, batch),
    200: () => call('post', imports, { cookie: owner.cookie, body: { replies: [{ title: `Imported ${++counter}`, body: 'x' }, reply, reply] } }),
    400: () => call('post', imports, { cookie: owner.cookie, body: { replies: [] } }),
    404: () => call('post', `/sites/${OTHER_SITE}/shared-reply-imports`, { cookie: owner.cookie, body: batch }),
    429: () => exhausted('post', (s) => `/sites/${s}/shared-reply-imports`, batch),
  });
  Object.assign(scenarios.updateSharedReply, {
    ...repliesCommon('patch', NO_REPLY, 'update', { body: 'x' }),
    ...writes('patch', NO_REPLY, { body: 'x' }),
    200: async () => call('patch', `${list}/${await made(`To change ${++counter}`)}`, { cookie: owner.cookie, body: { body: 'Changed' } }),
    400: () => call('patch', NO_REPLY, { cookie: owner.cookie, body: {} }),
    404: () => call('patch', NO_REPLY, { cookie: owner.cookie, body: { body: 'x' } }),
    409: async () => {
      await made('Kept title');
      return call('patch', `${list}/${await made(`Renamed ${++counter}`)}`, { cookie: owner.cookie, body: { title: 'kept TITLE' } });
    },
    429: () => exhausted('patch', (s) => `/sites/${s}/shared-replies/srp_00000000000000000000000000`, { body: 'x' }),
  });
  Object.assign(scenarios.deleteSharedReply, {
    ...repliesCommon('delete', NO_REPLY, 'remove'),
    204: async () => call('delete', `${list}/${await made(`To delete ${++counter}`)}`, { cookie: owner.cookie }),
    400: () => call('delete', `${list}/not-a-reply`, { cookie: owner.cookie }),
    403: () => call('delete', NO_REPLY, { cookie: agent.cookie }),
    404: () => call('delete', NO_REPLY, { cookie: owner.cookie }),
    429: () => exhausted('delete', (s) => `/sites/${s}/shared-replies/srp_00000000000000000000000000`),
  });
  const filled = (id: string) => `/sites/${site}/inbox/conversations/${id}/shared-replies`;
  Object.assign(scenarios.listConversationSharedReplies, {
    ...repliesCommon('get', filled(NO_CONVERSATION), 'filledFor'),
    200: async () => call('get', filled(await conversation()), { cookie: agent.cookie }),
    400: () => call('get', filled('not-a-conversation'), { cookie: owner.cookie }),
    404: () => call('get', filled(NO_CONVERSATION), { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/shared-replies`),
  });
  const names = `/sites/${site}/agent-names`;
  Object.assign(scenarios.getAgentNames, {
    ...ownerCommon('get', names, 'agentNames'),
    200: () => call('get', names, { cookie: owner.cookie }),
    403: () => call('get', names, { cookie: agent.cookie }),
    404: () => call('get', `/sites/${OTHER_SITE}/agent-names`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/agent-names`),
  });
  Object.assign(scenarios.setAgentNames, {
    ...ownerCommon('put', names, 'setAgentNames', { shown: true }),
    ...writes('put', names, { shown: true }),
    200: () => call('put', names, { cookie: owner.cookie, body: { shown: true } }),
    404: () => call('put', `/sites/${OTHER_SITE}/agent-names`, { cookie: owner.cookie, body: { shown: true } }),
    429: () => exhausted('put', (s) => `/sites/${s}/agent-names`, { shown: false }),
  });
}

/** Internal notes (server/notes): each status provoked on a conversation of the fixture site. */
function noteScenarios() {
  const notes = (id: string) => `/sites/${site}/inbox/conversations/${id}/notes`;
  const missing = notes(NO_CONVERSATION);
  const NO_NOTE = 'note_00000000000000000000000000';
  const note = { content: 'Internal: refund approved.' };
  /** A note of a fresh conversation, written by `cookie`'s member. */
  const written = async (cookie = agent.cookie) => {
    const id = await conversation();
    const res = await call('post', notes(id), { cookie, body: note });
    return { conversationId: id, noteId: res.body.data.id as string };
  };
  Object.assign(scenarios.listInboxNotes, {
    ...common('get', missing, 'signIn.authenticate'),
    200: async () => call('get', `${notes((await written()).conversationId)}?order=desc&limit=2`, { cookie: agent.cookie }),
    400: () => call('get', `${missing}?order=sideways`, { cookie: owner.cookie }),
    404: () => call('get', missing, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/notes`),
  });
  Object.assign(scenarios.createInboxNote, {
    ...common('post', missing, 'signIn.authenticate', note),
    ...writes('post', missing, note),
    201: async () => call('post', notes(await conversation()), { cookie: agent.cookie, body: { content: '@owner@example.com look', format: 'markdown' } }),
    400: () => call('post', missing, { cookie: owner.cookie, body: { content: '   ' } }),
    404: () => call('post', missing, { cookie: owner.cookie, body: note }),
    // The first request held at its read of the members (its mention) while the same key comes again.
    409: async () => {
      const id = await conversation();
      const headers = { ...SAME_ORIGIN, 'Idempotency-Key': `contract-note-${id}` };
      const body = { content: '@owner@example.com held' };
      const hold = holdStatements(h.runtime.db, /from [`"]memberships[`"] as [`"]m[`"] inner join/);
      try {
        const first = call('post', notes(id), { cookie: agent.cookie, body, headers }).then((r) => r);
        await waitFor('the first note held', () => hold.held > 0);
        const repeat = await call('post', notes(id), { cookie: agent.cookie, body, headers });
        hold.release();
        await first;
        return repeat;
      } finally {
        hold.release();
      }
    },
    422: async () => {
      const id = await conversation();
      const headers = { ...SAME_ORIGIN, 'Idempotency-Key': `contract-note-${id}` };
      await call('post', notes(id), { cookie: owner.cookie, body: note, headers });
      return call('post', notes(id), { cookie: owner.cookie, body: { content: 'another note' }, headers });
    },
    429: () => exhausted('post', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/notes`, note),
  });
  const change = { content: 'Internal: refund sent.' };
  Object.assign(scenarios.updateInboxNote, {
    ...common('patch', `${missing}/${NO_NOTE}`, 'signIn.authenticate', change),
    ...writes('patch', `${missing}/${NO_NOTE}`, change),
    200: async () => {
      const w = await written();
      return call('patch', `${notes(w.conversationId)}/${w.noteId}`, { cookie: agent.cookie, body: change });
    },
    400: () => call('patch', `${missing}/not-a-note`, { cookie: owner.cookie, body: change }),
    404: () => call('patch', `${missing}/${NO_NOTE}`, { cookie: owner.cookie, body: change }),
    // Written more than a day ago: past its author's edit window.
    409: async () => {
      const w = await written();
      await h.runtime
        .db('notes')
        .where({ id: w.noteId })
        .update({ created_at: Date.now() - 25 * 3600_000 });
      return call('patch', `${notes(w.conversationId)}/${w.noteId}`, { cookie: agent.cookie, body: change });
    },
    429: () => exhausted('patch', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/notes/${NO_NOTE}`, change),
  });
  Object.assign(scenarios.deleteInboxNote, {
    ...common('delete', `${missing}/${NO_NOTE}`, 'signIn.authenticate'),
    204: async () => {
      const w = await written();
      return call('delete', `${notes(w.conversationId)}/${w.noteId}`, { cookie: agent.cookie });
    },
    400: () => call('delete', `${missing}/not-a-note`, { cookie: owner.cookie }),
    // An agent may not delete another member's note.
    403: async () => {
      const w = await written(owner.cookie);
      return call('delete', `${notes(w.conversationId)}/${w.noteId}`, { cookie: agent.cookie });
    },
    404: () => call('delete', `${missing}/${NO_NOTE}`, { cookie: owner.cookie }),
    429: () => exhausted('delete', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/notes/${NO_NOTE}`),
  });
}

/** A method of the visitors' context or deletion service throwing something unexpected while `send` runs. */
function failingVisitors(part: 'context' | 'deletion' | 'replyEmails', method: string, send: () => request.Test): Scenario {
  return async () => {
    const spy = jest
      .spyOn(h.runtime.services.visitors[part], method as never)
      .mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
    try {
      return await send();
    } finally {
      spy.mockRestore();
    }
  };
}

function visitorScenarios() {
  const settings = `/sites/${site}/visitor-context`;
  const other = (path: string) => path.replace(site, OTHER_SITE);
  const ownerOnly = (method: Method, path: string, tail: string, body?: object): Record<string, Scenario> => ({
    403: () => call(method, path, { cookie: agent.cookie, body }),
    404: () => call(method, other(path), { cookie: owner.cookie, body }),
    429: () => exhausted(method, (s) => `/sites/${s}${tail}`, body),
  });
  Object.assign(scenarios.getVisitorContextSettings, {
    ...common('get', settings, 'signIn.me'),
    ...ownerOnly('get', settings, '/visitor-context'),
    200: () => call('get', settings, { bearer: ownerToken }),
    500: failingVisitors('context', 'settings', () => call('get', settings, { cookie: owner.cookie })),
  });
  const TRACKING = { pageTracking: true };
  Object.assign(scenarios.updateVisitorContextSettings, {
    ...common('patch', settings, 'signIn.me', TRACKING),
    ...writes('patch', settings, TRACKING),
    ...ownerOnly('patch', settings, '/visitor-context', TRACKING),
    200: () => call('patch', settings, { cookie: owner.cookie, body: { keepQuery: false } }),
    400: () => call('patch', settings, { cookie: owner.cookie, body: {} }),
    500: failingVisitors('context', 'updateSettings', () => call('patch', settings, { cookie: owner.cookie, body: TRACKING })),
  });
  const hoursPath = `/sites/${site}/business-hours`;
  const week = { mon: [['09:00', '17:00']], tue: [], wed: [], thu: [], fri: [], sat: [], sun: [] };
  const HOURS = { enabled: true, timeZone: 'Europe/Berlin', week, awayMessage: null };
  Object.assign(scenarios.getBusinessHours, {
    ...common('get', hoursPath, 'signIn.me'),
    ...ownerOnly('get', hoursPath, '/business-hours'),
    200: () => call('get', hoursPath, { bearer: ownerToken }),
    500: failingVisitors('replyEmails', 'hours', () => call('get', hoursPath, { cookie: owner.cookie })),
  });
  Object.assign(scenarios.updateBusinessHours, {
    ...common('put', hoursPath, 'signIn.me', HOURS),
    ...writes('put', hoursPath, HOURS),
    ...ownerOnly('put', hoursPath, '/business-hours', HOURS),
    200: () => call('put', hoursPath, { cookie: owner.cookie, body: HOURS }),
    400: () => call('put', hoursPath, { cookie: owner.cookie, body: { ...HOURS, timeZone: 'Mars/Olympus' } }),
    500: failingVisitors('replyEmails', 'updateHours', () => call('put', hoursPath, { cookie: owner.cookie, body: HOURS })),
  });
  const deletions = `/sites/${site}/visitor-deletions`;
  const VISITOR = { visitorId: 'contract-erased' };
  Object.assign(scenarios.deleteVisitorData, {
    ...common('post', deletions, 'signIn.me', VISITOR),
    ...writes('post', deletions, VISITOR),
    ...ownerOnly('post', deletions, '/visitor-deletions', VISITOR),
    200: async () => {
      await h.visitorSay(site, 'contract-erased', 'erase me');
      return call('post', deletions, { bearer: ownerToken, body: VISITOR });
    },
    400: () => call('post', deletions, { cookie: owner.cookie, body: { visitorId: 'has space' } }),
    500: failingVisitors('deletion', 'deleteVisitor', () => call('post', deletions, { cookie: owner.cookie, body: VISITOR })),
  });
  const visitorOf = (id: string) => `/sites/${site}/inbox/conversations/${id}/visitor`;
  const missing = visitorOf(NO_CONVERSATION);
  Object.assign(scenarios.getInboxVisitor, {
    ...common('get', missing, 'signIn.me'),
    200: async () => call('get', visitorOf(await conversation()), { cookie: agent.cookie }),
    400: () => call('get', visitorOf('not-a-conversation'), { cookie: owner.cookie }),
    404: () => call('get', missing, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/inbox/conversations/${NO_CONVERSATION}/visitor`),
    500: failingVisitors('context', 'panel', () => call('get', missing, { cookie: owner.cookie })),
  });
}

/** A mail-log method throwing something unexpected while `send` runs. */
function failingMail(method: 'page' | 'sendTest', send: () => request.Test): Scenario {
  return async () => {
    const spy = jest.spyOn(h.runtime.services.mail.log, method).mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
    try {
      return await send();
    } finally {
      spy.mockRestore();
    }
  };
}

/** A method of the agents' alerts service throwing something unexpected while `send` runs. */
function failingAlerts(method: 'setting' | 'setSetting' | 'unsubscribe', send: () => request.Test): Scenario {
  return async () => {
    const spy = jest
      .spyOn(h.runtime.services.agentAlerts.service, method)
      .mockImplementation((() => Promise.reject(new Error('boom: secret internal detail'))) as never);
    try {
      return await send();
    } finally {
      spy.mockRestore();
    }
  };
}

function mailScenarios() {
  const alerts = `/sites/${site}/me/alerts`;
  const setting = { mode: 'assigned', waitMinutes: 10 };
  Object.assign(scenarios.getMyAlerts, {
    200: () => call('get', alerts, { cookie: agent.cookie }),
    400: () => call('get', `${alerts}?unknown=1`, { cookie: agent.cookie }),
    401: () => call('get', alerts),
    404: () => call('get', `/sites/${OTHER_SITE}/me/alerts`, { cookie: agent.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/me/alerts`),
    500: failingAlerts('setting', () => call('get', alerts, { cookie: agent.cookie })),
    503: () => call('get', alerts, { app: broken.app, cookie: DEAD_COOKIE }),
  });
  Object.assign(scenarios.setMyAlerts, {
    200: () => call('put', alerts, { cookie: agent.cookie, body: setting }),
    400: () => call('put', alerts, { cookie: agent.cookie, body: { mode: 'sometimes', waitMinutes: 0 } }),
    401: () => call('put', alerts, { body: setting }),
    403: () => call('put', alerts, { cookie: agent.cookie, body: setting, headers: CROSS_SITE }),
    404: () => call('put', `/sites/${OTHER_SITE}/me/alerts`, { cookie: agent.cookie, body: setting }),
    413: () => call('put', alerts, { cookie: agent.cookie, body: TOO_BIG }),
    415: () => call('put', alerts, { cookie: agent.cookie, body: 'mode=all' }),
    429: () => exhausted('put', (s) => `/sites/${s}/me/alerts`, setting),
    500: failingAlerts('setSetting', () => call('put', alerts, { cookie: agent.cookie, body: setting })),
    503: () => call('put', alerts, { app: broken.app, cookie: DEAD_COOKIE, body: setting }),
  });
  const log = `/sites/${site}/mail-log`;
  Object.assign(scenarios.listMailLog, {
    200: () => call('get', `${log}?limit=2`, { cookie: owner.cookie }),
    400: () => call('get', `${log}?limit=101`, { cookie: owner.cookie }),
    401: () => call('get', log),
    403: () => call('get', log, { cookie: agent.cookie }),
    404: () => call('get', `/sites/${OTHER_SITE}/mail-log`, { cookie: owner.cookie }),
    429: () => exhausted('get', (s) => `/sites/${s}/mail-log`),
    500: failingMail('page', () => call('get', log, { cookie: owner.cookie })),
    503: () => call('get', log, { app: broken.app, cookie: DEAD_COOKIE }),
  });
  const test = `${log}/test`;
  Object.assign(scenarios.sendTestEmail, {
    202: () => call('post', test, { cookie: owner.cookie }),
    400: () => call('post', `${test}?unknown=1`, { cookie: owner.cookie }),
    401: () => call('post', test),
    403: () => call('post', test, { cookie: agent.cookie }),
    404: () => call('post', `/sites/${OTHER_SITE}/mail-log/test`, { cookie: owner.cookie }),
    429: () => exhausted('post', (s) => `/sites/${s}/mail-log/test`),
    500: failingMail('sendTest', () => call('post', test, { cookie: owner.cookie })),
    503: () => call('post', test, { app: broken.app, cookie: DEAD_COOKIE }),
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
