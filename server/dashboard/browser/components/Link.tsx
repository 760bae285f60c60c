import type { ComponentChildren, JSX } from 'preact';
import { BASE, navigate } from '../router';

export interface LinkProps extends Omit<JSX.AnchorHTMLAttributes<HTMLAnchorElement>, 'href'> {
  /** A path below /dashboard: `/sites/ws_.../keys`. */
  to: string;
  children: ComponentChildren;
}

/** An anchor that moves within the dashboard without a reload (a modified or middle click still opens a tab). */
export function Link({ to, children, ...rest }: LinkProps) {
  return (
    <a
      {...rest}
      href={`${BASE}${to}`}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}
