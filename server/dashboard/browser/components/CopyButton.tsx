import { useState } from 'preact/hooks';
import { Button } from './Button';

export interface CopyButtonProps {
  value: string;
  /** What is copied, for screen readers: "Copy key". */
  label?: string;
  /** The input showing the value: selected when the clipboard is not available, for Ctrl+C. */
  fallbackTarget?: () => HTMLInputElement | HTMLTextAreaElement | null;
}

/**
 * Copies to the clipboard (navigator.clipboard, which needs a secure context and may be refused);
 * when it fails, selects the value in its field and says to press Ctrl+C. The outcome is announced.
 */
export function CopyButton({ value, label = 'Copy', fallbackTarget }: CopyButtonProps) {
  const [said, setSaid] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setSaid('Copied.');
    } catch {
      const target = fallbackTarget?.();
      if (target) {
        target.focus();
        target.select();
      }
      setSaid('Could not copy: the value is selected, press Ctrl+C (⌘C on a Mac).');
    }
  };
  return (
    <span class="copy">
      <Button onClick={copy}>{label}</Button>
      <span class="copy-status" role="status">
        {said}
      </span>
    </span>
  );
}
