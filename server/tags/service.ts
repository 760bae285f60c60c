import type { Knex } from 'knex';
import { ApiError, invalid, notFound } from '../platform/errors';
import { newId } from '../platform/ids';
import { toIsoRequired } from '../platform/time';
import { checkLine } from '../platform/text';
import { isUniqueViolation } from '../db/knex';
import { runInTransaction } from '../db/transaction';
import type { Actor, SignedActor } from '../accounts/common';
import type { AuditLog } from '../accounts/audit';
import type { ConversationStore } from '../conversations/store';
import type { InboxRecorder } from '../inbox/activity';
import { tagsOnConversations, type TagOnConversation, type TagRow, type TagStore } from './store';

/**
 * The limits of tags (DECISIONS, "The inbox in depth"; docs/manage.md, "Tags"): a name is one line
 * of 1 to 50 characters, a site keeps at most 200 (the picker shows them all), a conversation
 * carries at most 10 (a row shows them all).
 */
export const TAG_LIMITS = { perSite: 200, perConversation: 10, name: 50 } as const;

/** The live event (inbox feed kind) telling members a conversation's tags changed; its data is the conversation's tags as they are now. */
export const TAGGED_EVENT = 'conversation.tagged';
/** The live events of a change of the site's list (site-level feed rows): every member's rows, filters and pickers follow. */
export const TAG_EVENTS = { created: 'tag.created', renamed: 'tag.renamed', deleted: 'tag.deleted' } as const;

export const tagToDto = (r: TagRow) => ({ id: r.id, name: r.name, createdAt: toIsoRequired(r.created_at) });
export type TagDto = ReturnType<typeof tagToDto>;
/** A tag as a row or a conversation shows it. */
export const tagRefOf = (r: TagRow) => ({ id: r.id, name: r.name });

const checkName = (raw: string) => checkLine(raw, { what: 'The name', max: TAG_LIMITS.name, path: '/body/name' });
const nameKey = (name: string) => name.toLowerCase();
const duplicate = (name: string) => new ApiError('conflict', `The site has a tag named “${name}” already.`);

/**
 * A site's tags: owners keep the list (create, rename, delete), every member puts them on
 * conversations and takes them off. The management entry has checked the role (`x-role`) before
 * any of these runs (the operator CLI keeps the list too, as `Actor` without an account); each
 * change is audited in its transaction and goes to the members' live streams (the inbox feed) in
 * it: a conversation's new tags, or the site's list changed (one site-level row, however many
 * conversations carry the tag).
 */
