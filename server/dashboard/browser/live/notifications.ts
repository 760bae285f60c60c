/**
 * What tells a member about new visitor messages while they look elsewhere (the interface in
 * _notes/DASHBOARD.md): the unread count before the tab's title, a short beep (WebAudio: the
 * policy has no media-src, and browsers let a page make sound only after a click), and a desktop
 * notification while the tab is hidden. A catch-up after a reconnect never beeps nor pops up one
 * notification per message: at most one summary.
 */
import { h } from 'preact';
import { useState } from 'preact/hooks';
import { speaksForStreams } from './hub';

const SOUND_KEY = 'dashboard.notify.sound';
const DESKTOP_KEY = 'dashboard.notify.desktop';
/** Replayed messages arriving this close together make one summary. */
const BACKLOG_SETTLE_MS = 1_000;
/** The same message announced twice this quickly (two callers) is announced once. */
const REPEAT_MS = 3_000;

// localStorage throws where storage is refused: the settings are then off, and stay so.
function stored(key: string): boolean {
  try {
    return localStorage.getItem(key) === 'on';
  } catch {
    return false;
  }
}
function store(key: string, on: boolean): void {
  try {
    localStorage.setItem(key, on ? 'on' : 'off');
  } catch {
    // not remembered; the choice holds for this page only
  }
}

// --- The title ------------------------------------------------------------------------------

let unread = 0;
let titleWatch: MutationObserver | undefined;
const PREFIX = /^\(\d+\+?\) /;

function applyTitle() {
  const base = document.title.replace(PREFIX, '');
  const want = unread > 0 ? `(${unread > 99 ? '99+' : unread}) ${base}` : base;
  if (document.title !== want) document.title = want;
}

/** The tab's title shows "(n) " before the page's title; 0 shows nothing. The page may change its title meanwhile. */
export function setUnreadTotal(n: number): void {
  unread = Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
  if (!titleWatch && typeof MutationObserver === 'function') {
    // The app sets the title at each navigation: put the count back in front of the new one.
    titleWatch = new MutationObserver(applyTitle);
    titleWatch.observe(document.head, { childList: true, subtree: true, characterData: true });
  }
  applyTitle();
}

// --- Sound ----------------------------------------------------------------------------------

let audio: AudioContext | undefined;

/** The audio context, made or resumed inside a click (the only moment a browser lets it start). */
function unlockAudio(): AudioContext | undefined {
  const Ctor = window.AudioContext ?? (window as unknown as { webkitAudioContext?: typeof AudioContext }).webkitAudioContext;
  if (!Ctor) return undefined;
  try {
    audio ??= new Ctor();
    if (audio.state === 'suspended') void audio.resume().catch(() => undefined);
  } catch {
    return undefined;
  }
  return audio;
}

// With the sound on from an earlier visit, the page's first click or key press unlocks it again.
if (typeof window !== 'undefined' && stored(SOUND_KEY)) {
  const once = () => {
    removeEventListener('pointerdown', once, true);
    removeEventListener('keydown', once, true);
    unlockAudio();
  };
  addEventListener('pointerdown', once, true);
  addEventListener('keydown', once, true);
}

function beep(): void {
  if (!stored(SOUND_KEY) || !audio || audio.state !== 'running') return;
  const t = audio.currentTime;
  const osc = audio.createOscillator();
  const gain = audio.createGain();
  osc.type = 'sine';
  osc.frequency.setValueAtTime(880, t);
  osc.frequency.setValueAtTime(660, t + 0.12);
  gain.gain.setValueAtTime(0.0001, t);
  gain.gain.exponentialRampToValueAtTime(0.2, t + 0.02);
  gain.gain.exponentialRampToValueAtTime(0.0001, t + 0.3);
  osc.connect(gain).connect(audio.destination);
  osc.start(t);
  osc.stop(t + 0.32);
}

// --- Desktop notifications ------------------------------------------------------------------

