/**
 * The bare baselines of the read and write parts: plain `node:https` and `mysql2`, no framework,
 * same TLS certificate and same pool size (10, server/db/knex.ts) as the service. Each route does
 * the least the service must do for the same answer:
 *   GET  /q/conversations/:id/messages   the messages page query only
 *   GET  /l/conversations/:id/messages   the key lookup, the conversation check, then the page query
 *   POST /w/conversations/:id/messages   the key lookup, then in one transaction: lock the
 *                                         conversation, insert the message, move the conversation's
 *                                         times, insert the outbox event
 *   GET  /l/conversations                 the key lookup, then the public list's first page (same
 *                                         index, order and limit as server/conversations/store.ts)
 *   GET  /l/sites/:siteId/inbox/conversations   the inbox's first page: the management token with its
 *                                         account and membership in one statement, the page with the
 *                                         assignee filter (`?assignee=me|unassigned`), the member's
 *                                         read marks and the visitors' names joined, then the member's
 *                                         unread counts with the page's tags (the statement of
 *                                         server/inbox/store.ts unreadCountsWith)
 * Started by scripts/bench/processes.ts (startBareServer) with DATABASE_URL, PORT, TLS_CERT_FILE, TLS_KEY_FILE.
 */
import https from 'node:https';
import fs from 'node:fs';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import type { RowDataPacket } from 'mysql2';
import { visitorDisplayName } from '../../server/visitors/display-name';

/** The service's cap on an unread count (server/inbox/store.ts; the bench compares both answers before timing). */
const UNREAD_COUNT_CAP = 999;

const POOL_SIZE = 10;
const pool = mysql.createPool({
  uri: process.env.DATABASE_URL!,
  connectionLimit: POOL_SIZE,
  supportBigNumbers: true,
  bigNumberStrings: false,
  charset: 'utf8mb4',
});
const cursorKey = randomBytes(32);

interface MessageRow extends RowDataPacket {
  id: string;
  conversation_id: string;
  direction: string;
  origin: string;
  api_key_id: string | null;
  content: string;
  format: string;
  created_at: number;
}

const iso = (ms: number) => new Date(Number(ms)).toISOString();

const toMessage = (r: MessageRow) => ({
  id: r.id,
  conversationId: r.conversation_id,
  direction: r.direction,
  origin: r.origin,
  apiKeyId: r.api_key_id,
  content: r.content,
  format: r.format,
  attachments: [],
  createdAt: iso(r.created_at),
});

async function page(conversationId: string, limit: number) {
  const [rows] = await pool.query<MessageRow[]>(
    'SELECT id, conversation_id, direction, origin, api_key_id, content, format, created_at FROM messages WHERE conversation_id = ? ORDER BY created_at, id LIMIT ?',
    [conversationId, limit + 1],
  );
  const paged = pageOf(rows, limit);
  return { data: paged.data.map(toMessage), page: paged.page };
}

/** The key's site, or undefined when the key is missing, unknown or revoked. */
async function siteOfKey(authorization: string | undefined): Promise<string | undefined> {
  const key = authorization?.startsWith('Bearer ') ? authorization.slice(7) : '';
  if (!key) return undefined;
  const [rows] = await pool.query<RowDataPacket[]>('SELECT site_id, revoked_at FROM api_keys WHERE fingerprint = ?', [
    createHash('sha256').update(key).digest('hex'),
  ]);
  return rows.length === 1 && rows[0].revoked_at === null ? (rows[0].site_id as string) : undefined;
}

async function conversationExists(siteId: string, conversationId: string): Promise<boolean> {
  const [rows] = await pool.query<RowDataPacket[]>('SELECT id FROM conversations WHERE id = ? AND site_id = ?', [conversationId, siteId]);
  return rows.length === 1;
}

interface ConversationRow extends RowDataPacket {
  id: string;
  visitor_id: string;
  state: string;
  created_at: number;
  updated_at: number;
  last_message_at: number | null;
  closed_at: number | null;
}

const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms));

const toConversation = (r: ConversationRow) => ({
  id: r.id,
  state: r.state,
  visitorId: r.visitor_id,
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
  lastMessageAt: isoOrNull(r.last_message_at),
  closedAt: isoOrNull(r.closed_at),
});

function pageOf<T extends { created_at: number; id: string }>(rows: T[], limit: number) {
  const hasMore = rows.length > limit;
  const data = rows.slice(0, limit);
  const last = data[data.length - 1];
  let nextCursor: string | null = null;
  if (hasMore && last) {
    const payload = Buffer.from(JSON.stringify({ t: Number(last.created_at), i: last.id })).toString('base64url');
    nextCursor = `${payload}.${createHmac('sha256', cursorKey).update(payload).digest('base64url').slice(0, 32)}`;
  }
  return { data, page: { nextCursor, hasMore } };
}

