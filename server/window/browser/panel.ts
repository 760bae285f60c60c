/**
 * The chat window's panel: the document inside the loader's iframe, served by the chat service
 * (its own origin, CSP without inline anything, `frame-ancestors` limited to the site's allowed
 * origins). It gets window tokens from the gateway, shows the visitor's conversation, sends text
 * and files, and follows live updates (live-connection.ts).
 */
import { renderContent, safeHref } from './markdown';
import { FeedEvent, Live, openLive, sleep } from './live-connection';

interface Attachment {
  id: string;
  name: string;
  mimeType: string;
  size: number;
  url: string;
}
interface Message {
  id: string;
  conversationId: string;
  direction: 'incoming' | 'outgoing';
  content: string;
  format: string;
  attachments: Attachment[];
  createdAt: string;
}
interface Conversation {
  id: string;
  state: 'open' | 'closed';
}
interface TokenAnswer {
  token: string;
  refreshAfter: number;
  visitorId: string;
  visitorCredential: string | null;
}
interface Identity {
  userId: string;
  userHash: string;
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const siteId = document.documentElement.dataset.site ?? '';
const base = `/window/v1/sites/${siteId}`;
const log = $<HTMLDivElement>('cw-log');
const statusLine = $<HTMLParagraphElement>('cw-status');
const form = $<HTMLFormElement>('cw-form');
const input = $<HTMLTextAreaElement>('cw-input');
const fileInput = $<HTMLInputElement>('cw-file');
const attachButton = $<HTMLButtonElement>('cw-attach');
const chosen = $<HTMLUListElement>('cw-chosen');
const closeButton = $<HTMLButtonElement>('cw-close');

/** localStorage of the panel's origin when it works, else memory: blocked storage must not break the window. */
const memory = new Map<string, string>();
const storage = {
  get(key: string): string | null {
    try {
      const v = localStorage.getItem(key);
      if (v !== null) return v;
    } catch {
      // blocked (third-party storage off, private mode): memory only
    }
    return memory.get(key) ?? null;
  },
  set(key: string, value: string) {
    memory.set(key, value);
    try {
      localStorage.setItem(key, value);
    } catch {
      // blocked: memory only
    }
  },
  remove(key: string) {
    memory.delete(key);
    try {
      localStorage.removeItem(key);
    } catch {
      // blocked
    }
  },
};
const CREDENTIAL_KEY = `cw:${siteId}:visitor`;

let hostOrigin: string | null = null;
let identity: Identity | null = null;
let token: string | null = null;
let visitorId: string | null = null;
/** The visitor whose history and live connection the window shows. */
let sessionVisitor: string | null = null;
let credential: string | null = null;
/** Nothing is stored before the visitor sends something. */
let interacted = false;
let conversation: Conversation | null = null;
let refreshTimer: ReturnType<typeof setTimeout> | undefined;
let session: AbortController | null = null;
const shown = new Map<string, HTMLElement>();
let closedNotice: HTMLElement | null = null;

function uuid(): string {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function toParent(msg: object) {
  if (hostOrigin) window.parent.postMessage({ cw: 1, ...msg }, hostOrigin);
}

function setStatus(text: string) {
  if (statusLine.textContent !== text) statusLine.textContent = text;
}

// ---- the gateway -------------------------------------------------------------------------

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The gateway refused for good: asking again cannot help. */
    readonly final = false,
  ) {
    super(message);
  }
}

/** What a refusal without the service's envelope (a proxy's page) means to a visitor. */
const PLAIN_REFUSALS: Record<number, string> = {
  413: 'The message or its files are too large.',
  507: 'The chat service has no room for files right now.',
};

/** The refusal in words: the envelope's `error.message` (quotas, types, sizes say why there). */
async function errorOf(res: Response, final = false): Promise<HttpError> {
  let message = PLAIN_REFUSALS[res.status] ?? `The chat service answered ${res.status}.`;
  try {
    const body = await res.json();
    if (typeof body?.error?.message === 'string') message = body.error.message;
  } catch {
    // not JSON
  }
  return new HttpError(res.status, message, final);
}

function keepCredential(value: string | null) {
  credential = value;
  if (value && interacted && !identity) storage.set(CREDENTIAL_KEY, value);
}

function scheduleRefresh(afterSeconds: number) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refreshToken, Math.max(5, afterSeconds) * 1000);
}

