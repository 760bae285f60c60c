import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { Harness } from '../helpers/harness';
import type { Receiver } from '../webhooks/helpers';
import { PASSWORD } from '../manage/helpers';
import { documentChecks } from '../helpers/openapi';
import { manageDocument } from '../../server/http/openapi-document';
import { ERROR_STATUS, type ErrorCode } from '../../server/platform/errors';
import type { Operation } from './operations';
import type { Credential, FuzzCase, FuzzDomain } from './requests';
import { DECIDED_ERRORS, Expectations, header } from './checks';
import type { FuzzServer, WireAnswer } from './wire';
import { cursorArb } from './world';
import { valid } from './schema-arbitraries';

/**
 * The management API's world: site A with an owner and an agent (each with a management token and
 * a session cookie), members that owner-only operations may change or remove, accounts whose own
 * sessions and password the fuzz may end or change, keys, an event address with deliveries,
 * conversations in every state and invitations; site B with the same kinds of objects. The fuzz
 * speaks as A's accounts; every id and string of B is a marker that must never reach an answer,
 * and a request that names one must not succeed.
 */
export interface ManageWorld {
  serviceOrigin: string;
  a: ManageSite;
  b: ManageSite;
  creds: {
    owner: { token: string; cookie: string };
    agent: { token: string; cookie: string };
    /** Signs out and ends its sessions: a pool of cookies that signOut spends, and a token. */
    spare: { token: string; cookies: string[]; sessionIds: string[] };
    /** Changes its own password (to the same one): its sessions end, never the others'. */
    password: { token: string; cookie: string };
    revokedToken: string;
    signInEmail: string;
    /** Wrong passwords go to this account, so they never use up the sign-in account's budget (10 in 15 minutes). */
    wrongPasswordEmail: string;
  };
  /** Invitations to A (agent), each with its token and email: accepted at most once. */
  invitations: { token: string; email: string }[];
  bMarkers: string[];
}

export interface ManageSite {
  siteId: string;
  /** Members an owner may change or remove (never the accounts the fuzz speaks as). */
  memberTargets: string[];
  /** Every member id (B's all count as B's ids). */
  memberIds: string[];
  /** Tokens that may be revoked (never one the fuzz authenticates with). */
  tokenIds: string[];
  sessionIds: string[];
  keyIds: string[];
  eventIds: string[];
  origins: string[];
  replyConversations: string[];
  closableConversations: string[];
  closedConversations: string[];
  /** Real `page.nextCursor` values by operation. */
  cursors: Record<string, string[]>;
}

const decoded = (target: string) => {
  try {
    return decodeURIComponent(target.replace(/\+/g, ' '));
  } catch {
    return target;
  }
};

const tag = () => randomBytes(6).toString('hex');

