import type { ComponentChildren, JSX } from 'preact';

export type ButtonVariant = 'primary' | 'secondary' | 'danger' | 'link';

export interface ButtonProps extends Omit<JSX.ButtonHTMLAttributes<HTMLButtonElement>, 'type'> {
  variant?: ButtonVariant;
  /** Submits its form (type=submit); otherwise a plain button. */
  submit?: boolean;
  /** A request is running: disabled, announced busy, the label kept. */
  busy?: boolean;
  children: ComponentChildren;
}

/** A button. Never a `style` prop (the CSP refuses style attributes): variants are classes in dashboard.css. */
export function Button({ variant = 'secondary', submit, busy, disabled, class: cls, children, ...rest }: ButtonProps) {
  return (
    <button
      {...rest}
      type={submit ? 'submit' : 'button'}
      class={`btn btn-${variant}${cls ? ` ${cls}` : ''}`}
      disabled={disabled || busy}
      aria-busy={busy ? 'true' : undefined}
    >
      {children}
    </button>
  );
}
