import type { ComponentChildren } from 'preact';

/** What a list shows when it has nothing yet: what would be here, and what to do about it. */
export function EmptyState({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p class="empty-title">{title}</p>
      {children && <div class="empty-body">{children}</div>}
    </div>
  );
}
