/**
 * Who is signed in, for every tab of this browser. The tabs share one session cookie, so a sign-in
 * or a sign-out in one is a sign-in or a sign-out in all: they tell each other over a
 * BroadcastChannel, and each follows (a sign-in closes every tab's "Your session ended" dialog and
 * shows a signed-out tab its page; a sign-out shows every tab the sign-in page, never the dialog).
 *
 * A 401 does not always mean the session ended: a call sent before a sign-out or a sign-in can be
 * answered after it (it reached the server in between, or carried the cookie of before). So every
 * call carries the generation it was sent in, bumped at each sign-in and sign-out this tab makes or
 * hears of, and `afterUnauthorized` judges its 401 by it:
 *  - this tab shows no account (signed out on purpose, here or in another tab): the call fails
 *    quietly, the page shows the sign-in page and no dialog;
 *  - a sign-in happened since the call was sent: it is sent again, no dialog;
 *  - otherwise `GET /session` (200 whether signed in or not) is asked first: a session there means
 *    another tab signed in and this one has not heard yet (sent again, no dialog); none means the
 *    session ended: one dialog for every call that meets it, told to the other tabs too, and the
 *    calls are sent again once signed in, here or in another tab.
 * app.tsx shows the dialog while `asking` says so and tells this module of the tab's sign-ins and
 * sign-outs; api.ts asks it about each 401; live/hub.ts hears of sign-ins to resume a parked stream.
 */
import { client } from './client';

/** What became of a call that met a 401. */
export type Verdict =
  /** This tab shows no account: the call fails, and nothing asks to sign in. */
  | 'signed-out'
  /** Signed in since it was sent (here, in another tab, or in the dialog it waited on): send it again. */
  | 'sent-again'
  /** The cookie opens a session, though this tab heard of no sign-in: send it again, once. */
  | 'found-session'
  /** Another account signed in since it was sent: never sent as that account; the app starts over. */
  | 'switched'
  /** The person closed the dialog: the call fails like the 401 it met. */
  | 'gave-up';

/** What the app does for this module (registered once by app.tsx). */
export interface SessionView {
  /** Shows or hides the "Your session ended" dialog. */
  asking(open: boolean): void;
  /** Signed in as `accountId` in another tab, or found signed in: the tab loads its account again (another account: starts over). */
  signedInElsewhere(accountId: string): void;
  /** Another tab signed out on purpose: this tab shows the sign-in page, at the same address. */
  signedOutElsewhere(): void;
}

type Wire = { type: 'signed-in'; accountId: string } | { type: 'signed-out' } | { type: 'ended' };

/** How an ended session was settled: the callers waiting on it judge their call again. */
type EpisodeEnd = 'signed-in' | 'signed-out' | 'found' | 'gave-up' | 'switched';

interface Episode {
  at: number;
  done: Promise<EpisodeEnd>;
  settle: (end: EpisodeEnd) => void;
}

let view: SessionView | undefined;
let channel: BroadcastChannel | undefined;
let generation = 0;
/** The account this tab shows; null: none (signed out, or not known yet), so a 401 asks nothing. */
let account: string | null = null;
/** The generation from which another account is signed in: calls sent before it are never sent again. */
let switchedAt = 0;
/** The ended session being asked about now (one dialog for every call that meets it). */
let episode: Episode | undefined;
/** The generation in which the person closed this tab's dialog: another tab's notice does not reopen it. */
let gaveUpAt = -1;
const signInListeners = new Set<() => void>();

/** Tests (and only they) read what became of each 401, through an object an init script sets. */
const hooks = () => (globalThis as { __dashboardSession?: { unauthorized?: { url: string; outcome: Verdict }[] } }).__dashboardSession;

/** The app's side (app.tsx, once). Opens the channel to the other tabs. */
export function registerSessionView(v: SessionView): void {
  view = v;
  if (channel || typeof BroadcastChannel !== 'function') return;
  channel = new BroadcastChannel('dashboard-session');
  channel.onmessage = (m: MessageEvent<Wire>) => heard(m.data);
}

/** The generation a call is sent in (api.ts reads it before each request). */
export const currentGeneration = (): number => generation;

/** Who this tab shows, as found at start or after loading the account again; nothing is told to other tabs. */
export function sessionKnown(accountId: string | null): void {
  account = accountId;
}

/** This tab signed in (the sign-in page, the dialog, setup, an invitation): the calls waiting go on, and every tab follows. */
export function signedIn(accountId: string): void {
  followSignIn('signed-in', accountId, true);
}

