import type { Knex } from 'knex';
import { ApiError, invalid, notFound } from '../platform/errors';
import { newId } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import { checkLine, checkText } from '../platform/text';
import { isUniqueViolation } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import type { Actor, Manager } from '../accounts/common';
import type { AuditLog } from '../accounts/audit';
import type { ConversationStore } from '../conversations/store';
import type { VisitorStore } from '../visitors/store';
import { visitorDisplayName } from '../visitors/display-name';
import type { ReplyAuthors } from '../window/authors';
import { fillPlaceholders, unknownPlaceholders, PLACEHOLDERS } from './placeholders';
import type { SharedReplyRow, SharedReplyStore } from './store';

/**
 * The limits of a site's shared replies (docs/manage.md, "Shared replies"): the picker holds them
 * all, so their number is bounded; a reply is as long as a message may be.
 */
export const SHARED_REPLY_LIMITS = { perSite: 200, title: 60, body: 10_000 } as const;

export function sharedReplyToDto(r: SharedReplyRow) {
  return { id: r.id, title: r.title, body: r.body, createdBy: r.created_by, createdAt: toIsoRequired(r.created_at), updatedAt: toIsoRequired(r.updated_at) };
}
export type SharedReplyDto = ReturnType<typeof sharedReplyToDto>;

const checkTitle = (raw: string, path = '/body/title') => checkLine(raw, { what: 'The title', max: SHARED_REPLY_LIMITS.title, path });
function checkBody(raw: string, path = '/body/body') {
  const body = checkText(raw, { what: 'The text', max: SHARED_REPLY_LIMITS.body, path });
  const unknown = unknownPlaceholders(body);
  if (unknown.length)
    throw invalid(`The text names unknown placeholders: ${unknown.map((p) => `{${p}}`).join(', ')}. Known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(', ')}.`, [
      { path, message: 'unknown placeholder' },
    ]);
  return body;
}
const titleKey = (title: string) => title.toLowerCase();
const duplicate = (title: string) => new ApiError('conflict', `The site has a shared reply titled “${title}” already.`);
const overLimit = () => invalid(`A site keeps at most ${SHARED_REPLY_LIMITS.perSite} shared replies: delete one first.`);

/** Why an imported reply was left out. */
export type SkipReason = 'duplicate' | 'limit' | 'invalid';

/**
 * A site's shared replies: owners keep them (create, change, delete, import the replies a browser
 * kept before they were shared), every member reads them and inserts them filled in for a
 * conversation. The management entry has checked the role (`x-role`) before any of these runs (the
 * operator's CLI acts with no account); each change is audited in its transaction.
 */
