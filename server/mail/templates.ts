/**
 * The emails' templates: each gives a subject, a plain-text part and an HTML part from its values.
 * Every value is escaped where it lands in HTML (the `html` tag below is the only way to write
 * markup here), so a name or a message from a visitor or a member never becomes markup; values
 * reach the subject and the text part with line breaks in the subject removed.
 */
import { parseMarkdown, safeHref, type Block, type Inline } from '../window/browser/markdown';

/** Markup this module wrote itself; anything else put into `html` is escaped. */
class Markup {
  constructor(readonly value: string) {}
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

/** A piece of HTML: the literal parts as written, every interpolated value escaped unless it is Markup. */
export function html(strings: TemplateStringsArray, ...values: (string | number | Markup | (string | Markup)[])[]): Markup {
  let out = strings[0];
  values.forEach((v, i) => {
    const parts = Array.isArray(v) ? v : [v];
    out += parts.map((p) => (p instanceof Markup ? p.value : escapeHtml(String(p)))).join('') + strings[i + 1];
  });
  return new Markup(out);
}

/** A link a template may make: http(s) only, so a value cannot become `javascript:` or `data:`. */
function webLink(value: string | undefined): string | undefined {
  if (!value) return undefined;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** One line of a header: no line breaks, so a value cannot add a header of its own. */
function oneLine(value: string): string {
  return value.replace(/[\r\n\u2028\u2029]+/g, ' ').trim();
}

/** What a template makes of its values. `unsubscribeUrl`: a notification's one-click unsubscribe (RFC 8058). */
export interface RenderedEmail {
  subject: string;
  text: string;
  html: string;
  unsubscribeUrl?: string;
}

type Values = Record<string, string>;

interface Body {
  subject: string;
  /** Paragraphs of the text part. */
  text: string[];
  /** The HTML part's content, inside the layout. */
  html: Markup;
  /** A link the email is about (its button), shown in both parts. */
  action?: { label: string; url: string };
  unsubscribeUrl?: string;
}

const paragraphs = (lines: string[]) => lines.map((line) => html`<p>${line}</p>`);

/** A message quoted in a notification: who wrote it and its content as the window shows it. */
export interface QuotedMessage {
  author: string;
  content: string;
  format: string;
}

/** The message's tree (the window's parser: no HTML in the language, links http(s) and mailto only). */
const blocksOf = (m: QuotedMessage): Block[] =>
  m.format === 'markdown' ? parseMarkdown(m.content) : [{ type: 'paragraph', children: [{ type: 'text', value: m.content }] }];

function inlineHtml(nodes: Inline[]): Markup[] {
  return nodes.map((n) => {
    switch (n.type) {
      case 'text':
        return html`${n.value}`;
      case 'code':
        return html`<code>${n.value}</code>`;
      case 'strong':
        return html`<strong>${inlineHtml(n.children)}</strong>`;
      case 'em':
        return html`<em>${inlineHtml(n.children)}</em>`;
      case 'link': {
        const href = safeHref(n.href);
        return href ? html`<a href="${href}" rel="noopener noreferrer nofollow">${inlineHtml(n.children)}</a>` : html`${inlineHtml(n.children)}`;
      }
      case 'break':
        return html`<br />`;
    }
  });
}

function blocksHtml(blocks: Block[]): Markup[] {
  return blocks.map((b) => {
    switch (b.type) {
      case 'paragraph':
      case 'heading':
        return html`<p>${inlineHtml(b.children)}</p>`;
      case 'code_block':
        return html`<pre><code>${b.value}</code></pre>`;
      case 'quote':
        return html`<blockquote>${blocksHtml(b.children)}</blockquote>`;
      case 'list': {
        const items = b.items.map((item) => html`<li>${blocksHtml(item)}</li>`);
        return b.ordered
          ? html`<ol>
              ${items}
            </ol>`
          : html`<ul>
              ${items}
            </ul>`;
      }
    }
  });
}

const inlineText = (nodes: Inline[]): string =>
  nodes
    .map((n) => (n.type === 'text' || n.type === 'code' ? n.value : n.type === 'break' ? ' ' : n.type === 'link' ? linkText(n) : inlineText(n.children)))
    .join('');
/** A link in the text part: its label, and the address when the label is not the address itself. */
function linkText(n: Extract<Inline, { type: 'link' }>): string {
  const label = inlineText(n.children);
  return label === n.href ? label : `${label} (${n.href})`;
}
const blocksText = (blocks: Block[]): string[] =>
  blocks.flatMap((b) =>
    b.type === 'code_block'
      ? [b.value]
      : b.type === 'quote'
        ? blocksText(b.children)
        : b.type === 'list'
          ? b.items.flatMap(blocksText)
          : [inlineText(b.children)],
  );

/** Quoted messages as `author: text` lines of the text part, and rendered like the window in the HTML part. */
function quotedMessages(raw: string | undefined): { text: string[]; html: Markup[] } {
  let list: QuotedMessage[] = [];
  try {
    const parsed: unknown = raw ? JSON.parse(raw) : [];
    if (Array.isArray(parsed)) list = parsed.filter((m): m is QuotedMessage => typeof m?.author === 'string' && typeof m?.content === 'string');
  } catch {
    // Values are written by this service; a malformed list quotes nothing rather than failing the email.
  }
  return {
    text: list.map((m) => `${m.author}: ${blocksText(blocksOf(m)).join(' ').replace(/\s+/g, ' ').trim() || '(a file)'}`),
    html: list.map(
      (m) =>
        html`<div class="message">
          <p><strong>${m.author}</strong></p>
          ${m.content ? blocksHtml(blocksOf(m)) : html`<p>(a file)</p>`}
        </div>`,
    ),
  };
}

/** The shared frame of every email: the content, its button, and a notification's unsubscribe line. */
function layout(body: Body): RenderedEmail {
  const subject = oneLine(body.subject);
  const actionUrl = webLink(body.action?.url);
  const action = body.action && actionUrl ? { label: body.action.label, url: actionUrl } : undefined;
  const unsubscribeUrl = webLink(body.unsubscribeUrl);
  const text = [...body.text];
  if (action) text.push(`${action.label}: ${action.url}`);
  if (unsubscribeUrl) text.push(`To stop these emails: ${unsubscribeUrl}`);
  const page = html`<!doctype html>
    <html>
      <head>
        <meta charset="utf-8" />
        <title>${subject}</title>
      </head>
      <body style="font-family: sans-serif; line-height: 1.5; color: #1f2328">
        ${body.html} ${action ? html`<p><a href="${action.url}">${action.label}</a></p>` : ''}
        ${unsubscribeUrl ? html`<p style="font-size: 12px; color: #57606a"><a href="${unsubscribeUrl}">Unsubscribe</a> from these emails.</p>` : ''}
      </body>
    </html> `;
  return { subject, text: text.join('\n\n') + '\n', html: page.value, unsubscribeUrl };
}

/**
 * The templates by name (the mail log shows the name). `notification` is the frame of every email a
 * member or a visitor may stop: it carries List-Unsubscribe and its one-click POST.
 */
export const TEMPLATES = {
  /** The settings page's test email. */
  test: (v: Values): Body => ({
    subject: `Test email from ${v.siteName}`,
    text: [`This is a test email for the site ${v.siteName}, sent by ${v.requestedBy}.`, 'If you can read it, email from the chat service reaches you.'],
    html: html`${paragraphs([`This is a test email for the site ${v.siteName}, sent by ${v.requestedBy}.`, 'If you can read it, email from the chat service reaches you.'])}`,
  }),
  /** An invitation to a site: the link, as the owner also sees it once. */
  invitation: (v: Values): Body => {
    const lines = [
      `${v.invitedBy} invites you to join ${v.siteName} as ${v.role === 'owner' ? 'an owner' : 'an agent'} on the chat service.`,
      'The link works for seven days. If you did not expect it, ignore this email.',
    ];
    return {
      subject: `Join ${v.siteName} on the chat service`,
      text: lines,
      html: html`${paragraphs(lines)}`,
      action: { label: 'Accept the invitation', url: v.url },
    };
  },
  /** Forgot password: the single-use link (one hour). Not a notification: it cannot be unsubscribed from. */
  password_reset: (v: Values): Body => ({
    subject: 'Set a new password',
    text: [
      'Someone (we hope you) asked to set a new password for your chat service account.',
      'The link works once, for one hour. If it was not you, ignore this email: your password stays as it is.',
    ],
    html: html`${paragraphs([
      'Someone (we hope you) asked to set a new password for your chat service account.',
      'The link works once, for one hour. If it was not you, ignore this email: your password stays as it is.',
    ])}`,
    action: { label: 'Set a new password', url: v.url },
  }),
  /** The link that proves the account's own address (an account made by an invitation or the setup link, or asked again). */
  email_verification: (v: Values): Body => {
    const lines = [
      'Confirm that this address is yours, so that the chat service can use it for your account.',
      'The link works once, for 24 hours. If you did not make an account, ignore this email.',
    ];
    return { subject: 'Confirm your email address', text: lines, html: html`${paragraphs(lines)}`, action: { label: 'Confirm this address', url: v.url } };
  },
  /** A change of email: the link to the new address; nothing changes until it is used. */
  email_change: (v: Values): Body => {
    const lines = [
      'Someone (we hope you) asked to make this the email of a chat service account.',
      'The link makes the change; it works once, for 24 hours. If it was not you, ignore this email: nothing changes.',
    ];
    return {
      subject: 'Confirm your new email address',
      text: lines,
      html: html`${paragraphs(lines)}`,
      action: { label: 'Confirm the new address', url: v.url },
    };
  },
  /** The old address is told of a change asked for, with no link (a link here could take the account). */
  email_change_notice: (v: Values): Body => {
    const lines = [
      `The email of your chat service account is being changed to ${v.newEmail}. It changes when that address confirms it.`,
      'If it was not you, sign in, change your password and end your other sessions: whoever asked knows your password.',
    ];
    return { subject: 'Your email is being changed', text: lines, html: html`${paragraphs(lines)}` };
  },
  /**
   * Something happened that the recipient chose to hear of: a headline, lines of text (a visitor's
   * or a member's words among them), a link to it, and the one-click unsubscribe.
   */
  notification: (v: Values): Body => {
    const lines = (v.body ?? '').split(/\n/).filter((l) => l.trim() !== '');
    const after = (v.footer ?? '').split(/\n/).filter((l) => l.trim() !== '');
    const quoted = quotedMessages(v.messages);
    return {
      subject: v.subject,
      text: [...lines, ...quoted.text, ...after],
      html: html`${paragraphs(lines)}${quoted.html}${paragraphs(after)}`,
      action: v.url ? { label: v.actionLabel || 'Open', url: v.url } : undefined,
      unsubscribeUrl: v.unsubscribeUrl,
    };
  },
} satisfies Record<string, (v: Values) => Body>;

export type TemplateName = keyof typeof TEMPLATES;

export function isTemplateName(name: string): name is TemplateName {
  return Object.prototype.hasOwnProperty.call(TEMPLATES, name);
}

/** The email a template makes of its values. */
export function renderEmail(template: TemplateName, values: Values): RenderedEmail {
  return layout(TEMPLATES[template](values));
}
