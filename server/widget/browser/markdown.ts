/**
 * The chat window's markdown: a small parser to a syntax tree of allow-listed nodes, and a
 * renderer that builds DOM nodes from that tree with createElement/createTextNode only. There is
 * no HTML in the language: `<script>` or `<img onerror>` in a message is text, shown as typed.
 * Links keep only http(s) and mailto targets; anything else (javascript:, data:, relative) is text.
 */

export type Inline =
  | { type: 'text'; value: string }
  | { type: 'code'; value: string }
  | { type: 'strong' | 'em'; children: Inline[] }
  | { type: 'link'; href: string; children: Inline[] }
  | { type: 'break' };

export type Block =
  | { type: 'paragraph'; children: Inline[] }
  | { type: 'heading'; children: Inline[] }
  | { type: 'code_block'; value: string }
  | { type: 'quote'; children: Block[] }
  | { type: 'list'; ordered: boolean; items: Block[][] };

const SAFE_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);

/** The link target if it is absolute http(s) or mailto, else null (the link becomes text). */
export function safeHref(raw: string): string | null {
  const text = raw.trim();
  // Control characters and spaces are how `java\tscript:` tricks start; such a target is refused.
  if (!text || /[\u0000-\u0020\u007f]/.test(text)) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
}

// Inline parsing: a left-to-right scan; unmatched markers stay text.
export function parseInline(src: string, depth = 0): Inline[] {
  const out: Inline[] = [];
  let text = '';
  const flush = () => {
    if (text) out.push({ type: 'text', value: text });
    text = '';
  };
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === '\\' && i + 1 < src.length && /[\\`*_[\]()#>!-]/.test(src[i + 1])) {
      text += src[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      flush();
      out.push({ type: 'break' });
      i++;
      continue;
    }
    if (c === '`') {
      const end = src.indexOf('`', i + 1);
      if (end > i + 1) {
        flush();
        out.push({ type: 'code', value: src.slice(i + 1, end) });
        i = end + 1;
        continue;
      }
    }
    if (depth < 4 && (c === '*' || c === '_')) {
      const double = src[i + 1] === c;
      const marker = double ? c + c : c;
      const end = src.indexOf(marker, i + marker.length + 1);
      if (end > i + marker.length && !/\s/.test(src[i + marker.length])) {
        flush();
        out.push({ type: double ? 'strong' : 'em', children: parseInline(src.slice(i + marker.length, end), depth + 1) });
        i = end + marker.length;
        continue;
      }
    }
    if (c === '[' && depth < 4) {
      const close = src.indexOf('](', i + 1);
      const end = close >= 0 ? src.indexOf(')', close + 2) : -1;
      if (close > i && end > close) {
        const label = src.slice(i + 1, close);
        const href = safeHref(src.slice(close + 2, end));
        flush();
        if (href) out.push({ type: 'link', href, children: parseInline(label, depth + 1) });
        else out.push(...parseInline(label, depth + 1)); // an unsafe target: its label only, as text
        i = end + 1;
        continue;
      }
    }
    if ((c === 'h' || c === 'm') && (i === 0 || /[\s(]/.test(src[i - 1]))) {
      const m = /^(?:https?:\/\/|mailto:)[^\s<>()]+[^\s<>().,;:!?'"]/.exec(src.slice(i));
      const href = m ? safeHref(m[0]) : null;
      if (m && href) {
        flush();
        out.push({ type: 'link', href, children: [{ type: 'text', value: m[0] }] });
        i += m[0].length;
        continue;
      }
    }
    text += c;
    i++;
  }
  flush();
  return out;
}

const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;

export function parseMarkdown(src: string, depth = 0): Block[] {
  const lines = src.replace(/\r\n?/g, '\n').split('\n');
  const blocks: Block[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    const fence = /^\s*(```|~~~)/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      blocks.push({ type: 'code_block', value: body.join('\n') });
      continue;
    }
    const heading = /^\s*#{1,6}\s+(.*)$/.exec(line);
    if (heading) {
      blocks.push({ type: 'heading', children: parseInline(heading[1].replace(/\s#+\s*$/, '')) });
      i++;
      continue;
    }
    if (/^\s*>/.test(line) && depth < 4) {
      const body: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*> ?/, ''));
      blocks.push({ type: 'quote', children: parseMarkdown(body.join('\n'), depth + 1) });
      continue;
    }
    const item = LIST_ITEM.exec(line);
    if (item) {
      const ordered = /\d/.test(item[2]);
      const items: Block[][] = [];
      while (i < lines.length) {
        const m = LIST_ITEM.exec(lines[i]);
        if (!m || /\d/.test(m[2]) !== ordered) break;
        const body = [m[3]];
        i++;
        // Indented continuation lines belong to the item.
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !LIST_ITEM.test(lines[i])) body.push(lines[i++].trim());
        items.push([{ type: 'paragraph', children: parseInline(body.join('\n')) }]);
      }
      blocks.push({ type: 'list', ordered, items });
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && lines[i].trim() && !/^\s*(```|~~~|#{1,6}\s|>)/.test(lines[i]) && !LIST_ITEM.test(lines[i])) para.push(lines[i++]);
    blocks.push({ type: 'paragraph', children: parseInline(para.join('\n')) });
  }
  return blocks;
}

function renderInline(doc: Document, nodes: Inline[], into: Node) {
  for (const n of nodes) {
    switch (n.type) {
      case 'text':
        into.appendChild(doc.createTextNode(n.value));
        break;
      case 'code': {
        const el = doc.createElement('code');
        el.textContent = n.value;
        into.appendChild(el);
        break;
      }
      case 'strong':
      case 'em': {
        const el = doc.createElement(n.type);
        renderInline(doc, n.children, el);
        into.appendChild(el);
        break;
      }
      case 'link': {
        // Checked again here: the tree may come from anywhere, the renderer trusts nothing.
        const href = safeHref(n.href);
        if (!href) {
          renderInline(doc, n.children, into);
          break;
        }
        const a = doc.createElement('a');
        a.href = href;
        a.target = '_blank';
        a.rel = 'noopener noreferrer nofollow';
        renderInline(doc, n.children, a);
        into.appendChild(a);
        break;
      }
      case 'break':
        into.appendChild(doc.createElement('br'));
        break;
    }
  }
}

function renderBlocks(doc: Document, blocks: Block[], into: Node) {
  for (const b of blocks) {
    switch (b.type) {
      case 'paragraph':
      case 'heading': {
        const el = doc.createElement('p');
        if (b.type === 'heading') el.className = 'md-heading';
        renderInline(doc, b.children, el);
        into.appendChild(el);
        break;
      }
      case 'code_block': {
        const pre = doc.createElement('pre');
        const code = doc.createElement('code');
        code.textContent = b.value;
        pre.appendChild(code);
        into.appendChild(pre);
        break;
      }
      case 'quote': {
        const el = doc.createElement('blockquote');
        renderBlocks(doc, b.children, el);
        into.appendChild(el);
        break;
      }
      case 'list': {
        const el = doc.createElement(b.ordered ? 'ol' : 'ul');
        for (const item of b.items) {
          const li = doc.createElement('li');
          renderBlocks(doc, item, li);
          el.appendChild(li);
        }
        into.appendChild(el);
        break;
      }
    }
  }
}

/** A message's content as DOM nodes: markdown through the tree, `plain` as one text node. */
export function renderContent(doc: Document, content: string, format: string): DocumentFragment {
  const frag = doc.createDocumentFragment();
  if (format === 'markdown') renderBlocks(doc, parseMarkdown(content), frag);
  else {
    const p = doc.createElement('p');
    p.className = 'plain';
    p.textContent = content;
    frag.appendChild(p);
  }
  return frag;
}
