/** The page that framed the panel: its messages in, the panel's news and close requests out. */
import type { Panel } from './state';
import type { Identity } from './types';
import type { ContextReporter, VisitorDetails } from './context';
import type { HostPage } from '../page-context';

export function toParent(p: Panel, msg: object) {
  if (p.state.hostOrigin) window.parent.postMessage({ cw: 1, ...msg }, p.state.hostOrigin);
}

export function listenToHost(
  p: Panel,
  sessions: { start(): Promise<void> },
  context?: Pick<ContextReporter, 'page' | 'details'>,
  panel?: { opened(on: boolean): void },
) {
  const { state: s, dom } = p;
  dom.closeButton.addEventListener('click', () => toParent(p, { type: 'close' }));
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      toParent(p, { type: 'close' });
    }
  });

  window.addEventListener('message', (e: MessageEvent) => {
    // Only the page that framed us; its origin is the browser's word, not the message's.
    if (window.parent === window || e.source !== window.parent) return;
    const msg = e.data as { cw?: number; type?: string; identity?: Identity | null; page?: HostPage; details?: VisitorDetails };
    if (!msg || msg.cw !== 1) return;
    if (msg.type === 'init' && s.hostOrigin === null) {
      s.hostOrigin = e.origin;
      s.identity = msg.identity ?? null;
      void sessions.start();
      return;
    }
    if (e.origin !== s.hostOrigin) return;
    switch (msg.type) {
      case 'open':
        dom.input.focus();
        panel?.opened(true);
        break;
      case 'closed':
        panel?.opened(false);
        break;
      case 'identify':
        if (msg.identity && JSON.stringify(msg.identity) !== JSON.stringify(s.identity)) {
          s.identity = msg.identity;
          void sessions.start();
        }
        break;
      case 'page':
        if (msg.page && typeof msg.page.url === 'string') context?.page(msg.page);
        break;
      case 'details':
        if (msg.details && typeof msg.details === 'object') context?.details(msg.details);
        break;
    }
  });
}
