/** Polls until `check` is true; fails with `what` after `timeoutMs`. Waiting, not a timing assertion. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
