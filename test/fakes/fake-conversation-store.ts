import type { ConversationRow, ConversationStore } from '../../server/conversations/store';

/**
 * The conversation store in memory, for unit tests of the rules above it. Same contract as the
 * Knex store (type-checked); the transaction arguments are accepted and ignored, as one test runs
 * one call at a time. `list` keeps the store's order and bounds: newest first by (created_at, id),
 * the filters, and the keyset position.
 */
export function fakeConversationStore(initial: ConversationRow[] = []) {
  const rows = new Map<string, ConversationRow>(initial.map((r) => [r.id, { ...r }]));
  const copy = (row: ConversationRow | undefined) => row && { ...row };
  /** A visitor's conversations oldest first, by (created_at, id) as the store orders them. */
  const ofVisitor = (siteId: string, visitorId: string) =>
    [...rows.values()]
      .filter((r) => r.site_id === siteId && r.visitor_id === visitorId)
      .sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

  const store: ConversationStore = {
    find: async (siteId, id) => copy([...rows.values()].find((r) => r.site_id === siteId && r.id === id)),
    findForUpdate: async (_trx, siteId, id) => copy([...rows.values()].find((r) => r.site_id === siteId && r.id === id)),
    // No event addresses nor visitors in memory: a site without an address, a visitor without an email.
    findForReply: async (_trx, siteId, id) => {
      const conversation = copy([...rows.values()].find((r) => r.site_id === siteId && r.id === id));
      return conversation && { conversation, eventAddress: null, visitor: { email: null, replyEmailAt: null, replyEmailUnsubscribedAt: null } };
    },
    findById: async (id) => copy(rows.get(id)),
    findOfVisitor: async (siteId, visitorId, id) => copy([...rows.values()].find((r) => r.site_id === siteId && r.visitor_id === visitorId && r.id === id)),
    latestOfVisitor: async (siteId, visitorId) => copy(ofVisitor(siteId, visitorId).at(-1)),
    nextOfVisitor: async (siteId, visitorId, after) =>
      copy(ofVisitor(siteId, visitorId).find((r) => !after || r.created_at > after.created_at || (r.created_at === after.created_at && r.id > after.id))),
    ofVisitor: async (siteId, visitorId, limit) =>
      ofVisitor(siteId, visitorId)
        .reverse()
        .slice(0, limit)
        .map((r) => ({ ...r })),
    removeMany: async (_trx, siteId, ids) => ids.filter((id) => rows.get(id)?.site_id === siteId && rows.delete(id)).length,
    findOpenForVisitor: async (_trx, siteId, visitorId) =>
      copy([...rows.values()].find((r) => r.site_id === siteId && r.visitor_id === visitorId && r.state === 'open')),
    insert: async (_trx, row) => {
      const clash =
        rows.has(row.id) ||
        (row.open_marker !== null && [...rows.values()].some((r) => r.site_id === row.site_id && r.visitor_id === row.visitor_id && r.open_marker !== null));
      if (clash) throw Object.assign(new Error('UNIQUE constraint failed'), { code: 'SQLITE_CONSTRAINT_UNIQUE' });
      rows.set(row.id, { ...row });
      return [1];
    },
    touch: async (_trx, id, at) => {
      const row = rows.get(id);
      if (!row) return 0;
      Object.assign(row, { updated_at: at, last_message_at: at });
      return 1;
    },
    close: async (_trx, id, at) => {
      const row = rows.get(id);
      if (!row || row.state !== 'open') return false;
      Object.assign(row, { state: 'closed', open_marker: null, closed_at: at, updated_at: at });
      return true;
    },
    list: async (siteId, filters, after, limit) =>
      [...rows.values()]
        .filter(
          (r) =>
            r.site_id === siteId &&
            (filters.state === undefined || r.state === filters.state) &&
            (filters.createdAfter === undefined || r.created_at >= filters.createdAfter) &&
            (filters.createdBefore === undefined || r.created_at < filters.createdBefore) &&
            (filters.updatedAfter === undefined || r.updated_at >= filters.updatedAfter) &&
            (filters.updatedBefore === undefined || r.updated_at < filters.updatedBefore) &&
            (after === undefined || r.created_at < after.createdAt || (r.created_at === after.createdAt && r.id < after.id)),
        )
        .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
        .slice(0, limit)
        .map((r) => ({ ...r })),
    setAssignee: async (_trx, id, assigneeId) => {
      const row = rows.get(id);
      if (!row) return 0;
      row.assignee_id = assigneeId;
      return 1;
    },
    // Read marks, tags and search are other stores' parts of the list, tested against the database (test/manage/inbox*.test.ts, search.test.ts).
    findWithMarks: async () => {
      throw new Error('fakeConversationStore: read marks are not kept in memory');
    },
    listWithMarks: async () => {
      throw new Error('fakeConversationStore: read marks are not kept in memory');
    },
  };
  return Object.assign(store, { rows });
}
