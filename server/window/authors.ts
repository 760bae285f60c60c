import type { AccessStore } from '../access/store';
import type { AccountStore } from '../accounts/store';
import { memberDisplayName } from '../visitors/display-name';

/**
 * Who the chat window says wrote a reply (docs/window.md, "Who a reply is from"): the agent's
 * display name (`memberDisplayName`: the name chosen on the account page, else the email's local
 * part) when the site shows agents' names, which is the default; the site's name when the site
 * turns them off, and for replies no member wrote (an integration through the public API, the
 * operator CLI). The visitor's own messages carry no author. Read when asked, never stored with
 * the message: a member who renames themselves is shown by the new name on older replies too.
 */

/** The part of a message the author depends on. */
export interface AuthoredMessage {
  direction: 'incoming' | 'outgoing';
  authorId?: string | null;
}

/** The name a reply shows, from the site's naming and the author's account (undefined: no member wrote it, or the account is gone). */
export function replyAuthorName(naming: { siteName: string; agentNames: boolean }, author: { displayName: string | null; email: string } | undefined): string {
  return naming.agentNames && author ? memberDisplayName(author) : naming.siteName;
}

export function createReplyAuthors(deps: { sites: Pick<AccessStore, 'findReplyNaming'>; accounts: Pick<AccountStore, 'namesOf'> }) {
  const naming = async (siteId: string) => (await deps.sites.findReplyNaming(siteId)) ?? { siteName: 'Support', agentNames: false };
  return {
    /**
     * Each message's author name, in order: null for the visitor's own. A page of messages costs
     * at most two reads (the site's naming, the authors' names), none when it holds no reply.
     */
    async ofMessages(siteId: string, messages: readonly AuthoredMessage[]): Promise<(string | null)[]> {
      const replies = messages.filter((m) => m.direction === 'outgoing');
      if (!replies.length) return messages.map(() => null);
      const site = await naming(siteId);
      const ids = site.agentNames ? replies.flatMap((m) => (m.authorId ? [m.authorId] : [])) : [];
      const names = ids.length ? await deps.accounts.namesOf(ids) : new Map<string, { displayName: string | null; email: string }>();
      return messages.map((m) => (m.direction === 'outgoing' ? replyAuthorName(site, m.authorId ? names.get(m.authorId) : undefined) : null));
    },

    /** The name the window shows on this member's replies on the site, and the site's name. */
    async ofMember(siteId: string, accountId: string): Promise<{ agentName: string; siteName: string }> {
      const site = await naming(siteId);
      const author = site.agentNames ? (await deps.accounts.namesOf([accountId])).get(accountId) : undefined;
      return { agentName: replyAuthorName(site, author), siteName: site.siteName };
    },
  };
}

export type ReplyAuthors = ReturnType<typeof createReplyAuthors>;
