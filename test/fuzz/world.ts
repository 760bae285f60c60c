import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { Parameter } from './operations';
import type { Credential, FuzzDomain, Link } from './requests';
import { valid } from './schema-arbitraries';
import type { Harness } from '../helpers/harness';
import type { FuzzServer } from './wire';

export interface SiteFixtures {
  siteId: string;
  /** Open conversations the generators reply to but never close (so replies keep reaching the handler). */
  replyConversations: string[];
  /** Open conversations the close operation may target. */
  closableConversations: string[];
  closedConversations: string[];
  messageIds: string[];
  media: { id: string; url: string }[];
  /** Real `page.nextCursor` values (conversation list, message list). */
  cursors: string[];
}

/**
 * Two sites with conversations, messages and files. The fuzz speaks with site A's keys; every
 * string of site B that a leak would show (ids, visitor ids, contents, file names and bytes) is a
 * marker, random enough that it can only appear in an answer by coming from B's rows.
 */
export interface World {
  keys: { full: string; readOnly: string; writeOnly: string; mediaOnly: string; revoked: string; siteB: string };
  a: SiteFixtures;
  b: SiteFixtures;
  /** B-only strings that must never reach an answer to a request that does not carry them itself. */
  bMarkers: string[];
}

const tag = () => randomBytes(8).toString('hex');

async function seedSite(h: Harness, siteId: string, who: 'a' | 'b', key: string, server: FuzzServer, markers: string[]): Promise<SiteFixtures> {
  const { conversations } = h.runtime.services;
  const chat = h.runtime.services.window.chat;
  const fixtures: SiteFixtures = { siteId, replyConversations: [], closableConversations: [], closedConversations: [], messageIds: [], media: [], cursors: [] };
  const counts = { reply: 3, closable: 3, closed: 2 };
  let n = 0;
  for (const [kind, count] of Object.entries(counts)) {
    for (let i = 0; i < count; i++, n++) {
      const visitor = `visitor-${who}-${tag()}`;
      const content = `content-${who}-${tag()}`;
      const fileName = `file-${who}-${tag()}.txt`;
      const fileBytes = Buffer.from(`bytes-${who}-${tag()}`);
      const first = await chat.visitorSay(siteId, visitor, content, {
        files: n % 2 === 0 ? [{ buffer: fileBytes, originalName: fileName, mimeType: 'text/plain' }] : [],
      });
      const second = await chat.visitorSay(siteId, visitor, `second-${who}-${tag()}`);
      const id = first.conversation.id;
      fixtures.messageIds.push(first.message.id, second.message.id);
      for (const attachment of first.message.attachments) fixtures.media.push({ id: attachment.id, url: attachment.url });
      if (kind === 'reply') fixtures.replyConversations.push(id);
      if (kind === 'closable') fixtures.closableConversations.push(id);
      if (kind === 'closed') {
        await conversations.close(siteId, id);
        fixtures.closedConversations.push(id);
      }
      markers.push(id, visitor, content, fileName, fileBytes.toString(), first.message.id, second.message.id);
      for (const a of first.message.attachments) markers.push(a.id);
    }
  }
  // Cursors the way a client gets them: from a first page.
  const auth = { Authorization: `Bearer ${key}` };
  const pages = [
    '/api/v1/conversations?limit=1',
    '/api/v1/conversations?limit=2&state=open',
    `/api/v1/conversations/${fixtures.replyConversations[0]}/messages?limit=1`,
    `/api/v1/conversations/${fixtures.replyConversations[1]}/messages?limit=1&order=desc`,
  ];
  for (const page of pages) {
    const res = await server.get(page, auth);
    const cursor = JSON.parse(res.body.toString()).page?.nextCursor;
    if (typeof cursor !== 'string') throw new Error(`seeding: no cursor from ${page} (${res.status})`);
    fixtures.cursors.push(cursor);
  }
  return fixtures;
}

export async function seedWorld(h: Harness, server: FuzzServer): Promise<World> {
  const { access } = h.runtime.services;
  const siteA = h.site;
  const siteB = await h.newSite('Fuzz site B');
  const bMarkers: string[] = [siteB.id, siteB.keyId];
  const a = await seedSite(h, siteA.id, 'a', siteA.key, server, []);
  const b = await seedSite(h, siteB.id, 'b', siteB.key, server, bMarkers);
  const revoked = await h.newKey(siteA.id, ['conversations:read', 'conversations:write', 'media:read']);
  await access.revokeKey(revoked.id);
  return {
    keys: {
      full: siteA.key,
      readOnly: (await h.newKey(siteA.id, ['conversations:read'])).key,
      writeOnly: (await h.newKey(siteA.id, ['conversations:write'])).key,
      mediaOnly: (await h.newKey(siteA.id, ['media:read'])).key,
      revoked: revoked.key,
      siteB: siteB.key,
    },
    a,
    b,
    bMarkers: [...new Set(bMarkers)],
  };
}