async function seedSite(h: Harness, server: FuzzServer, receiver: Receiver, siteId: string, who: 'a' | 'b', markers: string[]) {
  const { accounts, webhooks, conversations } = h.runtime.services;
  const chat = h.runtime.services.window.chat;
  const account = async (role: 'owner' | 'agent') => {
    const email = `${who}-${role}-${tag()}@example.com`;
    const created = await accounts.registry.create(email, PASSWORD);
    await accounts.members.add({ manager: null, clientIp: null }, siteId, email, role);
    const session = await accounts.signIn.signIn(email, PASSWORD, {});
    const manager = { accountId: created.id, email, via: 'session' as const };
    const token = await accounts.tokens.create({ manager, clientIp: null }, 'fuzz');
    markers.push(created.id, email, token.id);
    return { id: created.id, email, manager, cookie: `__Host-session=${session.token}`, token: token.token, tokenId: token.id };
  };
  const owner = await account('owner');
  const agent = await account('agent');
  const targets = [];
  for (let i = 0; i < 5; i++) targets.push((await account('agent')).id);
  const spareTokens = [];
  for (let i = 0; i < 4; i++) {
    const t = await accounts.tokens.create({ manager: owner.manager, clientIp: null }, `spare-${i}`);
    spareTokens.push(t.id);
    markers.push(t.id);
  }
  const sessions = (await accounts.signIn.listSessions(owner.manager)) as { id: string }[];
  const keyIds = [];
  for (let i = 0; i < 4; i++) keyIds.push((await h.newKey(siteId, ['conversations:read'])).id);
  markers.push(siteId, ...keyIds, ...sessions.map((s) => s.id));
  const origins = [`https://${who}-shop-${tag()}.example`, `https://www.${who}-${tag()}.example`];
  await h.runtime.services.access.setAllowedOrigins(siteId, origins);
  markers.push(...origins);
  await webhooks.setEndpoint(siteId, receiver.url(`/${who}`));

  const site: ManageSite = {
    siteId,
    memberTargets: targets,
    memberIds: [owner.id, agent.id, ...targets],
    tokenIds: spareTokens,
    sessionIds: sessions.map((s) => s.id),
    keyIds,
    eventIds: [],
    origins,
    replyConversations: [],
    closableConversations: [],
    closedConversations: [],
    cursors: {},
  };
  for (const [kind, count] of [
    ['reply', 3],
    ['closable', 4],
    ['closed', 2],
  ] as const) {
    for (let i = 0; i < count; i++) {
      const visitor = `visitor-${who}-${tag()}`;
      const content = `content-${who}-${tag()}`;
      const said = await chat.visitorSay(siteId, visitor, content);
      const second = await chat.visitorSay(siteId, visitor, `second-${who}-${tag()}`);
      const id = said.conversation.id;
      markers.push(id, visitor, content, said.message.id, second.message.id);
      if (kind === 'reply') site.replyConversations.push(id);
      if (kind === 'closable') site.closableConversations.push(id);
      if (kind === 'closed') {
        await conversations.close(siteId, id);
        site.closedConversations.push(id);
      }
    }
  }
  site.eventIds = ((await h.runtime.db('events').where({ site_id: siteId }).select('id')) as { id: string }[]).map((r) => r.id);
  markers.push(...site.eventIds);

  // Cursors the way a client gets them: from a first page.
  const base = `/manage/v1/sites/${siteId}`;
  const conv = site.replyConversations[0];
  const pages: Record<string, string> = {
    listKeys: `${base}/keys?limit=1`,
    listAuditLog: `${base}/audit-log?limit=1`,
    listInboxConversations: `${base}/inbox/conversations?limit=1`,
    listInboxMessages: `${base}/inbox/conversations/${conv}/messages?limit=1`,
    listDeliveries: `${base}/deliveries?limit=1`,
    getConversationTimeline: `${base}/conversations/${conv}/timeline?limit=1`,
  };
  for (const [operationId, page] of Object.entries(pages)) {
    const res = await server.get(page, { Authorization: `Bearer ${owner.token}` });
    const cursor = JSON.parse(res.body.toString()).page?.nextCursor;
    if (typeof cursor !== 'string') throw new Error(`seeding: no cursor from ${page} (${res.status}: ${res.body.toString().slice(0, 200)})`);
    site.cursors[operationId] = [cursor];
  }
  return { site, owner, agent };
}

