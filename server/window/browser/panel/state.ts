/**
 * The panel's context: its document's elements, its storage and everything it changes while it
 * runs (`state`), made once by the entry (panel.ts) and handed to every module.
 */
import type { PanelStorage } from './storage';
import type { Conversation, Identity, Message } from './types';

export interface PanelDom {
  log: HTMLDivElement;
  status: HTMLParagraphElement;
  form: HTMLFormElement;
  input: HTMLTextAreaElement;
  fileInput: HTMLInputElement;
  attachButton: HTMLButtonElement;
  chosen: HTMLUListElement;
  closeButton: HTMLButtonElement;
}

export interface PanelState {
  /** The page that framed the panel, as the browser reported it with the loader's first message. */
  hostOrigin: string | null;
  identity: Identity | null;
  token: string | null;
  /** The visitor the current token names. */
  visitorId: string | null;
  /** The visitor whose history and live connection the window shows. */
  sessionVisitor: string | null;
  credential: string | null;
  /** Nothing is stored before the visitor sends something. */
  interacted: boolean;
  conversation: Conversation | null;
  refreshTimer: ReturnType<typeof setTimeout> | undefined;
  /** Aborted when the session shown ends: stops its live connection and its retries. */
  session: AbortController | null;
  /** The token request under way, shared by every caller. */
  renewing: Promise<void> | null;
  /** The bubbles shown, by message id. */
  shown: Map<string, HTMLElement>;
  closedNotice: HTMLElement | null;
  /** Files chosen for the next message. */
  files: File[];
}

export interface Panel {
  readonly siteId: string;
  /** The site's path on the window entry. */
  readonly base: string;
  /** Where an anonymous visitor's credential is kept. */
  readonly credentialKey: string;
  readonly dom: PanelDom;
  readonly storage: PanelStorage;
  readonly state: PanelState;
  /** Told whenever the conversation shown changes (another one, or its state): see setConversation. */
  readonly conversationWatchers: Set<(c: Conversation | null) => void>;
  /** Typing and "seen" (panel/live-signals.ts): told of a member typing, and of each reply shown. */
  readonly signals: { typing?(conversationId: string, typing: boolean): void; replyShown?(m: Message): void };
}

/** The one way the panel's conversation changes: its watchers (the context reports) hear of it. */
export function setConversation(p: Panel, c: Conversation | null) {
  const before = p.state.conversation;
  p.state.conversation = c;
  if (before?.id === c?.id && before?.state === c?.state) return;
  for (const watch of p.conversationWatchers) watch(c);
}

export function createPanel(doc: Document, storage: PanelStorage): Panel {
  const $ = <T extends HTMLElement>(id: string) => doc.getElementById(id) as T;
  const siteId = doc.documentElement.dataset.site ?? '';
  return {
    siteId,
    base: `/window/v1/sites/${siteId}`,
    credentialKey: `cw:${siteId}:visitor`,
    dom: {
      log: $('cw-log'),
      status: $('cw-status'),
      form: $('cw-form'),
      input: $('cw-input'),
      fileInput: $('cw-file'),
      attachButton: $('cw-attach'),
      chosen: $('cw-chosen'),
      closeButton: $('cw-close'),
    },
    storage,
    conversationWatchers: new Set(),
    signals: {},
    state: {
      hostOrigin: null,
      identity: null,
      token: null,
      visitorId: null,
      sessionVisitor: null,
      credential: null,
      interacted: false,
      conversation: null,
      refreshTimer: undefined,
      session: null,
      renewing: null,
      shown: new Map(),
      closedNotice: null,
      files: [],
    },
  };
}
