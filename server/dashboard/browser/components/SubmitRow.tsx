import type { ComponentChildren } from 'preact';
import { Button } from './Button';

export interface SubmitRowProps {
  /** The submit is running. */
  busy: boolean;
  /** Nothing to submit (the form holds what is saved). */
  disabled?: boolean;
  /** What the last submit did ("Saved."), announced politely. */
  status: ComponentChildren;
  /** The button's label. */
  children: ComponentChildren;
}

/** A settings form's submit button with its status beside it, as every such form shows them. */
export function SubmitRow({ busy, disabled, status, children }: SubmitRowProps) {
  return (
    <div class="line-row">
      <Button variant="primary" submit busy={busy} disabled={disabled}>
        {children}
      </Button>
      <span class="copy-status" role="status">
        {status}
      </span>
    </div>
  );
}
