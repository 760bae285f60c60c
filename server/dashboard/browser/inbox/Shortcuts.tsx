import { Dialog } from '../components/Dialog';

export const SHORTCUTS: [keys: string, what: string][] = [
  ['j', 'Next conversation'],
  ['k', 'Previous conversation'],
  ['r', 'Reply: focus the reply field'],
  ['n', 'Note: write an internal note (only your team sees it)'],
  ['Ctrl+Enter / ⌘+Enter', 'Send the reply (in the reply field)'],
  ['Esc', 'Leave the reply field (shortcuts work again)'],
  ['e', 'Close the conversation (asks first)'],
  ['/', 'Search conversations; at the start of a reply: canned replies'],
  ['?', 'This list'],
];

/** The `?` sheet. */
export function ShortcutsSheet({ onClose }: { onClose: () => void }) {
  return (
    <Dialog title="Keyboard shortcuts" onClose={onClose}>
      <dl class="shortcuts">
        {SHORTCUTS.map(([keys, what]) => (
          <div key={keys}>
            <dt>
              <kbd>{keys}</kbd>
            </dt>
            <dd>{what}</dd>
          </div>
        ))}
      </dl>
      <p class="hint">Shortcuts other than Ctrl+Enter do nothing while you type in a field.</p>
    </Dialog>
  );
}

/** Whether a key press belongs to a field being typed in (shortcuts leave it alone). */
export function isTyping(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName);
}