export async function seedManageWorld(h: Harness, server: FuzzServer, receiver: Receiver): Promise<ManageWorld> {
  const { accounts } = h.runtime.services;
  const bMarkers: string[] = [];
  const siteB = await h.newSite(`Fuzz site B ${tag()}`);
  bMarkers.push(siteB.keyId);
  const A = await seedSite(h, server, receiver, h.site.id, 'a', []);
  const B = await seedSite(h, server, receiver, siteB.id, 'b', bMarkers);

  const member = async (label: string) => {
    const email = `a-${label}-${tag()}@example.com`;
    const created = await accounts.registry.create(email, PASSWORD);
    await accounts.members.add({ manager: null, clientIp: null }, h.site.id, email, 'agent');
    const manager = { accountId: created.id, email, via: 'session' as const };
    return { created, email, manager, token: (await accounts.tokens.create({ manager, clientIp: null }, label)).token };
  };
  const spare = await member('spare');
  const cookies = [];
  for (let i = 0; i < 30; i++) cookies.push(`__Host-session=${(await accounts.signIn.signIn(spare.email, PASSWORD, {})).token}`);
  const spareSessions = ((await accounts.signIn.listSessions(spare.manager)) as { id: string }[]).map((s) => s.id);
  const password = await member('password');
  const signInAccount = await member('signin');
  const wrongPasswordAccount = await member('wrong');
  const revoked = await accounts.tokens.create({ manager: A.owner.manager, clientIp: null }, 'revoked');
  await accounts.tokens.revoke({ manager: A.owner.manager, clientIp: null }, revoked.id);

  const invitations = [];
  for (let i = 0; i < 40; i++) {
    const email = `invitee-${i}-${tag()}@example.com`;
    const inv = await accounts.invitations.create({ manager: A.owner.manager, clientIp: null }, h.site.id, email, 'agent');
    invitations.push({ token: inv.token, email });
  }

  return {
    serviceOrigin: new URL(h.runtime.services.config.publicUrl).origin,
    a: A.site,
    b: B.site,
    creds: {
      owner: { token: A.owner.token, cookie: A.owner.cookie },
      agent: { token: A.agent.token, cookie: A.agent.cookie },
      spare: { token: spare.token, cookies, sessionIds: spareSessions },
      password: { token: password.token, cookie: `__Host-session=${(await accounts.signIn.signIn(password.email, PASSWORD, {})).token}` },
      revokedToken: revoked.token,
      signInEmail: signInAccount.email,
      wrongPasswordEmail: wrongPasswordAccount.email,
    },
    invitations,
    bMarkers: [...new Set(bMarkers)],
  };
}

/** Operations that end or change the credential that calls them: they speak as accounts kept for that. */
const SELF_ENDING = new Set(['signOut', 'endSession', 'changePassword']);
const CREDENTIAL_FREE = (op: Operation) => op.security.length === 0;
export const isOwnerOnly = (op: Operation) => /^Owners only\b/.test(op.description);

