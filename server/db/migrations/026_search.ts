import type { Knex } from 'knex';
import { binaryText } from './columns';
import { createFulltextIndex, dropFulltextIndex } from '../fulltext';
import { cardText } from '../../search/card';

/** Conversations whose cards are written per statement while the migration fills the model. */
const CARDS_PER_BATCH = 1000;

/**
 * The inbox's search (issue 25, item 2; docs/manage.md, "Search"), a read model owned by
 * server/search/store.ts: one entry per thing a member may find a conversation by, written in the
 * transaction of the change it mirrors and removed with it.
 * - `kind` `message`: a message's text (`source_id` its id); `note`: an internal note's text
 *   (member-only, like the inbox); `card`: the conversation's id, its visitor's id, name, email
 *   and the friendly name the inbox shows (`source_id` the conversation id).
 * - `body` carries a full-text index (server/db/fulltext.ts: InnoDB FULLTEXT with an empty stopword list
 *   on MySQL/MariaDB, FTS5 on SQLite);
 * - `(kind, source_id)` finds an entry to rewrite or remove; `conversation_id` removes a
 *   conversation's entries (deleting a visitor's data).
 * What is there already is indexed here: every message and note by one INSERT ... SELECT each, the
 * cards in batches (their names are computed, server/search/service.ts). A large database spends
 * the index's build time in this migration (docs/operations.md).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('search_entries', (t) => {
    binaryText(knex, t);
    t.bigIncrements('id').primary();
    t.string('site_id', 40).notNullable();
    t.string('conversation_id', 40).notNullable();
    t.string('kind', 8).notNullable();
    t.string('source_id', 128).notNullable();
    t.text('body').notNullable();
    t.bigInteger('created_at').notNullable();
    t.unique(['kind', 'source_id'], { indexName: 'search_entries_source' });
    t.index(['conversation_id'], 'search_entries_conversation');
  });
  await createFulltextIndex(knex, 'search_entries', 'body', 'search_entries_body');
  const columns = ['site_id', 'conversation_id', 'kind', 'source_id', 'body', 'created_at'];
  await knex
    .into(knex.raw('?? (??, ??, ??, ??, ??, ??)', ['search_entries', ...columns]))
    .insert(knex('messages').select('site_id', 'conversation_id', knex.raw("'message'"), 'id', 'content', 'created_at'));
  await knex
    .into(knex.raw('?? (??, ??, ??, ??, ??, ??)', ['search_entries', ...columns]))
    .insert(knex('notes').select('site_id', 'conversation_id', knex.raw("'note'"), 'id', 'content', 'created_at'));
  for (let after = ''; ;) {
    const rows: { id: string; site_id: string; visitor_id: string; created_at: unknown; name: string | null; name_verified: unknown; email: string | null }[] =
      await knex('conversations as c')
        .leftJoin('visitors as v', (j) => j.on('v.site_id', '=', 'c.site_id').andOn('v.id', '=', 'c.visitor_id'))
        .where('c.id', '>', after)
        .orderBy('c.id')
        .limit(CARDS_PER_BATCH)
        .select('c.id', 'c.site_id', 'c.visitor_id', 'c.created_at', 'v.name', 'v.name_verified', 'v.email');
    if (!rows.length) break;
    await knex('search_entries').insert(
      rows.map((r) => ({
        site_id: r.site_id,
        conversation_id: r.id,
        kind: 'card',
        source_id: r.id,
        body: cardText(r, { name: r.name, nameVerified: Boolean(r.name_verified), email: r.email }),
        created_at: Number(r.created_at),
      })),
    );
    after = rows[rows.length - 1].id;
  }
}

export async function down(knex: Knex): Promise<void> {
  await dropFulltextIndex(knex, 'search_entries', 'search_entries_body');
  await knex.schema.dropTable('search_entries');
}