export function createTags(deps: {
  store: TagStore;
  audit: AuditLog['record'];
  conversations: Pick<ConversationStore, 'findForUpdate'>;
  record: InboxRecorder;
  now: () => number;
}) {
  const { store, audit, now } = deps;

  /** A change of the site's list, to every member's stream; `by` null for the operator CLI. */
  const recordListChange = (trx: Knex.Transaction, actor: Actor, siteId: string, kind: string, tag: object) =>
    deps.record(trx, {
      siteId,
      conversationId: null,
      visitorId: null,
      kind,
      accountId: actor.manager?.accountId ?? null,
      body: { tag, by: actor.manager?.accountId ?? null },
    });

  /** Runs a change; a name another change took meanwhile (the unique index) is the same 409 as one found first. */
  async function changing<T>(name: string, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    try {
      return await runInTransaction(store.db, work);
    } catch (err) {
      if (isUniqueViolation(err)) throw duplicate(name);
      throw err;
    }
  }

  /** Changes a conversation's tags in one transaction: the conversation locked, the change, the feed event and the audit entry. */
  async function onConversation(
    actor: SignedActor,
    siteId: string,
    conversationId: string,
    tagId: string,
    change: (trx: Knex.Transaction, held: string[]) => PromiseLike<boolean>,
    action: string,
  ) {
    return runInTransaction(store.db, async (trx) => {
      const conversation = await deps.conversations.findForUpdate(trx, siteId, conversationId);
      if (!conversation) throw notFound('Conversation');
      if (!(await store.find(siteId, tagId, trx))) throw notFound('Tag');
      const held = await store.lockOnConversation(conversationId, trx);
      const tags = async () => ((await store.ofConversations(siteId, [conversationId], trx)).get(conversationId) ?? []).map(tagRefOf);
      if (!(await change(trx, held))) return tags();
      const current = await tags();
      await deps.record(trx, {
        siteId,
        visitorId: conversation.visitor_id,
        kind: TAGGED_EVENT,
        conversationId,
        accountId: actor.manager.accountId,
        body: { conversationId, tags: current, by: actor.manager.accountId },
      });
      await audit(actor, [siteId], action, conversationId, trx);
      return current;
    });
  }

  return {
    async list(siteId: string): Promise<TagDto[]> {
      return (await store.list(siteId)).map(tagToDto);
    },

    async create(actor: Actor, siteId: string, input: { name: string }): Promise<TagDto> {
      const name = checkName(input.name);
      const row: TagRow = { id: newId('tag', now()), site_id: siteId, name, name_key: nameKey(name), created_at: now() };
      await changing(name, async (trx) => {
        const held = await store.lockNameKeys(siteId, trx);
        if (held.some((r) => r.name_key === row.name_key)) throw duplicate(name);
        if (held.length >= TAG_LIMITS.perSite) throw invalid(`A site keeps at most ${TAG_LIMITS.perSite} tags: delete one first.`);
        await store.insert(row, trx);
        await recordListChange(trx, actor, siteId, TAG_EVENTS.created, tagToDto(row));
        await audit(actor, [siteId], 'tag.created', row.id, trx);
      });
      return tagToDto(row);
    },

    /** Renames a tag; the conversations carrying it show the new name. Another site's tag is 404. */
    async rename(actor: Actor, siteId: string, id: string, input: { name: string }): Promise<TagDto> {
      const name = checkName(input.name);
      return changing(name, async (trx) => {
        const held = await store.lockNameKeys(siteId, trx);
        if (!held.some((r) => r.id === id)) throw notFound('Tag');
        if (held.some((r) => r.id !== id && r.name_key === nameKey(name))) throw duplicate(name);
        await store.rename(siteId, id, { name, name_key: nameKey(name) }, trx);
        const tag = tagToDto((await store.find(siteId, id, trx))!);
        await recordListChange(trx, actor, siteId, TAG_EVENTS.renamed, tag);
        await audit(actor, [siteId], 'tag.renamed', id, trx);
        return tag;
      });
    },

    /** Deletes a tag and takes it off every conversation. */
    async remove(actor: Actor, siteId: string, id: string): Promise<void> {
      await runInTransaction(store.db, async (trx) => {
        // Under the lock of the site's names, so the event names the tag as it was when it went.
        await store.lockNameKeys(siteId, trx);
        const tag = await store.find(siteId, id, trx);
        if (!tag || !(await store.remove(siteId, id, trx))) throw notFound('Tag');
        await recordListChange(trx, actor, siteId, TAG_EVENTS.deleted, tagRefOf(tag));
        await audit(actor, [siteId], 'tag.deleted', id, trx);
      });
    },

    /** Puts a tag on a conversation (again: nothing changes); answers the conversation's tags. */
    apply: (actor: SignedActor, siteId: string, conversationId: string, tagId: string) =>
      onConversation(
        actor,
        siteId,
        conversationId,
        tagId,
        async (trx, held) => {
          if (held.includes(tagId)) return false;
          if (held.length >= TAG_LIMITS.perConversation)
            throw invalid(`A conversation carries at most ${TAG_LIMITS.perConversation} tags: take one off first.`);
          await store.apply(siteId, conversationId, tagId, now(), trx);
          return true;
        },
        'conversation.tagged',
      ),

    /** Takes a tag off a conversation (not on it: nothing changes); answers the conversation's tags. */
    unapply: (actor: SignedActor, siteId: string, conversationId: string, tagId: string) =>
      onConversation(actor, siteId, conversationId, tagId, (trx) => store.unapply(conversationId, tagId, trx), 'conversation.untagged'),

    /**
     * The tags of a page of conversations as a part of the page's second statement (the inbox's,
     * beside its unread counts): the part, its columns and order, and how its rows read back.
     */
    pagePart: {
      name: 'tags',
      build: (siteId: string, conversationIds: readonly string[]) => tagsOnConversations(store.db, siteId, conversationIds),
      columns: ['tag_id', 'tag_name', 'tag_key'],
      orderBy: ['tag_key', 'tag_id'],
      /** Rows of the part, in its order, as each conversation's tag references. */
      read(rows: readonly TagOnConversation[]) {
        const byConversation = new Map<string, { id: string; name: string }[]>();
        for (const r of rows) {
          const list = byConversation.get(r.conversation_id);
          const ref = { id: r.tag_id, name: r.tag_name };
          if (list) list.push(ref);
          else byConversation.set(r.conversation_id, [ref]);
        }
        return byConversation;
      },
    },
  };
}

export type Tags = ReturnType<typeof createTags>;
