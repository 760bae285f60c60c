/**
 * The session the window shows: one visitor's history, then its live updates, retried with
 * backoff until it is shown, and ended for good when the gateway refuses the visitor for good.
 */
import { Live, openLive, sleep } from '../live-connection';
import { errorOf, HttpError } from './http';
import { setConversation, type Panel } from './state';
import type { TokenClient } from './tokens';
import type { CurrentConversation, PageOfMessages } from './types';
import { onEvent, setStatus, showClosed, showMessage } from './view';

export function createSessions(p: Panel, tokens: TokenClient) {
  const { state: s, dom } = p;

  /** Shows the current conversation; answers the position the live connection resumes from. */
  async function loadHistory(signal: AbortSignal): Promise<string> {
    dom.log.setAttribute('aria-busy', 'true');
    try {
      const res = await tokens.api('/conversation', {}, signal);
      if (!res.ok) throw await errorOf(res);
      const data = (await res.json()).data as CurrentConversation;
      setConversation(p, data.conversation);
      if (s.conversation) {
        const page = await tokens.api(`/conversations/${s.conversation.id}/messages?order=desc&limit=50`, {}, signal);
        if (!page.ok) throw await errorOf(page);
        const messages = ((await page.json()) as PageOfMessages).data.reverse();
        for (const m of messages) showMessage(p, m, false);
        if (s.conversation.state === 'closed') showClosed(p, s.conversation, false);
      }
      return data.lastEventId;
    } finally {
      dom.log.removeAttribute('aria-busy');
    }
  }

  /** Clears what the window shows and stops the live connection and its retries. */
  function reset(): AbortController {
    s.session?.abort();
    const current = new AbortController();
    s.session = current;
    s.shown.clear();
    // Sends still under way land in the session that follows: their bubbles stay.
    dom.log.replaceChildren(...Array.from(dom.log.querySelectorAll('.msg.pending')));
    s.closedNotice = null;
    setConversation(p, null);
    return current;
  }

  function enableForm(on: boolean) {
    for (const el of Array.from(dom.form.elements)) (el as HTMLButtonElement).disabled = !on;
  }

  /** The gateway refused the visitor for good (identity off, a rotated secret): nothing to show or retry. */
  function end(why = 'This chat session has ended. Reload the page to start again.') {
    reset().abort();
    s.session = null;
    clearTimeout(s.refreshTimer);
    enableForm(false);
    setStatus(p, why);
  }

  /** Shows the visitor's session; `haveToken`: the token just taken names the visitor to show. */
  async function start(haveToken = false) {
    const current = reset();
    enableForm(true);
    setStatus(p, 'Connecting…');
    for (let backoff = 1000; !current.signal.aborted; backoff = Math.min(backoff * 2, 30_000)) {
      let live: Live | undefined;
      try {
        if (!haveToken) await tokens.issue();
        haveToken = false;
        if (current.signal.aborted) return;
        s.sessionVisitor = s.visitorId;
        live = openLive({
          name: `cw:${p.siteId}:${s.visitorId}`,
          signal: current.signal,
          api: tokens.api,
          renew: () => tokens.renew(true),
          onEvent: (e) => onEvent(p, e),
          onStatus: (text) => setStatus(p, text),
        });
        const position = await loadHistory(current.signal);
        // The stream resumes right after what the history showed, or after what the leader already shared.
        live.lastEventId ??= position;
        live.start();
        setStatus(p, '');
        return;
      } catch (err) {
        live?.close();
        if (current.signal.aborted) return;
        // Before any session the gateway's reason says more (identity required, a hash that does not match).
        if (err instanceof HttpError && err.final) return end(err.message);
        setStatus(p, err instanceof HttpError && err.status < 500 && err.status !== 429 ? err.message : 'Cannot reach the chat service. Retrying…');
        await sleep(backoff, current.signal);
      }
    }
  }

  return { start, end };
}

export type Sessions = ReturnType<typeof createSessions>;