/** The generators' view of the management API's world. */
export function manageDomain(world: ManageWorld): FuzzDomain {
  const { a, b, creds } = world;
  const bearer = (label: string, token: string) => fc.constant<Credential>({ label, headers: [['Authorization', `Bearer ${token}`]] });
  /** A cookie the way a same-origin page sends it, and the ways a cross-site page or an old client would. */
  const cookie = (who: string, value: fc.Arbitrary<string>, weight = 1): fc.WeightedArbitrary<Credential>[] => [
    {
      weight: 3 * weight,
      arbitrary: value.map((v): Credential => ({
        label: `${who} cookie, same-origin`,
        headers: [
          ['Cookie', v],
          ['Sec-Fetch-Site', 'same-origin'],
        ],
      })),
    },
    {
      weight,
      arbitrary: value.map((v): Credential => ({
        label: `${who} cookie, service Origin`,
        headers: [
          ['Cookie', v],
          ['Origin', world.serviceOrigin],
        ],
      })),
    },
    {
      weight,
      arbitrary: fc.tuple(value, fc.constantFrom('cross-site', 'same-site', 'none', 'SAME-ORIGIN')).map(([v, site]): Credential => ({
        label: `${who} cookie, Sec-Fetch-Site ${site}`,
        headers: [
          ['Cookie', v],
          ['Sec-Fetch-Site', site],
        ],
      })),
    },
    {
      weight,
      arbitrary: fc.tuple(value, fc.constantFrom('https://evil.example', 'null', `${world.serviceOrigin}.evil.example`)).map(([v, origin]): Credential => ({
        label: `${who} cookie, Origin ${origin}`,
        headers: [
          ['Cookie', v],
          ['Origin', origin],
        ],
      })),
    },
    { weight, arbitrary: value.map((v): Credential => ({ label: `${who} cookie, no Fetch Metadata`, headers: [['Cookie', v]] })) },
  ];
  const broken: fc.WeightedArbitrary<Credential>[] = [
    { weight: 1, arbitrary: fc.constant<Credential>({ label: 'nothing', headers: [['Sec-Fetch-Site', 'same-origin']] }) },
    { weight: 1, arbitrary: bearer('revoked token', creds.revokedToken) },
    {
      weight: 1,
      arbitrary: fc.stringMatching(/^wcm_[A-Za-z0-9]{43}$/).map((s): Credential => ({ label: 'unknown token', headers: [['Authorization', `Bearer ${s}`]] })),
    },
    {
      weight: 1,
      arbitrary: fc.constant<Credential>({
        label: 'unknown cookie, same-origin',
        headers: [
          ['Cookie', `__Host-session=${'A'.repeat(43)}`],
          ['Sec-Fetch-Site', 'same-origin'],
        ],
      }),
    },
  ];

  const from = (ids: string[]) => fc.constantFrom(...ids);
  const idOf = (pattern: string) => valid({ type: 'string', pattern }) as fc.Arbitrary<string>;
  const pick = (own: string[], other: string[], random: fc.Arbitrary<string>) =>
    fc.oneof(...(own.length ? [{ weight: 6, arbitrary: from(own) }] : []), ...(other.length ? [{ weight: 2, arbitrary: from(other) }] : []), {
      weight: 1,
      arbitrary: random,
    });
  const bConversations = [...b.replyConversations, ...b.closableConversations, ...b.closedConversations];
  const aConversations = [...a.replyConversations, ...a.closableConversations, ...a.closedConversations];
  const randomConversation = idOf('^conv_[0-9a-hjkmnp-tv-z]{26}$');
  let invitation = 0;

  return {
    credential(op) {
      if (CREDENTIAL_FREE(op)) {
        // Signing in or accepting from a page: no session, or one of the spare account's.
        return fc.oneof(
          { weight: 8, arbitrary: fc.constant<Credential>({ label: 'no session, same-origin', headers: [['Sec-Fetch-Site', 'same-origin']] }) },
          { weight: 1, arbitrary: fc.constant<Credential>({ label: 'no session, no Fetch Metadata', headers: [] }) },
          ...cookie('spare', from(creds.spare.cookies)),
          ...broken,
        );
      }
      if (SELF_ENDING.has(op.operationId)) {
        const own = op.operationId === 'changePassword' ? creds.password : { token: creds.spare.token, cookie: '' };
        return fc.oneof(
          { weight: 6, arbitrary: bearer(op.operationId === 'changePassword' ? 'password token' : 'spare token', own.token) },
          ...(op.operationId === 'changePassword' ? cookie('password', fc.constant(creds.password.cookie), 2) : cookie('spare', from(creds.spare.cookies), 2)),
          ...broken,
        );
      }
      return fc.oneof(
        { weight: 14, arbitrary: bearer('owner token', creds.owner.token) },
        ...cookie('owner', fc.constant(creds.owner.cookie), 2),
        { weight: 6, arbitrary: bearer('agent token', creds.agent.token) },
        ...cookie('agent', fc.constant(creds.agent.cookie)),
        ...broken,
      );
    },

    pathParam(op, param) {
      switch (param.name) {
        case 'siteId':
          return fc.oneof(
            { weight: 12, arbitrary: fc.constant(a.siteId) },
            { weight: 2, arbitrary: fc.constant(b.siteId) },
            { weight: 1, arbitrary: idOf('^ws_[0-9a-hjkmnp-tv-z]{26}$') },
          );
        case 'conversationId': {
          // Replies keep their open conversations: close only ever targets its own set.
          const own = op.operationId === 'closeInboxConversation' ? a.closableConversations : op.method === 'POST' ? a.replyConversations : aConversations;
          return pick(own, bConversations, randomConversation);
        }
        case 'accountId':
          return pick(a.memberTargets, b.memberIds, idOf('^usr_[0-9a-hjkmnp-tv-z]{26}$'));
        case 'sessionId':
          return pick([...creds.spare.sessionIds, ...a.sessionIds], b.sessionIds, idOf('^ses_[0-9a-hjkmnp-tv-z]{26}$'));
        case 'id':
          return pick(a.tokenIds, b.tokenIds, idOf('^mtk_[0-9a-hjkmnp-tv-z]{26}$'));
        case 'keyId':
          return pick(a.keyIds, b.keyIds, idOf('^key_[0-9a-hjkmnp-tv-z]{26}$'));
        case 'eventId':
          return pick(a.eventIds, b.eventIds, idOf('^[a-z]+\\.[a-z]+:[0-9a-hjkmnp-tv-z]{26}$')).map(encodeURIComponent);
        default:
          return undefined;
      }
    },

    paramValue(op, param) {
      if (param.name === 'cursor') {
        const own = a.cursors[op.operationId] ?? Object.values(a.cursors).flat();
        return cursorArb(own, b.cursors[op.operationId] ?? Object.values(b.cursors).flat(), param);
      }
      if (param.name === 'origin')
        return fc.oneof(
          { weight: 6, arbitrary: from(a.origins) },
          { weight: 1, arbitrary: from(b.origins) },
          { weight: 1, arbitrary: valid(param.schema).map(String) },
        );
      if (param.name === 'Last-Event-ID')
        return fc.oneof(fc.constantFrom('0', '1', '3', '999999999', '99999999999999999999', '-1', 'x'), valid(param.schema).map(String));
      return undefined;
    },

    jsonBody(op) {
      const recent = fc.date({ min: new Date(Date.now() - 3600_000), max: new Date(Date.now() + 60_000), noInvalidDate: true }).map((d) => d.toISOString());
      switch (op.operationId) {
        case 'signIn':
          return fc.constantFrom({ email: creds.signInEmail, password: PASSWORD }, { email: creds.wrongPasswordEmail, password: 'a wrong password!' });
        case 'acceptInvitation':
          // Each draw takes the next invitation: a case that shrinks may meet a used one (404, also valid).
          return fc.constantFrom('account', 'token only', 'other email').map((mode) => {
            const inv = world.invitations[invitation++ % world.invitations.length];
            if (mode === 'token only') return { token: inv.token };
            return { token: inv.token, email: mode === 'account' ? inv.email : creds.signInEmail, password: PASSWORD };
          });
        case 'changePassword':
          return fc.constantFrom({ currentPassword: PASSWORD, newPassword: PASSWORD }, { currentPassword: 'a wrong password!', newPassword: PASSWORD });
        case 'createInvitation':
          return fc.record({ email: fc.constantFrom(`new-${tag()}@example.com`, creds.signInEmail), role: fc.constantFrom('owner', 'agent') });
        case 'assignInboxConversation':
          return fc.record({ assigneeId: fc.oneof(from([...a.memberIds, ...a.memberTargets]), from(b.memberIds), fc.constant(null)) });
        case 'setEventAddress':
          return fc.record({
            url: fc.constantFrom(`${world.serviceOrigin}/hooks`, 'https://127.0.0.1:1/hooks', 'https://[::1]:1/x'),
            events: fc.constant(['message.created']),
          });
        case 'changeEventAddressState':
          return fc.record({ enabled: fc.boolean() });
        case 'recoverDeliveries':
          return fc.record({ since: recent });
        case 'replaceAllowedOrigins':
          return fc.record({ origins: fc.subarray(a.origins) });
        case 'addAllowedOrigin':
          return fc.record({ origin: fc.constantFrom(...a.origins) });
        default:
          return undefined;
      }
    },
  };
}

