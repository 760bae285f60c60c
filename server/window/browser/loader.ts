/**
 * The chat window's loader: the one script a site embeds,
 *
 *   <script async src="https://chat.example.com/window/v1/loader.js" data-site="ws_..."></script>
 *
 * It draws the launcher in a Shadow DOM root (styles from a constructable stylesheet: no inline
 * style, no <style> element, so the host page's CSP needs no 'unsafe-inline') and loads the panel,
 * an iframe served by the chat service, on the first interaction only. It never calls the service
 * itself: the panel does, from its own origin. postMessage goes to the service's origin exactly,
 * and only messages from the panel's window and that origin are heard.
 */
import css from './loader.css';
import { createPageWatch, currentPage } from './page-context';

type Handler = (detail: unknown) => void;
type EventName = 'message' | 'closed' | 'unread';
/** A signed-in user as the site's server vouches for it: a user id and its hash, or an identity token (a JWT). */
type Identity = { userId: string; userHash: string } | { identityToken: string };
/** What the page says of its visitor without its server's signature: shown to agents as unverified. */
interface Details {
  name?: string;
  email?: string;
  attributes?: Record<string, string | number | boolean>;
}

interface ChatWindowApi {
  open(): void;
  close(): void;
  identify(identity: Identity): void;
  update(details: Details): void;
  on(event: EventName, fn: Handler): () => void;
  readonly version: 1;
}

declare global {
  interface Window {
    ChatWindow?: ChatWindowApi;
  }
}

const SVG_NS = 'http://www.w3.org/2000/svg';
const CHAT_ICON = 'M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H8l-4 4V6a2 2 0 0 1 2-2z';

function findScript(): HTMLScriptElement | null {
  const current = document.currentScript;
  if (current instanceof HTMLScriptElement && current.dataset.site) return current;
  return document.querySelector<HTMLScriptElement>('script[data-site][src*="/window/v1/loader.js"]');
}

// Read while the script runs: document.currentScript is null once it has finished.
const script = findScript();

