/**
 * Asking the person for their password again, when an operation answered 403
 * `reauthentication_required` (openapi/manage.yaml, `x-sudo`). api.ts asks here; the app shows
 * components/ReauthDialog.tsx while a question is open. Calls that meet the same closed window at
 * once share one question: one dialog, one answer for all.
 */
type Answer = (confirmed: boolean) => void;

let view: ((open: boolean) => void) | null = null;
let waiting: Answer[] = [];

/** The app's dialog host registers here (one per tab). */
export function registerReauthView(show: (open: boolean) => void): void {
  view = show;
}

/** Resolves true once the password was confirmed (the call may be sent again), false when the person cancelled. */
export function confirmPassword(): Promise<boolean> {
  if (!view) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    waiting.push(resolve);
    if (waiting.length === 1) view!(true);
  });
}

/** The dialog's outcome: every call waiting on it goes on (confirmed) or fails as it was answered. */
export function settleReauth(confirmed: boolean): void {
  const answers = waiting;
  waiting = [];
  view?.(false);
  for (const answer of answers) answer(confirmed);
}