/**
 * What the management document promises: its error codes, its statuses and schemas per operation,
 * site B's objects invisible (404) to A's members, owner-only operations never succeeding for an
 * agent, and a change without a token refused as cross-site unless it proves the service's origin.
 */
export function manageExpectations(world: ManageWorld, operations: Operation[], basePath: string): Expectations {
  const { assertMatchesDocument } = documentChecks(manageDocument(), { requiredHeadersOnly: true });
  // The document's own codes (forbidden, cross_site_request, conflict, ...) with the status the service gives each.
  const codes = (manageDocument() as { components: { schemas: { Error: { properties: { code: { enum: ErrorCode[] } } } } } }).components.schemas.Error
    .properties.code.enum;
  const errors = { ...DECIDED_ERRORS, ...Object.fromEntries(codes.map((c) => [c, ERROR_STATUS[c]])) };
  const routes = operations.map((op) => ({
    op,
    pattern: new RegExp(`^${basePath}${op.template.replace(/\{[^}]+\}/g, '[^/?#]+')}(\\?[^#]*)?$`),
  }));
  /** The operation a request reaches as sent (its method and path unchanged), or undefined. */
  const operationOf = (c: FuzzCase) => routes.find((r) => r.op.method === c.method && r.pattern.test(c.target))?.op;
  const b = world.b;
  const bIds = [
    b.siteId,
    ...b.memberIds,
    ...b.tokenIds,
    ...b.sessionIds,
    ...b.keyIds,
    ...b.eventIds.flatMap((id) => [id, encodeURIComponent(id)]),
    ...b.replyConversations,
    ...b.closableConversations,
    ...b.closedConversations,
  ];

  return {
    errors,
    leaks(c, answer) {
      // What the request carried itself, its query decoded too (an answer may name the value it refuses).
      const sent = [c.target, decoded(c.target), ...c.headers.map(([, v]) => v), c.body?.toString('latin1') ?? ''].join('\n');
      const problems: string[] = [];
      // Express answers OPTIONS itself with the path's methods (`200`, the Allow list as text), whatever
      // the ids: nothing is looked up or done. Reported (the public API answers 405), not a breach.
      const expressOptions = c.method === 'OPTIONS' && answer.status === 200 && answer.body.toString() === header(answer, 'allow');
      if (answer.status >= 200 && answer.status < 400 && !expressOptions && bIds.some((id) => sent.includes(id)))
        problems.push(`site A's member acted on site B's object (status ${answer.status})`);
      const seen = answer.body.toString('latin1') + '\n' + Object.values(answer.headers).join('\n');
      const leaked = world.bMarkers.filter((m) => seen.includes(m) && !sent.includes(m));
      if (leaked.length) problems.push(`site B's data in the answer: ${leaked.join(', ')}`);
      return problems;
    },
    rules(c, answer) {
      const op = operationOf(c);
      if (!op) return [];
      const problems: string[] = [];
      const values = (name: string) => c.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
      const ok = answer.status >= 200 && answer.status < 300;
      // An operation marked x-cross-site (one-click unsubscribe) is posted from anywhere: its URL holds the credential.
      if (['POST', 'PUT', 'PATCH', 'DELETE'].includes(c.method) && values('authorization').length === 0 && !op.crossSite) {
        const site = values('sec-fetch-site');
        const origin = values('origin');
        const sameOrigin = site.length ? site.join(', ') === 'same-origin' : origin.length > 0 && origin.join(', ') === world.serviceOrigin;
        if (!sameOrigin && !(answer.status === 403 && /"code":"cross_site_request"/.test(answer.body.toString())))
          problems.push(`a change without a token and without the service's origin answered ${answer.status}, not 403 cross_site_request`);
      }
      if (c.recipe[1]?.startsWith('agent') && isOwnerOnly(op) && ok) problems.push(`an agent got ${answer.status} on the owner-only ${op.operationId}`);
      problems.push(...contractProblems(op, c, answer));
      return problems;
    },
  };

  function contractProblems(op: Operation, c: FuzzCase, answer: WireAnswer): string[] {
    const type = header(answer, 'content-type') ?? '';
    let body: unknown = undefined;
    if (/^application\/json\b/.test(type)) {
      try {
        body = JSON.parse(answer.body.toString('utf8'));
      } catch {
        return []; // reported by the common checks
      }
    }
    // A body on an operation that takes none: the body's checks (413, 415) come before the route, and
    // the document, which describes no body here, lists neither. Reported, not counted as a breach.
    if (Object.keys(op.bodies).length === 0 && (answer.status === 413 || answer.status === 415)) return [];
    // `If-None-Match: *` on a GET: Express answers 304 (RFC 9110 allows it: a representation
    // exists); the document lists no 304. Reported, not counted as a breach.
    if (answer.status === 304 && c.method === 'GET' && c.headers.some(([n, v]) => n.toLowerCase() === 'if-none-match' && v.trim() === '*')) return [];
    try {
      assertMatchesDocument(op.operationId, { status: answer.status, headers: answer.headers as Record<string, string>, body });
      return [];
    } catch (err) {
      return [`against the document: ${(err as Error).message.slice(0, 600)}`];
    }
  }
}