function start() {
  if (window.ChatWindow) return; // loaded twice: the first one stays
  const siteId = script?.dataset.site ?? '';
  if (!script || !/^ws_[0-9a-hjkmnp-tv-z]{26}$/.test(siteId)) {
    console.error('[chat window] the loader script needs data-site="ws_..."');
    return;
  }
  const serviceOrigin = new URL(script.src, location.href).origin;
  const panelUrl = `${serviceOrigin}/window/v1/sites/${siteId}/panel`;

  const handlers: Record<EventName, Set<Handler>> = { message: new Set(), closed: new Set(), unread: new Set() };
  const emit = (name: EventName, detail: unknown) => {
    for (const fn of handlers[name]) {
      try {
        fn(detail);
      } catch (err) {
        console.error('[chat window] handler failed', err);
      }
    }
  };

  const host = document.createElement('div');
  host.id = 'chat-window-root';
  const root = host.attachShadow({ mode: 'open' });
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(css);
  root.adoptedStyleSheets = [sheet];

  const wrap = document.createElement('div');
  const launcher = document.createElement('button');
  launcher.type = 'button';
  launcher.className = 'launcher';
  launcher.setAttribute('aria-label', 'Open chat');
  launcher.setAttribute('aria-haspopup', 'dialog');
  launcher.setAttribute('aria-expanded', 'false');
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  const path = document.createElementNS(SVG_NS, 'path');
  path.setAttribute('d', CHAT_ICON);
  svg.appendChild(path);
  const badge = document.createElement('span');
  badge.className = 'badge';
  badge.hidden = true;
  launcher.append(svg, badge);
  wrap.appendChild(launcher);
  root.appendChild(wrap);

  let frame: HTMLIFrameElement | null = null;
  let panelReady = false;
  let isOpen = false;
  let unread = 0;
  let identity: Identity | null = null;
  let details: Details | null = null;
  const outbox: object[] = [];

  const post = (msg: object) => {
    if (frame?.contentWindow && panelReady) frame.contentWindow.postMessage({ cw: 1, ...msg }, serviceOrigin);
    else outbox.push(msg);
  };

  const setUnread = (n: number) => {
    const changed = n !== unread;
    unread = n;
    badge.textContent = n > 9 ? '9+' : String(n);
    badge.hidden = n === 0;
    launcher.setAttribute('aria-label', n ? `Open chat, ${n} unread message${n === 1 ? '' : 's'}` : isOpen ? 'Close chat' : 'Open chat');
    if (changed) emit('unread', { count: n });
  };

  const ensureFrame = () => {
    if (frame) return frame;
    frame = document.createElement('iframe');
    frame.className = 'frame';
    frame.title = 'Chat window';
    frame.src = panelUrl;
    frame.hidden = true;
    frame.id = 'chat-window-frame';
    // The panel needs no powers of the host page: no camera, no payment, nothing.
    frame.setAttribute('allow', '');
    frame.setAttribute('referrerpolicy', 'origin');
    frame.addEventListener('load', () => {
      // The panel learns the host's origin from this message's browser-set origin.
      panelReady = true;
      frame!.contentWindow!.postMessage({ cw: 1, type: 'init', identity }, serviceOrigin);
      for (const msg of outbox.splice(0)) post(msg);
      if (details) post({ type: 'details', details });
    });
    launcher.setAttribute('aria-controls', frame.id);
    wrap.appendChild(frame);
    // The page the visitor is on: the panel reports it only while a conversation is open.
    post({ type: 'page', page: currentPage() });
    return frame;
  };
  const pages = createPageWatch({ siteId, send: (page) => frame && post({ type: 'page', page }), loadPanel: ensureFrame });

  const open = () => {
    const f = ensureFrame();
    isOpen = true;
    wrap.className = 'open';
    f.hidden = false;
    launcher.setAttribute('aria-expanded', 'true');
    setUnread(0);
    f.focus();
    post({ type: 'open' });
  };

  const close = (returnFocus = true) => {
    if (!frame || !isOpen) return;
    isOpen = false;
    wrap.className = '';
    frame.hidden = true;
    launcher.setAttribute('aria-expanded', 'false');
    launcher.setAttribute('aria-label', 'Open chat');
    post({ type: 'closed' });
    if (returnFocus) launcher.focus();
  };

  launcher.addEventListener('click', () => (isOpen ? close() : open()));
  // Esc with focus on the launcher closes too (inside the panel, the panel asks us).
  root.addEventListener('keydown', (e) => {
    if ((e as KeyboardEvent).key === 'Escape' && isOpen) close();
  });

  window.addEventListener('message', (e: MessageEvent) => {
    if (!frame || e.source !== frame.contentWindow || e.origin !== serviceOrigin) return;
    const msg = e.data as { cw?: number; type?: string; message?: { direction?: string }; conversation?: unknown };
    if (!msg || msg.cw !== 1) return;
    switch (msg.type) {
      case 'close':
        close();
        break;
      case 'message':
        emit('message', msg.message);
        if (!isOpen && msg.message?.direction === 'outgoing') setUnread(unread + 1);
        break;
      case 'conversation-closed':
        emit('closed', msg.conversation);
        break;
      case 'active': {
        const m = msg as { active?: unknown; tracking?: unknown };
        pages.active(m.active === true, m.tracking !== false);
        break;
      }
    }
  });

  window.ChatWindow = {
    version: 1,
    open,
    close: () => close(false),
    identify(next: Identity) {
      const n = (next ?? {}) as { userId?: unknown; userHash?: unknown; identityToken?: unknown };
      if (typeof n.identityToken === 'string') identity = { identityToken: n.identityToken };
      else if (typeof n.userId === 'string' && typeof n.userHash === 'string') identity = { userId: n.userId, userHash: n.userHash };
      else throw new TypeError('identify() takes { identityToken } or { userId, userHash }, all strings');
      if (frame) post({ type: 'identify', identity });
    },
    update(next: Details) {
      if (!next || typeof next !== 'object') throw new TypeError('update({ name, email, attributes }) takes an object');
      const { name, email, attributes } = next;
      details = { ...details, ...(name !== undefined && { name }), ...(email !== undefined && { email }), ...(attributes !== undefined && { attributes }) };
      if (frame) post({ type: 'details', details });
    },
    on(event: EventName, fn: Handler) {
      if (!handlers[event]) throw new TypeError(`unknown event ${String(event)}; use message, closed or unread`);
      handlers[event].add(fn);
      return () => handlers[event].delete(fn);
    },
  };

  document.body.appendChild(host);
  // A conversation open on an earlier page of the site: the panel connects now (page-context.ts).
  pages.start();
  window.dispatchEvent(new Event('chatwindow:ready'));
}

if (document.body) start();
else document.addEventListener('DOMContentLoaded', start, { once: true });

export {};
