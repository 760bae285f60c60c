/**
 * The away notice and its email form (docs/window.md, "Away"): the entry says whether someone can
 * answer now (`/availability`: the site's hours and whether a member has the inbox open, both the
 * server's to know); when not, the panel says when the hours open again, in the visitor's own
 * locale and time zone, shows the site's away message as text, and offers to email the replies.
 */
import type { components } from '../../generated/api';
import type { Panel } from './state';
import type { TokenClient } from './tokens';

type Availability = components['schemas']['Availability'];

/** How often an open panel asks again (an agent may open the inbox, the hours may open). */
const EVERY_MS = 60_000;

/** The headline of an away state: when the hours next open, formatted for the visitor. */
export function awayTitle(a: Availability, locale?: string): string {
  if (a.reason !== 'closed') return 'No one is online right now.';
  if (!a.nextOpenAt) return 'We are away at the moment.';
  const at = new Date(a.nextOpenAt).toLocaleString(locale, { weekday: 'long', hour: '2-digit', minute: '2-digit' });
  return `We are away. We are back ${at}.`;
}

export function wireAway(p: Panel, tokens: TokenClient, doc: Document = document) {
  const $ = <T extends HTMLElement>(id: string) => doc.getElementById(id) as T;
  const box = $<HTMLElement>('cw-away');
  const title = $<HTMLParagraphElement>('cw-away-title');
  const message = $<HTMLParagraphElement>('cw-away-message');
  const form = $<HTMLFormElement>('cw-away-form');
  const email = $<HTMLInputElement>('cw-away-email');
  const consent = $<HTMLInputElement>('cw-away-consent');
  const status = $<HTMLParagraphElement>('cw-away-status');

  function show(a: Availability) {
    box.hidden = a.state === 'online';
    if (box.hidden) return;
    title.textContent = awayTitle(a);
    message.textContent = a.awayMessage ?? '';
    form.hidden = a.replyEmails === 'subscribed';
    if (form.hidden) status.textContent = 'We will email you the replies you miss here.';
  }

  async function refresh() {
    if (!p.state.token) return;
    try {
      // With the token as it is, never a renewal: a look in the background must not start a
      // visitor over on its own (a revoked one starts over through the live connection, in every tab alike).
      const res = await fetch(`${p.base}/availability`, { headers: { Authorization: `Bearer ${p.state.token}` }, cache: 'no-store' });
      if (res.ok) show((await res.json()).data as Availability);
    } catch {
      // offline: the next look tells
    }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!email.checkValidity() || !consent.checked) {
      status.textContent = !email.checkValidity() ? 'Please enter a valid email address.' : 'Please tick the box to be emailed the replies.';
      return;
    }
    void (async () => {
      const res = await tokens.api('/reply-email', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: email.value.trim(), consent: true }),
      });
      if (res.ok) {
        form.hidden = true;
        status.textContent = 'Thank you: we will email you the replies you miss here.';
      } else
        status.textContent =
          ((await res.json().catch(() => null)) as { error?: { message?: string } } | null)?.error?.message ?? 'That did not work; try again.';
    })().catch(() => (status.textContent = 'That did not work; try again.'));
  });

  // The first look as soon as the panel has its token, then every minute.
  let looked = false;
  const tick = () => {
    if (!looked && p.state.token) looked = true;
    if (looked) void refresh();
  };
  const early = setInterval(() => {
    if (looked) clearInterval(early);
    else tick();
  }, 1000);
  setInterval(() => looked && void refresh(), EVERY_MS);
  return { refresh };
}
