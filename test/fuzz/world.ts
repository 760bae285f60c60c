import { randomBytes } from 'node:crypto';
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