const CONVERSATION_COLUMNS = 'c.id, c.site_id, c.visitor_id, c.state, c.open_marker, c.created_at, c.updated_at, c.last_message_at, c.closed_at';

/** The public list's first page: newest first on the site's (created_at, id) index, as the service's store asks for it. */
async function conversationList(siteId: string, limit: number) {
  const [rows] = await pool.query<ConversationRow[]>(
    `SELECT ${CONVERSATION_COLUMNS} FROM conversations c FORCE INDEX (conversations_site_created_updated) WHERE c.site_id = ? ORDER BY c.created_at DESC, c.id DESC LIMIT ?`,
    [siteId, limit + 1],
  );
  const page = pageOf(rows, limit);
  return { data: page.data.map(toConversation), page: page.page };
}

/** The member behind a management token, when the token is live and its account a member of the site. */
async function memberOfToken(authorization: string | undefined, siteId: string): Promise<string | undefined> {
  const token = authorization?.startsWith('Bearer ') ? authorization.slice(7) : '';
  if (!token) return undefined;
  const [rows] = await pool.query<RowDataPacket[]>(
    'SELECT t.account_id, t.revoked_at, m.role FROM management_tokens t JOIN accounts a ON a.id = t.account_id JOIN memberships m ON m.account_id = t.account_id AND m.site_id = ? WHERE t.fingerprint = ?',
    [siteId, createHash('sha256').update(token).digest('hex')],
  );
  return rows.length === 1 && rows[0].revoked_at === null ? (rows[0].account_id as string) : undefined;
}

/**
 * The inbox's first page for a member: the page (with the assignee filter on its own index, as the
 * service's store picks it) with the assignee, the member's read mark and the visitor's name
 * joined, then one statement of one count per conversation of the messages after its mark that the
 * member did not write, up to the cap (server/inbox/store.ts unreadCountsWith), with the page's
 * tags as its last part (server/tags/store.ts tagsOnConversations).
 */
async function inboxList(siteId: string, accountId: string, assignee: string | null, limit: number) {
  const byAssignee = assignee === 'me' || assignee === 'unassigned';
  const index = byAssignee ? 'conversations_site_assignee_created' : 'conversations_site_created_updated';
  const filter = assignee === 'me' ? ' AND c.assignee_id = ?' : assignee === 'unassigned' ? ' AND c.assignee_id IS NULL' : '';
  type InboxRow = ConversationRow & {
    assignee_id: string | null;
    last_read_at: number | null;
    visitor_name: string | null;
    visitor_name_verified: number | null;
  };
  const [rows] = await pool.query<InboxRow[]>(
    `SELECT ${CONVERSATION_COLUMNS}, c.assignee_id, r.last_read_at, v.name AS visitor_name, v.name_verified AS visitor_name_verified` +
      ` FROM conversations c FORCE INDEX (${index})` +
      ' LEFT JOIN inbox_reads r ON r.conversation_id = c.id AND r.account_id = ?' +
      ' LEFT JOIN visitors v ON v.site_id = c.site_id AND v.id = c.visitor_id' +
      ` WHERE c.site_id = ?${filter} ORDER BY c.created_at DESC, c.id DESC LIMIT ?`,
    [accountId, siteId, ...(assignee === 'me' ? [accountId] : []), limit + 1],
  );
  const page = pageOf(rows, limit);
  const unread = new Map<string, number>();
  const tags = new Map<string, { id: string; name: string }[]>();
  if (page.data.length) {
    // One bounded count per conversation from its mark (already joined above), up to the cap; then the tags.
    const parts = page.data.map(
      (r) =>
        'SELECT max(u.conversation_id) AS conversation_id, count(*) AS n, NULL AS tag_id, NULL AS tag_name, NULL AS tag_key FROM (SELECT conversation_id FROM messages' +
        ` WHERE conversation_id = ? AND (author_id IS NULL OR author_id <> ?)${r.last_read_at === null ? '' : ' AND created_at > ?'} LIMIT ${UNREAD_COUNT_CAP}) u`,
    );
    const bindings: unknown[] = page.data.flatMap((r) => (r.last_read_at === null ? [r.id, accountId] : [r.id, accountId, Number(r.last_read_at)]));
    parts.push(
      'SELECT ct.conversation_id, NULL AS n, t.id AS tag_id, t.name AS tag_name, t.name_key AS tag_key FROM conversation_tags ct JOIN tags t ON t.id = ct.tag_id' +
        ` WHERE ct.site_id = ? AND ct.conversation_id IN (${page.data.map(() => '?').join(', ')})`,
    );
    bindings.push(siteId, ...page.data.map((r) => r.id));
    const [counts] = await pool.query<RowDataPacket[]>(`${parts.join(' UNION ALL ')} ORDER BY tag_key, tag_id`, bindings);
    for (const c of counts) {
      if (c.n === null) tags.set(c.conversation_id as string, [...(tags.get(c.conversation_id as string) ?? []), { id: c.tag_id, name: c.tag_name }]);
      else if (c.conversation_id !== null) unread.set(c.conversation_id as string, Number(c.n));
    }
  }
  return {
    data: page.data.map((r) => ({
      ...toConversation(r),
      assigneeId: r.assignee_id,
      unreadCount: unread.get(r.id) ?? 0,
      lastReadAt: isoOrNull(r.last_read_at === null ? null : Number(r.last_read_at)),
      visitorName: visitorDisplayName(
        r.visitor_id,
        r.visitor_name_verified === null ? undefined : { name: r.visitor_name, nameVerified: Boolean(r.visitor_name_verified) },
      ).name,
      tags: tags.get(r.id) ?? [],
    })),
    page: page.page,
  };
}

