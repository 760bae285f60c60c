/** The visitor's side: the text and the chosen files, sent with the window's own message id and retried by hand. */
import { renderContent } from '../markdown';
import { errorOf, HttpError } from './http';
import { setConversation, type Panel } from './state';
import type { TokenClient } from './tokens';
import type { SendAnswer } from './types';
import { appendToLog, bubble, formatSize, setStatus, showMessage } from './view';

const MAX_FILES = 10;

function uuid(): string {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function showChosen(p: Panel) {
  const { state: s, dom } = p;
  dom.chosen.replaceChildren();
  s.files.forEach((f, i) => {
    const li = document.createElement('li');
    li.textContent = `${f.name} (${formatSize(f.size)}) `;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Remove ${f.name}`);
    remove.addEventListener('click', () => {
      s.files.splice(i, 1);
      showChosen(p);
      dom.input.focus();
    });
    li.appendChild(remove);
    dom.chosen.appendChild(li);
  });
  dom.chosen.hidden = s.files.length === 0;
}

function send(p: Panel, tokens: TokenClient, text: string, attached: File[]) {
  const s = p.state;
  if (!s.interacted) {
    s.interacted = true;
    tokens.keepCredential(s.credential);
  }
  const clientMessageId = uuid();
  const { el, body } = bubble('incoming');
  el.classList.add('pending');
  if (text) body.appendChild(renderContent(document, text, 'plain'));
  for (const f of attached) {
    const name = document.createElement('p');
    name.className = 'file-name';
    name.textContent = f.name;
    body.appendChild(name);
  }
  const state = document.createElement('span');
  state.className = 'state';
  el.appendChild(state);
  appendToLog(p, el);

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
      res = await tokens.api('/messages', { method: 'POST', headers, body: requestBody });
    } catch (err) {
      if (err instanceof HttpError) return failed(`Not sent: ${err.message}`, !err.final);
      return failed('Not sent: no connection.', true);
    }
    if (!res.ok) {
      const err = await errorOf(res);
      // A full quota (507) stays full for a while: no Retry button that would only fail again.
      return failed(`Not sent: ${err.message}`, (res.status >= 500 && res.status !== 507) || res.status === 429);
    }
    const data = (await res.json()).data as SendAnswer;
    if (s.conversation?.id !== data.conversation.id) setConversation(p, data.conversation);
    el.remove();
    // The stream may have brought it first; either way it shows once.
    showMessage(p, data.message, false);
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

export function wireComposer(p: Panel, tokens: TokenClient) {
  const { state: s, dom } = p;
  dom.form.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = dom.input.value.trim();
    if (!text && !s.files.length) return;
    if (!s.token) {
      setStatus(p, 'Still connecting; try again in a moment.');
      return;
    }
    send(p, tokens, text, s.files);
    dom.input.value = '';
    s.files = [];
    showChosen(p);
    dom.input.focus();
  });

  dom.input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      dom.form.requestSubmit();
    }
  });

  dom.attachButton.addEventListener('click', () => dom.fileInput.click());
  dom.fileInput.addEventListener('change', () => {
    s.files = [...s.files, ...Array.from(dom.fileInput.files ?? [])].slice(0, MAX_FILES);
    dom.fileInput.value = '';
    showChosen(p);
    dom.input.focus();
  });
}
