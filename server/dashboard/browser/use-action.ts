import { useState } from 'preact/hooks';

/**
 * Runs a call for a form or a button: `busy` while it runs (for <Button busy>), its failure kept
 * in `error` (for <ErrorBanner>). `submit` is a form's onSubmit: no page load, then the action.
 */
export function useAction(action: () => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const submit = (e: Event) => {
    e.preventDefault();
    void run();
  };
  return { busy, error, run, submit };
}
