/** Polls until `check` is true; fails with `what` after `timeoutMs`. Waiting, not a timing assertion. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Polls until `list()` is empty (a clean-up that finishes after the answer was sent), then answers
 * what it lists: nothing, or what was still there after `timeoutMs`, for an assertion that names it.
 */
export async function leftAfterCleanUp<T>(list: () => T[], timeoutMs = 15000): Promise<T[]> {
  const end = Date.now() + timeoutMs;
  while (list().length && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
  return list();
}

/**
 * `promise`, or a failure naming `what` after `ms`: a liveness bound, so that a hang fails the test
 * with its name instead of at jest's time-out. Never a speed assertion: give `ms` far above the
 * timer of the service that should end the wait, and say which timer that is.
 */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms))),
  ]).finally(() => clearTimeout(timer));
}
