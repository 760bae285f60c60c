import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';

export interface DialogProps {
  title: string;
  /** Esc, the close button, or a click outside; absent: the dialog can only be left by its own buttons. */
  onClose?: () => void;
  children: ComponentChildren;
  /** Extra classes on the <dialog> (e.g. `dialog-wide`). */
  class?: string;
}

/**
 * A modal dialog on the platform's <dialog> and showModal(): the page behind it is inert (no
 * focus, no clicks, hidden from screen readers), Tab stays inside, Esc closes it. Focus goes to
 * the first [autofocus] element (else the first control) on open, and back where it was on close.
 * Rendered while open: mount it to open it, unmount it to close it.
 */
export function Dialog({ title, onClose, children, class: cls }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const close = useRef(onClose);
  close.current = onClose;

  useEffect(() => {
    const dialog = ref.current!;
    const before = document.activeElement as HTMLElement | null;
    dialog.showModal();
    const first =
      dialog.querySelector<HTMLElement>('[autofocus]') ??
      dialog.querySelector<HTMLElement>('input:not([type=hidden]), select, textarea, button:not(.dialog-close)');
    first?.focus();
    const onCancel = (e: Event) => {
      e.preventDefault(); // the component's owner decides; unmounting closes it
      close.current?.();
    };
    dialog.addEventListener('cancel', onCancel);
    return () => {
      dialog.removeEventListener('cancel', onCancel);
      if (dialog.open) dialog.close();
      if (before?.isConnected) before.focus();
    };
  }, []);

  return (
    <dialog ref={ref} class={`dialog${cls ? ` ${cls}` : ''}`} aria-labelledby={titleId}>
      <div class="dialog-head">
        <h2 id={titleId}>{title}</h2>
        {onClose && (
          <button type="button" class="dialog-close" aria-label="Close" onClick={() => close.current?.()}>
            <span aria-hidden="true">×</span>
          </button>
        )}
      </div>
      <div class="dialog-body">{children}</div>
    </dialog>
  );
}