async function issueToken(): Promise<void> {
  const body: Record<string, string> = { hostOrigin: hostOrigin! };
  if (identity) Object.assign(body, identity);
  else {
    // Another tab may have started over as a new visitor: its credential first, so tabs stay one visitor.
    const known = storage.get(CREDENTIAL_KEY) ?? credential;
    if (known) body.visitorCredential = known;
  }
  let res = await fetch(`${base}/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (res.status === 401 && body.visitorCredential) {
    // An expired or foreign credential: start over as a new visitor rather than not at all.
    storage.remove(CREDENTIAL_KEY);
    credential = null;
    delete body.visitorCredential;
    res = await fetch(`${base}/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  }
  // Identity off, a rotated secret, a refused origin, or anonymous visitors refused: no retry helps.
  if (!res.ok) throw await errorOf(res, [400, 401, 403, 404].includes(res.status));
  take((await res.json()).data);
}

function take(t: TokenAnswer) {
  token = t.token;
  visitorId = t.visitorId;
  keepCredential(t.visitorCredential);
  scheduleRefresh(t.refreshAfter);
}

/** A longer-lived token for the same session, or else one from the gateway. */
async function obtainToken(refresh: boolean): Promise<void> {
  if (refresh && token) {
    try {
      const res = await fetch(`${base}/token/refresh`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } });
      if (res.ok) return take((await res.json()).data);
    } catch {
      // offline: the gateway answers below
    }
  }
  await issueToken();
}

let renewing: Promise<void> | null = null;

/**
 * A new token, one request at a time for every caller (the stream, sends, the timer). A revoked
 * anonymous visitor comes back as a new visitor: the window then shows that visitor's session,
 * never the old one's history. A refusal for good ends the session instead of retrying for ever.
 */
function renew(refresh = false): Promise<void> {
  renewing ??= obtainToken(refresh).then(
    () => {
      renewing = null;
      if (session && visitorId !== sessionVisitor) void startSession(true);
    },
    (err) => {
      renewing = null;
      if (err instanceof HttpError && err.final && session) endSession();
      throw err;
    },
  );
  return renewing;
}

function refreshToken() {
  renew(true).catch((err) => {
    if (!(err instanceof HttpError && err.final)) scheduleRefresh(10);
  });
}

/** A call with the window token; a refused token is renewed once. */
async function api(path: string, init: RequestInit = {}, signal?: AbortSignal): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    const headers = new Headers(init.headers);
    headers.set('Authorization', `Bearer ${token}`);
    const res = await fetch(`${base}${path}`, { ...init, headers, signal, cache: 'no-store' });
    if (res.status !== 401 || attempt > 0) return res;
    await renew();
  }
}

// ---- showing messages --------------------------------------------------------------------

