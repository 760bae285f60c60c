import { toIso, toIsoRequired } from '../platform/time';
import type { RowColumns } from '../conversations/store';
import { memberDisplayName, visitorDisplayName, type KnownName } from '../visitors/display-name';

/** Names of members by account id, as the accounts store reads them. */
type MemberNames = ReadonlyMap<string, { displayName: string | null; email: string }>;

/**
 * Who wrote an answer, as a row says it (docs/manage.md, "Inbox rows"): "You" for the member
 * reading, another member's display name, "A former member" for an account since deleted, and
 * "Integration" for an answer no member wrote (the public API, the operator CLI).
 */
export function answerAuthor(authorId: string | null, viewer: string, names: MemberNames): string {
  if (authorId === null) return 'Integration';
  if (authorId === viewer) return 'You';
  const account = names.get(authorId);
  return account ? memberDisplayName(account) : 'A former member';
}

/**
 * What a row says is waiting, from the conversation's stored summary (027_rows.ts) and what the
 * page read once for all its rows: the visitor's display name, the last message's preview and who
 * wrote it, since when the visitor waits (null when the last word is an answer), the last answer.
 * Pure, for the unit tier.
 */
export function rowSummary(
  r: RowColumns & {
    visitor_id: string;
  },
  ctx: { viewer: string; visitor: KnownName | undefined; names: MemberNames },
) {
  const visitor = visitorDisplayName(r.visitor_id, ctx.visitor);
  return {
    visitorName: visitor.name,
    visitorNameSource: visitor.source,
    lastMessage:
      r.last_direction === null
        ? null
        : {
            preview: r.last_preview ?? '',
            direction: r.last_direction,
            authorId: r.last_author_id,
            author: r.last_direction === 'incoming' ? null : answerAuthor(r.last_author_id, ctx.viewer, ctx.names),
            attachmentCount: r.last_attachments,
          },
    waitingSince: toIso(r.waiting_since),
    lastAnswer:
      r.answered_at === null ? null : { at: toIsoRequired(r.answered_at), authorId: r.answered_by, author: answerAuthor(r.answered_by, ctx.viewer, ctx.names) },
  };
}
