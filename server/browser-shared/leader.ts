/**
 * One tab holds a live stream and shares what it hears with the others (the chat window's panel
 * per visitor, the dashboard per site): the Web Lock of a name decides which. Where the browser
 * refuses the document its storage (a cross-site frame without partitioned storage)
 * `navigator.locks` is missing or `request` rejects with SecurityError, and nothing may wait on a
 * lock that never comes: the tab then streams alone.
 */

/** The lock manager, when the browser has one for this document (reading it may throw where storage is refused). */
export function lockManager(): LockManager | null {
  try {
    return (navigator as Navigator & { locks?: LockManager }).locks ?? null;
  } catch {
    return null;
  }
}

/** A BroadcastChannel of `name`, or null where the browser has none or refuses it. */
export function openChannel(name: string): BroadcastChannel | null {
  try {
    return typeof BroadcastChannel === 'function' ? new BroadcastChannel(name) : null;
  } catch {
    return null;
  }
}

/**
 * Waits for the lock `name` and runs `lead` while holding it (until the promise `lead` answers
 * settles, or `signal` aborts the wait); calls `alone` instead, once, when the lock cannot be had
 * at all (no lock manager, refused, broken), never after the lock was granted or the signal aborted.
 */
export function requestLeadership(name: string, signal: AbortSignal, lead: () => Promise<void>, alone: () => void): void {
  const locks = lockManager();
  if (!locks) return alone();
  let granted = false;
  try {
    locks
      .request(name, { signal }, () => {
        granted = true;
        return signal.aborted ? undefined : lead();
      })
      .catch(() => {
        if (!signal.aborted && !granted) alone();
      });
  } catch {
    alone();
  }
}
