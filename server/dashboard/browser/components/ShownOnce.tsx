import { useId, useRef } from 'preact/hooks';
import { CopyButton } from './CopyButton';
import { Button } from './Button';

export interface ShownOnceProps {
  /** What it is: "Access key". */
  label: string;
  value: string;
  /** Dismissed: the value is dropped from the page and cannot be shown again. */
  onDone: () => void;
}

/** A secret the server answers once (a key, a signing secret): shown with a copy button and a warning. */
export function ShownOnce({ label, value, onDone }: ShownOnceProps) {
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  return (
    <section class="shown-once" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>{label}</h2>
      <p class="warning">Copy it now and keep it somewhere safe: it is shown once, and cannot be shown again.</p>
      <div class="shown-once-row">
        <label for={id} class="sr-only">
          {label}
        </label>
        <input id={id} ref={input} class="secret" readOnly value={value} spellcheck={false} autocomplete="off" onFocus={(e) => e.currentTarget.select()} />
        <CopyButton value={value} label={`Copy ${label.toLowerCase()}`} fallbackTarget={() => input.current} />
      </div>
      <Button onClick={onDone}>I have copied it</Button>
    </section>
  );
}
