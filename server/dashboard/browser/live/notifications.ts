/**
 * Minimal stand-in; replaced by the live module (DASHBOARD.md names its interface, which is kept
 * exactly). Title only: the unread total before the page's title; no sound, no desktop notification.
 */
const PREFIX = /^\(\d+\) /;

let total = 0;
let watching = false;

function apply() {
  const bare = document.title.replace(PREFIX, '');
  const next = total > 0 ? `(${total}) ${bare}` : bare;
  if (next !== document.title) document.title = next;
}

export function setUnreadTotal(n: number): void {
  total = Math.max(0, Math.floor(n));
  apply();
  if (!watching) {
    // The app sets the title on navigation: put the count back in front of it.
    watching = true;
    new MutationObserver(apply).observe(document.querySelector('title') ?? document.head, { childList: true, subtree: true, characterData: true });
  }
}

export function announce(_n: { conversationId: string; title: string; body: string; replayed: boolean }): void {
  // The stand-in only counts (setUnreadTotal); the live module adds sound and desktop notifications.
}

export function NotificationSettings() {
  return null;
}
