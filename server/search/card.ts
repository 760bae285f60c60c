import { visitorDisplayName } from '../visitors/display-name';

/**
 * What a conversation's card entry holds (pure): its id, its visitor's id, the name the inbox shows
 * (the one the visitor gave, else the friendly name derived from the id) and the email, so a member
 * finds a conversation by any of them.
 */
export function cardText(
  conversation: { id: string; visitor_id: string },
  visitor: { name: string | null; nameVerified: boolean; email: string | null } | undefined,
): string {
  const name = visitorDisplayName(conversation.visitor_id, visitor).name;
  return [conversation.id, conversation.visitor_id, name, visitor?.email ?? ''].join(' ').trim();
}
