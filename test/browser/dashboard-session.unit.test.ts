/**
 * The dashboard's judge of a 401 (server/dashboard/browser/session.ts), with two tabs of one browser:
 * each tab is its own copy of the module (jest.isolateModules), they talk over an in-memory
 * BroadcastChannel, and `GET /session` (the probe) is a stub per tab. The browser tests
 * (dashboard-session-changes, dashboard-session) drive the same code through real races; this tier
 * reaches the paths a real browser cannot be made to take on demand: a sign-in in another tab whose
 * message comes late, another account signing in, a dialog closed while another tab asks.
 */

type Session = typeof import('../../server/dashboard/browser/session');
type Client = typeof import('../../server/dashboard/browser/client');

/** A BroadcastChannel of one process: a message reaches every other open channel of the name, after the sender's turn. */
class MemoryChannel {
  static open = new Set<MemoryChannel>();
  onmessage: ((m: MessageEvent) => void) | null = null;
  constructor(readonly name: string) {
    MemoryChannel.open.add(this);
  }
  postMessage(data: unknown) {
    for (const other of MemoryChannel.open) if (other !== this && other.name === this.name) queueMicrotask(() => other.onmessage?.({ data } as MessageEvent));
  }
  close() {
    MemoryChannel.open.delete(this);
  }
}

interface Tab {
  session: Session;
  /** What the probe answers: the account the cookie opens, or null. */
  cookieOpens: { account: string | null };
  probes: number;
  asking: boolean[];
  followed: string[];
  signedOutElsewhere: number;
}

function openTab(account: string | null): Tab {
  const tab = { cookieOpens: { account }, probes: 0, asking: [], followed: [], signedOutElsewhere: 0 } as unknown as Tab;
  jest.isolateModules(() => {
    const { client } = jest.requireActual<Client>('../../server/dashboard/browser/client');
    jest.spyOn(client, 'GET').mockImplementation((async () => {
      tab.probes++;
      const id = tab.cookieOpens.account;
      return { data: { data: id ? { account: { id } } : null }, response: new Response() };
    }) as never);
    tab.session = jest.requireActual<Session>('../../server/dashboard/browser/session');
  });
  tab.session.registerSessionView({
    asking: (open) => tab.asking.push(open),
    signedInElsewhere: (id) => tab.followed.push(id),
    signedOutElsewhere: () => tab.signedOutElsewhere++,
  });
  tab.session.sessionKnown(account);
  return tab;
}

/** Lets the tabs' messages and the stubs' answers arrive: they are all microtasks, done before the next macrotask. */
const settle = () => new Promise((r) => setImmediate(r));
const URL_ = 'https://service.example/manage/v1/me';

beforeEach(() => {
  MemoryChannel.open.clear();
  (globalThis as { BroadcastChannel?: unknown }).BroadcastChannel = MemoryChannel;
});

test('a tab that shows no account: a 401 fails quietly, nothing is asked', async () => {
  const tab = openTab(null);
  expect(await tab.session.afterUnauthorized(tab.session.currentGeneration(), URL_)).toBe('signed-out');
  expect(tab.asking).toEqual([]);
  expect(tab.probes).toBe(0);
});

test('a 401 to a call sent before a sign-in is sent again at once, without asking the server or the person', async () => {
  const tab = openTab('usr_a');
  const sentAt = tab.session.currentGeneration();
  tab.session.signedIn('usr_a');
  expect(await tab.session.afterUnauthorized(sentAt, URL_)).toBe('sent-again');
  expect(tab.probes).toBe(0);
  expect(tab.asking).toEqual([false]);
});