/** The person signs out in this tab: from now on a 401 is expected, and every tab shows the sign-in page. */
export function signingOut(): void {
  changed(null);
  end('signed-out');
  post({ type: 'signed-out' });
}

/** The person closed this tab's dialog: the calls waiting on it fail; another tab's notice of the same ended session does not reopen it. */
export function gaveUp(): void {
  gaveUpAt = generation;
  end('gave-up');
}

/**
 * Whether this tab's session is in doubt: it met an ended session and is asking (the dialog open or
 * its answer pending), or the person closed the dialog and the tab is parked. Fire-and-forget calls
 * (typing reports) are skipped meanwhile rather than meet the 401 and wait on the dialog.
 */
export const sessionInDoubt = (): boolean => episode !== undefined || gaveUpAt === generation;

/** Calls `listener` after every sign-in, in this tab or another (live/hub.ts resumes a parked stream). */
export function onSignedIn(listener: () => void): () => void {
  signInListeners.add(listener);
  return () => signInListeners.delete(listener);
}

/** What to do with a call sent in generation `sentAt` that met a 401 at `url` (api.ts's `send`). */
export async function afterUnauthorized(sentAt: number, url: string): Promise<Verdict> {
  const verdict = await judge(sentAt);
  hooks()?.unauthorized?.push({ url, outcome: verdict });
  return verdict;
}

async function judge(sentAt: number): Promise<Verdict> {
  for (;;) {
    if (account === null) return 'signed-out';
    if (sentAt < switchedAt) return 'switched';
    if (generation !== sentAt) return 'sent-again';
    const how = await ended(sentAt, true);
    if (how === 'gave-up') return 'gave-up';
    if (how === 'found') return 'found-session';
    // Signed in or out meanwhile (the generation moved on): the loop judges again by the new state.
  }
}

/**
 * The session seems to have ended in generation `at`: asks the server, then (none there) the
 * person. Everyone who meets it meanwhile shares the one episode. `tell`: this tab met the 401
 * itself, so the other tabs hear of it (they ask the server too before they open their dialog).
 */
function ended(at: number, tell: boolean): Promise<EpisodeEnd> {
  if (episode?.at === at) return episode.done;
  let settle!: (end: EpisodeEnd) => void;
  const done = new Promise<EpisodeEnd>((resolve) => (settle = resolve));
  const mine: Episode = { at, done, settle };
  episode = mine;
  void (async () => {
    const accountId = await sessionNow();
    if (episode !== mine) return; // settled meanwhile: a sign-in or a sign-out was heard
    if (accountId) return followSignIn('found', accountId, false);
    if (tell) post({ type: 'ended' });
    view?.asking(true);
  })();
  return done;
}

/** The account the cookie opens now; null: none; undefined: the service could not say (the dialog opens, as before a sure answer). */
async function sessionNow(): Promise<string | null | undefined> {
  try {
    const { data } = await client.GET('/session');
    return data ? (data.data?.account.id ?? null) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Someone signed in: here (`here`, told to the other tabs), in another tab, or found by asking the
 * server (`found`: another tab's message is late, or cannot come). The calls waiting go on.
 */
function followSignIn(how: 'signed-in' | 'found', accountId: string, here: boolean) {
  const switched = account !== null && account !== accountId;
  changed(accountId);
  if (switched) switchedAt = generation;
  gaveUpAt = -1;
  end(switched ? 'switched' : how);
  if (here) post({ type: 'signed-in', accountId });
  else view?.signedInElsewhere(accountId);
  for (const l of [...signInListeners]) l();
}

function changed(to: string | null) {
  generation++;
  account = to;
}

/** The ended session is settled: its dialog closes, and the calls waiting on it judge again. */
function end(how: EpisodeEnd) {
  const e = episode;
  episode = undefined;
  e?.settle(how);
  view?.asking(false);
}

function post(m: Wire) {
  channel?.postMessage(m);
}

/** Another tab's news. */
function heard(m: Wire) {
  if (m.type === 'signed-in') followSignIn('signed-in', m.accountId, false);
  else if (m.type === 'signed-out') {
    changed(null);
    end('signed-out');
    view?.signedOutElsewhere();
  } else if (m.type === 'ended') {
    // Asked about already, closed by the person, or nothing to ask about here.
    if (account === null || episode || gaveUpAt === generation) return;
    void ended(generation, false);
  }
}
