import type { ComponentChildren, JSX } from 'preact';
import { useId } from 'preact/hooks';

export interface FieldProps {
  label: string;
  /** A line under the control, tied to it by aria-describedby. */
  hint?: string;
  /** A problem with the value, announced and tied to the control. */
  error?: string | null;
  /** Renders the control with the ids to put on it. */
  children: (ids: { id: string; describedBy: string | undefined; invalid: boolean }) => ComponentChildren;
}

/** A label, a control and its hint or error, tied together for screen readers. */
export function Field({ label, hint, error, children }: FieldProps) {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  const errorId = error ? `${id}-error` : undefined;
  const describedBy = [hintId, errorId].filter(Boolean).join(' ') || undefined;
  return (
    <div class={`field${error ? ' field-invalid' : ''}`}>
      <label for={id}>{label}</label>
      {children({ id, describedBy, invalid: Boolean(error) })}
      {hint && (
        <p class="hint" id={hintId}>
          {hint}
        </p>
      )}
      {error && (
        <p class="field-error" id={errorId}>
          {error}
        </p>
      )}
    </div>
  );
}

export interface TextInputProps extends Omit<JSX.InputHTMLAttributes<HTMLInputElement>, 'value' | 'onInput' | 'label'> {
  label: string;
  value: string;
  onValue: (value: string) => void;
  hint?: string;
  error?: string | null;
}

/** A labelled text input (type text, email, password, url...). */
export function TextInput({ label, value, onValue, hint, error, ...rest }: TextInputProps) {
  return (
    <Field label={label} hint={hint} error={error}>
      {({ id, describedBy, invalid }) => (
        <input
          type="text"
          {...rest}
          id={id}
          value={value}
          onInput={(e) => onValue(e.currentTarget.value)}
          aria-describedby={describedBy}
          aria-invalid={invalid ? 'true' : undefined}
        />
      )}
    </Field>
  );
}
