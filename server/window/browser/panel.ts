/**
 * The chat window's panel: the document inside the loader's iframe, served by the chat service
 * (its own origin, CSP without inline anything, `frame-ancestors` limited to the site's allowed
 * origins). It gets window tokens from the gateway (panel/tokens.ts), shows the visitor's
 * conversation (panel/session.ts, panel/view.ts), sends text and files (panel/composer.ts), and
 * follows live updates (live-connection.ts). Its state is one object (panel/state.ts), made here
 * and handed to each part.
 */
import { createPanel } from './panel/state';
import { createStorage } from './panel/storage';
import { createTokenClient } from './panel/tokens';
import { createSessions } from './panel/session';
import { wireComposer } from './panel/composer';
import { listenToHost } from './panel/host';
import { setStatus } from './panel/view';
import { createContextReporter } from './panel/context';
import { toParent } from './panel/host';
import { wireLiveSignals } from './panel/live-signals';
import { wireAway } from './panel/away';

const panel = createPanel(document, createStorage());
const tokens = createTokenClient(panel, {
  visitorChanged: () => void sessions.start(true),
  refusedForGood: () => sessions.end(),
});
const sessions = createSessions(panel, tokens);
wireComposer(panel, tokens);
// The visitor's context: reported while the conversation is open (panel/context.ts).
const context = createContextReporter(panel, tokens, (msg) => toParent(panel, msg));
panel.conversationWatchers.add(context.conversation);
// Typing both ways and "seen" (panel/live-signals.ts).
const signals = wireLiveSignals(panel, tokens);
listenToHost(panel, sessions, context, signals);
// When no one can answer now: when they will, and the email form (panel/away.ts).
wireAway(panel, tokens);

if (window.parent === window) {
  setStatus(panel, 'This is the chat window of a website: open it from the site.');
  panel.dom.form.hidden = true;
}

export {};