const desktopSupported = () => typeof Notification === 'function';
const desktopOn = () => desktopSupported() && Notification.permission === 'granted' && stored(DESKTOP_KEY);

function popUp(title: string, body: string, tag: string): void {
  if (!desktopOn() || document.visibilityState !== 'hidden') return;
  try {
    const n = new Notification(title, { body, tag });
    n.onclick = () => {
      window.focus();
      n.close();
    };
  } catch {
    // Some browsers (Chrome on Android) allow notifications only from a service worker.
  }
}

const recent = new Map<string, number>();
let backlog = 0;
let backlogTimer: ReturnType<typeof setTimeout> | undefined;

function flushBacklog() {
  const count = backlog;
  backlog = 0;
  if (count) popUp(count === 1 ? '1 new message' : `${count} new messages`, 'Sent while this dashboard was offline.', 'dashboard-catch-up');
}

/**
 * A new visitor message: a beep (when the member turned sound on) and, while the tab is hidden, a
 * desktop notification (one per conversation at a time: the tag replaces it). Replayed messages
 * (a catch-up) make at most one silent summary once they stop coming.
 */
export function announce(n: { conversationId: string; title: string; body: string; replayed: boolean }): void {
  // Another tab reads the stream and speaks for this browser.
  if (!speaksForStreams()) return;
  const now = Date.now();
  // Two callers may shorten or trim the same message differently: the start of it identifies it.
  const key = `${n.conversationId}\n${n.body.trim().slice(0, 100)}`;
  if ((recent.get(key) ?? 0) > now - REPEAT_MS) return;
  recent.set(key, now);
  for (const [k, at] of recent) if (at <= now - REPEAT_MS) recent.delete(k);

  if (n.replayed) {
    backlog++;
    clearTimeout(backlogTimer);
    backlogTimer = setTimeout(flushBacklog, BACKLOG_SETTLE_MS);
    return;
  }
  beep();
  popUp(n.title, n.body.length > 140 ? `${n.body.slice(0, 139)}…` : n.body, n.conversationId);
}

// --- The settings ---------------------------------------------------------------------------

/** Sound on/off and desktop notifications on/off; each switched on by a click, as browsers require. */
export function NotificationSettings() {
  const [sound, setSound] = useState(stored(SOUND_KEY));
  const [desktop, setDesktop] = useState(desktopOn());
  const [note, setNote] = useState('');

  const toggleSound = (on: boolean) => {
    store(SOUND_KEY, on);
    setSound(on);
    if (on && unlockAudio()) beep(); // this click unlocks the sound; the beep is what it will sound like
  };

  const toggleDesktop = async (on: boolean) => {
    setNote('');
    if (!on) {
      store(DESKTOP_KEY, false);
      return setDesktop(false);
    }
    let permission = Notification.permission;
    if (permission === 'default') permission = await Notification.requestPermission();
    if (permission !== 'granted') {
      setDesktop(false);
      return setNote('This browser blocks notifications from the dashboard: allow them in the site settings of the browser, then try again.');
    }
    store(DESKTOP_KEY, true);
    setDesktop(true);
  };

  return h(
    'fieldset',
    { class: 'notification-settings' },
    h('legend', null, 'Notifications of new visitor messages'),
    h(
      'label',
      null,
      h('input', { type: 'checkbox', checked: sound, onChange: (e: Event) => toggleSound((e.currentTarget as HTMLInputElement).checked) }),
      ' Play a sound',
    ),
    h(
      'label',
      null,
      h('input', {
        type: 'checkbox',
        checked: desktop,
        disabled: !desktopSupported(),
        onChange: (e: Event) => void toggleDesktop((e.currentTarget as HTMLInputElement).checked),
      }),
      desktopSupported() ? ' Desktop notifications while this tab is hidden' : ' Desktop notifications (this browser has none)',
    ),
    note && h('p', { class: 'notification-note', role: 'alert' }, note),
  );
}