test('the session ended: the server is asked, one dialog for every call, the other tab asks too; a sign-in sends them again and closes both', async () => {
  const a = openTab('usr_a');
  const b = openTab('usr_a');
  a.cookieOpens.account = b.cookieOpens.account = null;
  const sentAt = a.session.currentGeneration();
  const calls = [a.session.afterUnauthorized(sentAt, URL_), a.session.afterUnauthorized(sentAt, URL_)];
  await settle();
  expect(a.probes).toBe(1);
  expect(a.asking).toEqual([true]);
  // The other tab heard of it, checked with the server itself, and asks.
  expect(b.probes).toBe(1);
  expect(b.asking).toEqual([true]);

  a.cookieOpens.account = b.cookieOpens.account = 'usr_a';
  a.session.signedIn('usr_a');
  expect(await Promise.all(calls)).toEqual(['sent-again', 'sent-again']);
  await settle();
  expect(a.asking).toEqual([true, false]);
  expect(b.asking).toEqual([true, false]);
  expect(b.followed).toEqual(['usr_a']);
});

test('a sign-in in another tab whose message has not come: the server shows the session, the call is sent again, no dialog', async () => {
  const tab = openTab('usr_a'); // its cookie opens usr_a's session again: another tab signed in
  expect(await tab.session.afterUnauthorized(tab.session.currentGeneration(), URL_)).toBe('found-session');
  expect(tab.probes).toBe(1);
  expect(tab.asking).not.toContain(true);
  expect(tab.followed).toEqual(['usr_a']);
});

test('another account signed in since a call was sent: it is never sent again as that account', async () => {
  const a = openTab('usr_a');
  const b = openTab('usr_a');
  const before = a.session.currentGeneration();
  // Waiting on a's dialog when another account signs in in b.
  a.cookieOpens.account = null;
  const waiting = a.session.afterUnauthorized(before, URL_);
  await settle();
  expect(a.asking).toEqual([true]);
  b.session.signedIn('usr_b');
  expect(await waiting).toBe('switched');
  expect(await a.session.afterUnauthorized(before, URL_)).toBe('switched');
  expect(a.followed).toEqual(['usr_b']); // the app starts over
  // A call sent after the switch is judged as usual (here: the cookie opens usr_b's session).
  a.cookieOpens.account = 'usr_b';
  expect(await a.session.afterUnauthorized(a.session.currentGeneration(), URL_)).toBe('found-session');
});

test('closing the dialog fails the calls; another tab’s notice of the same ended session does not reopen it, the tab’s own next 401 does', async () => {
  const a = openTab('usr_a');
  const b = openTab('usr_a');
  a.cookieOpens.account = b.cookieOpens.account = null;
  const waiting = a.session.afterUnauthorized(a.session.currentGeneration(), URL_);
  await settle();
  expect(b.asking).toEqual([true]);
  b.session.gaveUp();
  await settle();
  expect(b.asking).toEqual([true, false]);
  expect(a.asking).toEqual([true]); // closing one tab's dialog leaves the other's

  // a's notice again (as when a meets the ended session once more): b stays as its person left it.
  const again = a.session.afterUnauthorized(a.session.currentGeneration(), URL_);
  await settle();
  expect(b.asking).toEqual([true, false]);
  // b's own call meets it: b asks again.
  const own = b.session.afterUnauthorized(b.session.currentGeneration(), URL_);
  await settle();
  expect(b.asking).toEqual([true, false, true]);
  b.session.gaveUp();
  expect(await own).toBe('gave-up');
  a.session.gaveUp();
  expect(await Promise.all([waiting, again])).toEqual(['gave-up', 'gave-up']);
});

test('a sign-out in one tab: every tab shows the sign-in page, and the calls of every tab fail quietly, waiting ones included', async () => {
  const a = openTab('usr_a');
  const b = openTab('usr_a');
  b.cookieOpens.account = null;
  const waiting = b.session.afterUnauthorized(b.session.currentGeneration(), URL_);
  await settle();
  expect(b.asking).toEqual([true]);
  const sentAt = a.session.currentGeneration();
  a.session.signingOut();
  expect(await a.session.afterUnauthorized(sentAt, URL_)).toBe('signed-out');
  expect(await waiting).toBe('signed-out');
  expect(b.signedOutElsewhere).toBe(1);
  expect(b.asking).toEqual([true, false]);
  expect(await b.session.afterUnauthorized(b.session.currentGeneration(), URL_)).toBe('signed-out');
  expect(a.asking).not.toContain(true);
});