function formatSize(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function timeOf(iso: string): HTMLTimeElement {
  const t = document.createElement('time');
  t.dateTime = iso;
  const d = new Date(iso);
  t.textContent = Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return t;
}

function bubble(direction: 'incoming' | 'outgoing'): { el: HTMLElement; body: HTMLElement } {
  const el = document.createElement('div');
  el.className = `msg ${direction === 'incoming' ? 'mine' : 'theirs'}`;
  const who = document.createElement('span');
  who.className = 'sr-only';
  who.textContent = direction === 'incoming' ? 'You: ' : 'Reply: ';
  const body = document.createElement('div');
  body.className = 'body';
  el.append(who, body);
  return { el, body };
}

function appendToLog(el: HTMLElement) {
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.appendChild(el);
  if (atBottom || el.classList.contains('mine')) log.scrollTop = log.scrollHeight;
}

function showMessage(m: Message, live: boolean) {
  if (shown.has(m.id)) return;
  if (closedNotice && conversation && m.conversationId !== conversation.id) closedNotice = null;
  const { el, body } = bubble(m.direction);
  el.dataset.id = m.id;
  if (m.content) body.appendChild(renderContent(document, m.content, m.format));
  if (m.attachments.length) {
    const list = document.createElement('ul');
    list.className = 'files';
    for (const a of m.attachments) {
      const li = document.createElement('li');
      const href = safeHref(a.url);
      const label = `${a.name} (${formatSize(a.size)})`;
      if (href) {
        const link = document.createElement('a');
        link.href = href;
        link.target = '_blank';
        link.rel = 'noopener noreferrer nofollow';
        link.textContent = label;
        li.appendChild(link);
      } else li.textContent = label;
      list.appendChild(li);
    }
    body.appendChild(list);
  }
  el.appendChild(timeOf(m.createdAt));
  shown.set(m.id, el);
  appendToLog(el);
  if (live) toParent({ type: 'message', message: { id: m.id, conversationId: m.conversationId, direction: m.direction, content: m.content, format: m.format, createdAt: m.createdAt } });
}

function showClosed(c: Conversation, live: boolean) {
  if (closedNotice?.dataset.conversation === c.id) return;
  const p = document.createElement('p');
  p.className = 'notice';
  p.dataset.conversation = c.id;
  p.textContent = 'This conversation was closed. Your next message starts a new one.';
  closedNotice = p;
  appendToLog(p);
  if (live) toParent({ type: 'conversation-closed', conversation: { id: c.id, state: c.state } });
}

function onEvent({ event, data }: FeedEvent) {
  const c = data.conversation as Conversation | undefined;
  if (event === 'message' && data.message) showMessage(data.message as Message, true);
  else if (event === 'conversation.started' && c) conversation = c;
  else if (event === 'conversation.closed' && c) {
    if (conversation?.id === c.id) conversation = c;
    showClosed(c, true);
  }
}

// ---- history and live updates ------------------------------------------------------------

/** Shows the current conversation; answers the position the live connection resumes from. */
async function loadHistory(signal: AbortSignal): Promise<string> {
  log.setAttribute('aria-busy', 'true');
  try {
    const res = await api('/conversation', {}, signal);
    if (!res.ok) throw await errorOf(res);
    const data = (await res.json()).data as { conversation: Conversation | null; lastEventId: string };
    conversation = data.conversation;
    if (conversation) {
      const page = await api(`/conversations/${conversation.id}/messages?order=desc&limit=50`, {}, signal);
      if (!page.ok) throw await errorOf(page);
      const messages = ((await page.json()).data as Message[]).reverse();
      for (const m of messages) showMessage(m, false);
      if (conversation.state === 'closed') showClosed(conversation, false);
    }
    return data.lastEventId;
  } finally {
    log.removeAttribute('aria-busy');
  }
}

/** Clears what the window shows and stops the live connection and its retries. */
function resetSession(): AbortController {
  session?.abort();
  const current = new AbortController();
  session = current;
  shown.clear();
  // Sends still under way land in the session that follows: their bubbles stay.
  log.replaceChildren(...Array.from(log.querySelectorAll('.msg.pending')));
  closedNotice = null;
  conversation = null;
  return current;
}

function enableForm(on: boolean) {
  for (const el of Array.from(form.elements)) (el as HTMLButtonElement).disabled = !on;
}

/** The gateway refused the visitor for good (identity off, a rotated secret): nothing to show or retry. */
function endSession(why = 'This chat session has ended. Reload the page to start again.') {
  resetSession().abort();
  session = null;
  clearTimeout(refreshTimer);
  enableForm(false);
  setStatus(why);
}

/** Shows the visitor's session; `haveToken`: the token just taken names the visitor to show. */
async function startSession(haveToken = false) {
  const current = resetSession();
  enableForm(true);
  setStatus('Connecting…');
  for (let backoff = 1000; !current.signal.aborted; backoff = Math.min(backoff * 2, 30_000)) {
    let live: Live | undefined;
    try {
      if (!haveToken) await issueToken();
      haveToken = false;
      if (current.signal.aborted) return;
      sessionVisitor = visitorId;
      live = openLive({ name: `cw:${siteId}:${visitorId}`, signal: current.signal, api, renew: () => renew(true), onEvent, onStatus: setStatus });
      const position = await loadHistory(current.signal);
      // The stream resumes right after what the history showed, or after what the leader already shared.
      live.lastEventId ??= position;
      live.start();
      setStatus('');
      return;
    } catch (err) {
      live?.close();
      if (current.signal.aborted) return;
      // Before any session the gateway's reason says more (identity required, a hash that does not match).
      if (err instanceof HttpError && err.final) return endSession(err.message);
      setStatus(err instanceof HttpError && err.status < 500 && err.status !== 429 ? err.message : 'Cannot reach the chat service. Retrying…');
      await sleep(backoff, current.signal);
    }
  }
}

// ---- sending -----------------------------------------------------------------------------

let files: File[] = [];
const MAX_FILES = 10;

function showChosen() {
  chosen.replaceChildren();
  files.forEach((f, i) => {
    const li = document.createElement('li');
    li.textContent = `${f.name} (${formatSize(f.size)}) `;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Remove ${f.name}`);
    remove.addEventListener('click', () => {
      files.splice(i, 1);
      showChosen();
      input.focus();
    });
    li.appendChild(remove);
    chosen.appendChild(li);
  });
  chosen.hidden = files.length === 0;
}

function send(text: string, attached: File[]) {
  if (!interacted) {
    interacted = true;
    keepCredential(credential);
  }
  const clientMessageId = uuid();
  const { el, body } = bubble('incoming');
  el.classList.add('pending');
  if (text) body.appendChild(renderContent(document, text, 'plain'));
  for (const f of attached) {
    const p = document.createElement('p');
    p.className = 'file-name';
    p.textContent = f.name;
    body.appendChild(p);
  }
  const state = document.createElement('span');
  state.className = 'state';
  el.appendChild(state);
  appendToLog(el);

  const attempt = async () => {
    state.replaceChildren('Sending…');
    el.classList.remove('failed');
    let res: Response;
    try {
      let requestBody: BodyInit;
      const headers: Record<string, string> = {};
      if (attached.length) {
        const fd = new FormData();
        if (text) fd.append('content', text);
        fd.append('format', 'plain');
        fd.append('clientMessageId', clientMessageId);
        for (const f of attached) fd.append('file', f, f.name);
        requestBody = fd;
      } else {
        headers['Content-Type'] = 'application/json';
        requestBody = JSON.stringify({ content: text, format: 'plain', clientMessageId });
      }
      res = await api('/messages', { method: 'POST', headers, body: requestBody });
    } catch (err) {
      if (err instanceof HttpError) return failed(`Not sent: ${err.message}`, !err.final);
      return failed('Not sent: no connection.', true);
    }
    if (!res.ok) {
      const err = await errorOf(res);
      // A full quota (507) stays full for a while: no Retry button that would only fail again.
      return failed(`Not sent: ${err.message}`, (res.status >= 500 && res.status !== 507) || res.status === 429);
    }
    const data = (await res.json()).data as { conversation: Conversation; message: Message };
    if (conversation?.id !== data.conversation.id) conversation = data.conversation;
    el.remove();
    // The stream may have brought it first; either way it shows once.
    showMessage(data.message, false);
  };
  const failed = (why: string, retry: boolean) => {
    el.classList.add('failed');
    state.replaceChildren(why);
    if (retry) {
      const again = document.createElement('button');
      again.type = 'button';
      again.className = 'retry';
      again.textContent = 'Retry';
      // The same clientMessageId: a resend after a lost answer never posts twice.
      again.addEventListener('click', () => void attempt());
      state.append(' ', again);
    }
  };
  void attempt();
}

form.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text && !files.length) return;
  if (!token) {
    setStatus('Still connecting; try again in a moment.');
    return;
  }
  send(text, files);
  input.value = '';
  files = [];
  showChosen();
  input.focus();
});

input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    form.requestSubmit();
  }
});

attachButton.addEventListener('click', () => fileInput.click());
fileInput.addEventListener('change', () => {
  files = [...files, ...Array.from(fileInput.files ?? [])].slice(0, MAX_FILES);
  fileInput.value = '';
  showChosen();
  input.focus();
});

closeButton.addEventListener('click', () => toParent({ type: 'close' }));
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') {
    e.preventDefault();
    toParent({ type: 'close' });
  }
});

// ---- the host page -----------------------------------------------------------------------

window.addEventListener('message', (e: MessageEvent) => {
  // Only the page that framed us; its origin is the browser's word, not the message's.
  if (window.parent === window || e.source !== window.parent) return;
  const msg = e.data as { cw?: number; type?: string; identity?: Identity | null };
  if (!msg || msg.cw !== 1) return;
  if (msg.type === 'init' && hostOrigin === null) {
    hostOrigin = e.origin;
    identity = msg.identity ?? null;
    void startSession();
    return;
  }
  if (e.origin !== hostOrigin) return;
  switch (msg.type) {
    case 'open':
      input.focus();
      break;
    case 'identify':
      if (msg.identity && (msg.identity.userId !== identity?.userId || msg.identity.userHash !== identity?.userHash)) {
        identity = msg.identity;
        void startSession();
      }
      break;
  }
});

if (window.parent === window) {
  setStatus('This is the chat window of a website: open it from the site.');
  form.hidden = true;
}

export {};
