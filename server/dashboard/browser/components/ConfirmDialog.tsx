import type { ComponentChildren } from 'preact';
import { useAction } from '../use-action';
import { Button } from './Button';
import { Dialog } from './Dialog';
import { ErrorBanner } from './ErrorBanner';

export interface ConfirmDialogProps {
  title: string;
  children: ComponentChildren;
  /** The confirming button's label: say what happens ("Revoke key"), not "OK". */
  confirm: string;
  danger?: boolean;
  /** Runs the action; the dialog stays open, busy, until it settles, and shows its failure. */
  onConfirm: () => Promise<void>;
  onCancel: () => void;
}

/** Asks before an action that cannot be undone. Cancel has the focus first, so Enter does no harm. */
export function ConfirmDialog({ title, children, confirm, danger, onConfirm, onCancel }: ConfirmDialogProps) {
  const { busy, error, run } = useAction(onConfirm);
  return (
    <Dialog title={title} onClose={busy ? undefined : onCancel}>
      <div class="confirm-text">{children}</div>
      <ErrorBanner error={error} />
      <div class="actions">
        <Button autofocus onClick={onCancel} disabled={busy}>
          Cancel
        </Button>
        <Button variant={danger ? 'danger' : 'primary'} busy={busy} onClick={run}>
          {confirm}
        </Button>
      </div>
    </Dialog>
  );
}