function newId(prefix: string, at: number) {
  return `${prefix}_${at.toString(32).padStart(10, '0')}${randomBytes(10).toString('hex').slice(0, 16)}`;
}

async function reply(siteId: string, conversationId: string, content: string) {
  const conn = await pool.getConnection();
  try {
    await conn.beginTransaction();
    const [found] = await conn.query<RowDataPacket[]>('SELECT id, state, updated_at FROM conversations WHERE id = ? AND site_id = ? FOR UPDATE', [
      conversationId,
      siteId,
    ]);
    if (found.length !== 1 || found[0].state !== 'open') {
      await conn.rollback();
      return undefined;
    }
    const at = Math.max(Date.now(), Number(found[0].updated_at));
    const message = {
      id: newId('msg', at),
      conversation_id: conversationId,
      direction: 'outgoing',
      origin: 'api',
      api_key_id: null,
      content,
      format: 'plain',
      created_at: at,
    };
    await conn.query(
      'INSERT INTO messages (id, conversation_id, site_id, direction, origin, api_key_id, content, format, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [message.id, conversationId, siteId, message.direction, message.origin, null, content, message.format, at],
    );
    await conn.query('UPDATE conversations SET updated_at = ?, last_message_at = ? WHERE id = ?', [at, at, conversationId]);
    const dto = toMessage(message as unknown as MessageRow);
    const eventId = `message.created:${newId('evt', at).slice(4)}`;
    await conn.query('INSERT INTO events (id, site_id, name, body, created_at) VALUES (?, ?, ?, ?, ?)', [
      eventId,
      siteId,
      'message.created',
      JSON.stringify({ id: eventId, event: 'message.created', createdAt: iso(at), data: { message: dto } }),
      at,
    ]);
    await conn.commit();
    return dto;
  } catch (err) {
    await conn.rollback().catch(() => {});
    throw err;
  } finally {
    conn.release();
  }
}

function readBody(req: import('node:http').IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const server = https.createServer(
  { cert: fs.readFileSync(process.env.TLS_CERT_FILE!), key: fs.readFileSync(process.env.TLS_KEY_FILE!), keepAliveTimeout: 65_000 },
  async (req, res) => {
    const send = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    try {
      const url = new URL(req.url ?? '/', 'https://bare');
      if (url.pathname === '/healthz') return send(200, { status: 'ok' });
      const pageLimit = Math.min(100, Number(url.searchParams.get('limit') ?? 25) || 25);
      if (url.pathname === '/l/conversations') {
        const siteId = await siteOfKey(req.headers.authorization);
        if (!siteId) return send(401, { error: { code: 'unauthorized' } });
        return send(200, await conversationList(siteId, pageLimit));
      }
      const inbox = /^\/l\/sites\/([^/]+)\/inbox\/conversations$/.exec(url.pathname);
      if (inbox) {
        const accountId = await memberOfToken(req.headers.authorization, inbox[1]);
        if (!accountId) return send(401, { error: { code: 'unauthorized' } });
        return send(200, await inboxList(inbox[1], accountId, url.searchParams.get('assignee'), pageLimit));
      }
      const match = /^\/([qlw])\/conversations\/([^/]+)\/messages$/.exec(url.pathname);
      if (!match) return send(404, { error: { code: 'not_found' } });
      const [, variant, conversationId] = match;
      const limit = Math.min(100, Number(url.searchParams.get('limit') ?? 25) || 25);
      if (variant === 'q') return send(200, await page(conversationId, limit));
      const siteId = await siteOfKey(req.headers.authorization);
      if (!siteId) return send(401, { error: { code: 'unauthorized' } });
      if (variant === 'l') {
        if (!(await conversationExists(siteId, conversationId))) return send(404, { error: { code: 'not_found' } });
        return send(200, await page(conversationId, limit));
      }
      const body = JSON.parse(await readBody(req)) as { content: string };
      const message = await reply(siteId, conversationId, body.content);
      return message ? send(201, { data: message }) : send(404, { error: { code: 'not_found' } });
    } catch (err) {
      send(500, { error: { code: 'internal', message: (err as Error).message } });
    }
  },
);

server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void pool.end().then(() => process.exit(0));
});