export function createSharedReplies(deps: {
  store: SharedReplyStore;
  audit: AuditLog['record'];
  conversations: Pick<ConversationStore, 'find'>;
  visitors: Pick<VisitorStore, 'find'>;
  authors: Pick<ReplyAuthors, 'ofMember'>;
  now: () => number;
}) {
  const { store, audit, now } = deps;

  /** Runs a change; a title another change took meanwhile (the unique index) is the same 409 as one found first. */
  async function changing<T>(title: string, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    try {
      return await runInTransaction(store.db, work);
    } catch (err) {
      if (isUniqueViolation(err)) throw duplicate(title);
      throw err;
    }
  }

  return {
    async list(siteId: string): Promise<SharedReplyDto[]> {
      return (await store.list(siteId)).map(sharedReplyToDto);
    },

    async create(actor: Actor, siteId: string, input: { title: string; body: string }): Promise<SharedReplyDto> {
      const title = checkTitle(input.title);
      const body = checkBody(input.body);
      const at = now();
      const row: SharedReplyRow = {
        id: newId('srp', at),
        site_id: siteId,
        title,
        title_key: titleKey(title),
        body,
        created_by: actor.manager?.accountId ?? null,
        created_at: at,
        updated_at: at,
      };
      await changing(title, async (trx) => {
        const held = await store.lockTitleKeys(siteId, trx);
        if (held.some((r) => r.title_key === row.title_key)) throw duplicate(title);
        if (held.length >= SHARED_REPLY_LIMITS.perSite) throw overLimit();
        await store.insert([row], trx);
        await audit(actor, [siteId], 'shared_reply.created', row.id, trx);
      });
      return sharedReplyToDto(row);
    },

    /** Changes the title, the text or both; a field left out stays. Another site's reply is 404. */
    async update(actor: Actor, siteId: string, id: string, input: { title?: string; body?: string }): Promise<SharedReplyDto> {
      const title = input.title === undefined ? undefined : checkTitle(input.title);
      const body = input.body === undefined ? undefined : checkBody(input.body);
      return changing(title ?? '', async (trx) => {
        const held = await store.lockTitleKeys(siteId, trx);
        if (!held.some((r) => r.id === id)) throw notFound('Shared reply');
        if (title !== undefined && held.some((r) => r.id !== id && r.title_key === titleKey(title))) throw duplicate(title);
        await store.update(
          siteId,
          id,
          { ...(title !== undefined ? { title, title_key: titleKey(title) } : {}), ...(body !== undefined ? { body } : {}), updated_at: now() },
          trx,
        );
        await audit(actor, [siteId], 'shared_reply.updated', id, trx);
        return sharedReplyToDto((await store.find(siteId, id, trx))!);
      });
    },

    async remove(actor: Actor, siteId: string, id: string): Promise<void> {
      await runInTransaction(store.db, async (trx) => {
        if (!(await store.remove(siteId, id, trx))) throw notFound('Shared reply');
        await audit(actor, [siteId], 'shared_reply.deleted', id, trx);
      });
    },

    /**
     * Adds many at once (the replies one browser kept before they were shared): each is checked
     * like a new one, and one that cannot be added is left out with the reason (a title the site
     * has, or an earlier one of the list; the site's limit; invalid) rather than failing the rest.
     * One transaction, one audit entry.
     */
    async import(actor: Actor, siteId: string, input: { title: string; body: string }[]) {
      const at = now();
      return runInTransaction(store.db, async (trx) => {
        const held = await store.lockTitleKeys(siteId, trx);
        const taken = new Set(held.map((r) => r.title_key));
        const rows: SharedReplyRow[] = [];
        const skipped: { title: string; reason: SkipReason; message: string }[] = [];
        for (const [i, item] of input.entries()) {
          let title: string;
          let body: string;
          try {
            title = checkTitle(item.title, `/body/replies/${i}/title`);
            body = checkBody(item.body, `/body/replies/${i}/body`);
          } catch (err) {
            skipped.push({ title: item.title.slice(0, 200), reason: 'invalid', message: (err as Error).message });
            continue;
          }
          if (taken.has(titleKey(title))) {
            skipped.push({ title, reason: 'duplicate', message: duplicate(title).message });
            continue;
          }
          if (held.length + rows.length >= SHARED_REPLY_LIMITS.perSite) {
            skipped.push({ title, reason: 'limit', message: overLimit().message });
            continue;
          }
          taken.add(titleKey(title));
          rows.push({
            id: newId('srp', at),
            site_id: siteId,
            title,
            title_key: titleKey(title),
            body,
            created_by: actor.manager?.accountId ?? null,
            created_at: at,
            updated_at: at,
          });
        }
        await store.insert(rows, trx);
        if (rows.length) await audit(actor, [siteId], 'shared_replies.imported', siteId, trx);
        return { imported: rows.map(sharedReplyToDto), skipped };
      });
    },

    /**
     * The site's replies filled in for one conversation (the composer's `/` picker): its visitor's
     * display name, the calling member's name as the window shows it, the site's name. Another
     * site's conversation is 404.
     */
    async filledFor(manager: Manager, siteId: string, conversationId: string) {
      const conversation = await deps.conversations.find(siteId, conversationId);
      if (!conversation) throw notFound('Conversation');
      const [replies, known, names] = await Promise.all([
        store.list(siteId),
        deps.visitors.find(siteId, conversation.visitor_id),
        deps.authors.ofMember(siteId, manager.accountId),
      ]);
      const visitor = visitorDisplayName(conversation.visitor_id, known);
      const values = { visitor: { name: visitor.name, own: visitor.source !== 'generated' }, agentName: names.agentName, siteName: names.siteName };
      return replies.map((r) => ({ id: r.id, title: r.title, text: fillPlaceholders(r.body, values) }));
    },
  };
}

export type SharedReplies = ReturnType<typeof createSharedReplies>;
