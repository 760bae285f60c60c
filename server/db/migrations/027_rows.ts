import type { Knex } from 'knex';
import { messagePreview } from '../../inbox/preview';

/**
 * Inbox rows that say what is waiting (issue 25, item 1; docs/manage.md, "Inbox rows"): what a row
 * shows of the last message and of the wait, kept on `conversations` and written in each message's
 * transaction, so a page of rows costs the same few statements whatever its conversations hold.
 * - `last_preview`: the last message as one bounded line of plain text (server/inbox/preview.ts);
 *   `last_direction`, `last_author_id` (the member who wrote it in the inbox, else null) and
 *   `last_attachments` (its number of files) say who wrote it and whether files came with it;
 * - `waiting_since`: the visitor's oldest message not answered yet (null once an answer follows);
 * - `answered_at`, `answered_by`: the newest answer to the visitor and the member who wrote it
 *   (null for an integration or the operator CLI).
 * Conversations that exist are filled in here from their messages.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    t.string('last_preview', 255).nullable();
    t.string('last_direction', 10).nullable();
    t.string('last_author_id', 40).nullable();
    t.integer('last_attachments').notNullable().defaultTo(0);
    t.bigInteger('waiting_since').nullable();
    t.bigInteger('answered_at').nullable();
    t.string('answered_by', 40).nullable();
  });
  await backfill(knex);
}

interface Last {
  id: string;
  conversation_id: string;
  direction: 'incoming' | 'outgoing';
  author_id: string | null;
  content: string;
  format: 'plain' | 'markdown';
  attachment_count: unknown;
  created_at: unknown;
}

/** Fills the new columns of existing conversations, a batch of conversations at a time (a few reads a batch). */
async function backfill(knex: Knex): Promise<void> {
  const BATCH = 500;
  let after = '';
  for (;;) {
    const ids: string[] = (await knex('conversations').where('id', '>', after).orderBy('id').limit(BATCH).select('id')).map((r: { id: string }) => r.id);
    if (!ids.length) return;
    after = ids[ids.length - 1];
    // The newest message of each, and its newest answer: one grouped read each.
    const newest = knex('messages').whereIn('conversation_id', ids).groupBy('conversation_id').select('conversation_id').max('created_at as at');
    const lasts: Last[] = await knex('messages as m')
      .join(newest.as('n'), (j) => j.on('n.conversation_id', '=', 'm.conversation_id').andOn('n.at', '=', 'm.created_at'))
      .orderBy('m.id')
      .select('m.id', 'm.conversation_id', 'm.direction', 'm.author_id', 'm.content', 'm.format', 'm.attachment_count', 'm.created_at');
    const answers: { conversation_id: string; at: unknown }[] = await knex('messages')
      .whereIn('conversation_id', ids)
      .andWhere('direction', 'outgoing')
      .groupBy('conversation_id')
      .select('conversation_id')
      .max('created_at as at');
    const answeredAt = new Map(answers.map((a) => [a.conversation_id, Number(a.at)]));
    const answeredBy: { conversation_id: string; author_id: string | null; created_at: unknown }[] = answers.length
      ? await knex('messages')
          .whereIn('conversation_id', ids)
          .andWhere('direction', 'outgoing')
          .select('conversation_id', 'author_id', 'created_at')
          .whereIn(['conversation_id', 'created_at'], answers.map((a) => [a.conversation_id, a.at]) as never)
      : [];
    // The visitor's oldest message after the newest answer (or the first one, never answered).
    const waiting: { conversation_id: string; at: unknown }[] = await knex('messages as m')
      .whereIn('m.conversation_id', ids)
      .andWhere('m.direction', 'incoming')
      .whereNotExists((q) =>
        q
          .from('messages as o')
          .whereRaw('o.conversation_id = m.conversation_id')
          .andWhere('o.direction', 'outgoing')
          .andWhereRaw('o.created_at >= m.created_at'),
      )
      .groupBy('m.conversation_id')
      .select('m.conversation_id')
      .min('m.created_at as at');
    const lastOf = new Map<string, Last>();
    for (const l of lasts) lastOf.set(l.conversation_id, l); // by id: the newest of a tie wins
    const withFiles = lasts.filter((l) => Number(l.attachment_count) > 0).map((l) => l.id);
    const names: { message_id: string; name: string }[] = withFiles.length
      ? await knex('attachments').whereIn('message_id', withFiles).orderBy(['message_id', 'id']).select('message_id', 'name')
      : [];
    const waitingOf = new Map(waiting.map((w) => [w.conversation_id, Number(w.at)]));
    const byOf = new Map(answeredBy.map((a) => [a.conversation_id, a.author_id]));
    for (const id of ids) {
      const last = lastOf.get(id);
      if (!last) continue;
      await knex('conversations')
        .where({ id })
        .update({
          last_preview: messagePreview({
            content: last.content,
            format: last.format,
            attachmentNames: names.filter((n) => n.message_id === last.id).map((n) => n.name),
          }),
          last_direction: last.direction,
          last_author_id: last.author_id,
          last_attachments: Number(last.attachment_count),
          waiting_since: waitingOf.get(id) ?? null,
          answered_at: answeredAt.get(id) ?? null,
          answered_by: byOf.get(id) ?? null,
        });
    }
  }
}

/** Plain `drop column` on both engines: Knex would copy the whole table on SQLite, which the foreign keys to it refuse. */
export async function down(knex: Knex): Promise<void> {
  for (const c of ['last_preview', 'last_direction', 'last_author_id', 'last_attachments', 'waiting_since', 'answered_at', 'answered_by']) {
    await knex.raw('alter table ?? drop column ??', ['conversations', c]);
  }
}