/** The generators' view of the public API's world: site A's keys in every state, real ids, cursors and signed links. */
export function publicDomain(world: World): FuzzDomain {
  const { a, b } = world;
  const k = world.keys;
  const key = (label: string, value: string) => fc.constant<Credential>({ label, headers: [['Authorization', `Bearer ${value}`]] });
  const bAll = [...b.replyConversations, ...b.closableConversations, ...b.closedConversations];
  const from = (ids: string[]) => fc.constantFrom(...ids);
  const links = [...a.media.map((m) => ({ ...m, site: 'A' })), ...b.media.map((m) => ({ ...m, site: 'B' }))];

  return {
    credential(op) {
      const keyless = op.scopes === null;
      return fc.oneof(
        { weight: keyless ? 1 : 12, arbitrary: key('full key', k.full) },
        { weight: keyless ? 8 : 2, arbitrary: fc.constant<Credential>({ label: 'no key', headers: [] }) },
        { weight: 1, arbitrary: key('read-only key', k.readOnly) },
        { weight: 1, arbitrary: key('write-only key', k.writeOnly) },
        { weight: 1, arbitrary: key('media-only key', k.mediaOnly) },
        { weight: 1, arbitrary: key('revoked key', k.revoked) },
        {
          weight: 1,
          arbitrary: fc.stringMatching(/^wck_[A-Za-z0-9]{43}$/).map((s): Credential => ({ label: 'unknown key', headers: [['Authorization', `Bearer ${s}`]] })),
        },
      );
    },

    pathParam(op, param) {
      if (param.name !== 'id' || !op.template.startsWith('/conversations')) return undefined;
      const random = valid({ type: 'string', pattern: '^conv_[0-9a-hjkmnp-tv-z]{26}$' }) as fc.Arbitrary<string>;
      if (op.operationId === 'closeConversation') {
        // Replies keep their open conversations: close only ever targets its own set.
        return fc.oneof(
          { weight: 4, arbitrary: from(a.closableConversations) },
          { weight: 1, arbitrary: from(a.closedConversations) },
          { weight: 2, arbitrary: from(bAll) },
          { weight: 1, arbitrary: random },
        );
      }
      if (op.method === 'POST') {
        return fc.oneof(
          { weight: 8, arbitrary: from(a.replyConversations) },
          { weight: 1, arbitrary: from(a.closedConversations) },
          { weight: 2, arbitrary: from(bAll) },
          { weight: 1, arbitrary: random },
        );
      }
      return fc.oneof(
        { weight: 6, arbitrary: from([...a.replyConversations, ...a.closableConversations, ...a.closedConversations]) },
        { weight: 2, arbitrary: from(bAll) },
        { weight: 1, arbitrary: random },
      );
    },

    paramValue(_op, param) {
      return param.name === 'cursor' ? cursorArb(a.cursors, b.cursors, param) : undefined;
    },

    // The media operation: an id and a signed link taken together, as a client has them.
    link(op) {
      if (op.operationId !== 'downloadMedia') return undefined;
      const queryParams = op.params.filter((p) => p.in === 'query');
      return fc
        .record({
          pick: fc.constantFrom(...links),
          other: fc.constantFrom(...links),
          mode: fc.constantFrom('no link', 'own link', 'own link', 'other link', 'expired', 'tampered', 'schema values'),
          randomQuery: fc.tuple(
            valid(queryParams.find((p) => p.name === 'expires')?.schema ?? {}),
            valid(queryParams.find((p) => p.name === 'signature')?.schema ?? {}),
          ),
        })
        .map(({ pick, other, mode, randomQuery }): Link => {
          const linkQuery = (url: string): [string, string][] => [...new URL(url).searchParams.entries()];
          const own = linkQuery(pick.url);
          let query: [string, string][] = [];
          if (mode === 'own link') query = own;
          if (mode === 'other link') query = linkQuery(other.url);
          if (mode === 'expired') query = [['expires', '1'], own[1]];
          if (mode === 'tampered') query = [own[0], ['signature', own[1][1].replace(/^./, (c) => (c === '0' ? '1' : '0'))]];
          if (mode === 'schema values')
            query = [
              ['expires', String(randomQuery[0])],
              ['signature', String(randomQuery[1])],
            ];
          return { pathParams: { id: pick.id }, query, label: `media of site ${pick.site}, ${mode}` };
        });
    },
  };
}

/** Real cursors of site A (mostly), of site B, A's with one character changed, and the schema's. */
export function cursorArb(own: string[], other: string[], param: Parameter): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...own) },
    { weight: 1, arbitrary: fc.constantFrom(...other) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(...own).chain((c) => fc.nat({ max: c.length - 1 }).map((i) => c.slice(0, i) + (c[i] === 'A' ? 'B' : 'A') + c.slice(i + 1))),
    },
    { weight: 1, arbitrary: valid(param.schema).map(String) },
  );
}
