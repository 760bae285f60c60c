/**
 * The panel's reports of the visitor's context (docs/window.md, "What the window collects"): the
 * page the loader says the visitor is on, the browser's language and time zone, and what the page
 * says of its visitor (`ChatWindow.update`). Sent only while the visitor's conversation is open or
 * starting (the first message answered with it), at most once every few seconds, and not at all
 * when the site tracks no pages (asked once per panel; the page's query is stripped here, before
 * anything leaves the browser, unless the site keeps it). The user agent goes as the request's own
 * header. A lost report is not retried: the next page brings the context again.
 */
import type { components } from '../../generated/api';
import type { HostPage } from '../page-context';
import type { Panel } from './state';
import type { Conversation } from './types';
import type { TokenClient } from './tokens';
import { browserClock, createThrottle, type ThrottleClock } from './throttle';

type Settings = components['schemas']['ContextSettings'];
type Report = components['schemas']['ContextReport'];
export type VisitorDetails = components['schemas']['VisitorDetails'];

/** Reports of one panel are at least this far apart; the newest page waits for the next slot. */
export const REPORT_INTERVAL_MS = 3000;

/** The address as the site keeps it: never the fragment, the query only when kept; '' when not an http(s) page. */
export function strippedUrl(raw: string, keepQuery: boolean): string {
  try {
    const url = new URL(raw);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return '';
    url.hash = '';
    url.username = '';
    url.password = '';
    if (!keepQuery) url.search = '';
    return url.href;
  } catch {
    return '';
  }
}

const CONTROLS = /[\u0000-\u001f\u007f]/g;

/** The report of a page as the entry takes it (openapi/window.yaml, ContextReport); null when the page is no http(s) page. */
export function reportOf(page: HostPage, settings: Settings, env: { language?: string; timeZone?: string }): Report | null {
  const url = strippedUrl(page.url, settings.keepQuery);
  if (!url) return null;
  const report: Report = { page: { url } };
  const title = page.title.replace(CONTROLS, ' ').trim().slice(0, 300);
  if (title) report.page.title = title;
  const referrer = page.referrer && strippedUrl(page.referrer, settings.keepQuery);
  if (referrer) report.page.referrer = referrer;
  if (env.language && /^[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*$/.test(env.language) && env.language.length <= 64) report.language = env.language;
  if (env.timeZone && /^[A-Za-z0-9_+/-]{1,64}$/.test(env.timeZone)) report.timeZone = env.timeZone;
  return report;
}

function browserEnvironment() {
  let timeZone: string | undefined;
  try {
    timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch {
    // no Intl time zone: none reported
  }
  return { language: navigator.language, timeZone };
}

export function createContextReporter(p: Panel, tokens: TokenClient, tellHost: (msg: object) => void, clock: ThrottleClock = browserClock) {
  let page: HostPage | null = null;
  let details: VisitorDetails | null = null;
  let detailsSent = false;
  let settings: Settings | null = null;
  let open = false;
  const throttle = createThrottle(REPORT_INTERVAL_MS, clock);
  const json = (body: object): RequestInit => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

  const tell = () => tellHost({ type: 'active', active: open, tracking: settings?.pageTracking ?? true });

  async function currentSettings(): Promise<Settings | null> {
    if (!settings) {
      const res = await tokens.api('/context');
      if (!res.ok) return null;
      settings = (await res.json()).data as Settings;
      if (!settings.pageTracking) tell();
    }
    return settings;
  }

  async function sendPage() {
    if (!open || !page) return;
    try {
      const s = await currentSettings();
      const report = s?.pageTracking ? reportOf(page, s, browserEnvironment()) : null;
      if (!report) return;
      const res = await tokens.api('/context', json(report));
      if (!res.ok) return;
      const answer = (await res.json()).data as Settings;
      // The owner may have turned tracking off since: from now on this panel reports nothing.
      if (!answer.pageTracking) {
        settings = { pageTracking: false, keepQuery: answer.keepQuery };
        throttle.cancel();
        tell();
      }
    } catch {
      // offline or refused: the next page reports again
    }
  }

  async function sendDetails() {
    if (!open || !details || detailsSent) return;
    detailsSent = true;
    try {
      const res = await tokens.api('/visitor', json(details));
      if (!res.ok && res.status >= 500) detailsSent = false;
    } catch {
      detailsSent = false;
    }
  }

  return {
    /** The loader's news: the page the visitor is on now. */
    page(next: HostPage) {
      page = next;
      if (open && settings?.pageTracking !== false) throttle.request(() => void sendPage());
    },
    /** What the page says of its visitor (kept unverified), sent with the next open conversation. */
    details(next: VisitorDetails) {
      details = next;
      detailsSent = false;
      void sendDetails();
    },
    /** The conversation the window shows changed: reports run while it is open. */
    conversation(c: Conversation | null) {
      const now = c?.state === 'open';
      if (now === open) return;
      open = now;
      tell();
      if (open) {
        if (settings?.pageTracking !== false) throttle.request(() => void sendPage());
        void sendDetails();
      } else {
        throttle.cancel();
        detailsSent = false; // a next conversation (or visitor) is told again
      }
    },
  };
}

export type ContextReporter = ReturnType<typeof createContextReporter>;
