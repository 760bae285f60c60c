/**
 * The app shell: who is signed in (GET /session, then GET /me), the sign-in and invitation pages,
 * and for a signed-in account the header (site picker, navigation by role, connection state,
 * sign-out) around the page the route table (pages.ts) names. It also shows the "Your session
 * ended" dialog while session.ts asks for it: over the page, which stays mounted (so what was typed
 * stays), and the calls that met the ended session are sent again after sign-in. It tells
 * session.ts of this tab's sign-ins and sign-outs, and follows the other tabs' (session.ts relays them).
 */
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiFailure, call, client, type Me, type MySite } from './api';
import { gaveUp, registerSessionView, sessionKnown, signedIn, signingOut } from './session';
import { matchSitePath, navigate, usePath } from './router';
import { SITE_PAGES } from './pages';
import { LiveStatus } from './live/status';
import { SignInForm, SignInPage } from './pages/sign-in';
import { lazyPage } from './lazy';
import { Button } from './components/Button';
import { Dialog } from './components/Dialog';
import { EmptyState } from './components/EmptyState';
import { ErrorBanner } from './components/ErrorBanner';
import { Link } from './components/Link';
import { ReauthHost } from './components/ReauthDialog';

// Pages few accounts open, and rarely: loaded on first visit.
const AcceptInvitationPage = lazyPage(() => import('./pages/accept-invitation').then((m) => m.AcceptInvitationPage));
const SetupPage = lazyPage(() => import('./pages/setup').then((m) => m.SetupPage));
const ForgotPasswordPage = lazyPage(() => import('./pages/forgot-password').then((m) => m.ForgotPasswordPage));
const ResetPasswordPage = lazyPage(() => import('./pages/forgot-password').then((m) => m.ResetPasswordPage));
const VerifyEmailPage = lazyPage(() => import('./pages/verify-email').then((m) => m.VerifyEmailPage));
const AccountPage = lazyPage(() => import('./pages/account').then((m) => m.AccountPage));
const NewSitePage = lazyPage(() => import('./pages/new-site').then((m) => m.NewSitePage));

type Session = { kind: 'loading' } | { kind: 'signed-out' } | { kind: 'signed-in'; me: Me } | { kind: 'failed'; error: unknown };

/** The signed-in account, or null: GET /session answers 200 signed in or not, so a signed-out load logs no failed request. */
async function loadMe(): Promise<Me | null> {
  const current = await call(() => client.GET('/session'), { signIn: false });
  return current ? await call(() => client.GET('/me'), { signIn: false }) : null;
}

export function App() {
  const path = usePath();
  const [session, setSession] = useState<Session>({ kind: 'loading' });
  const [asking, setAsking] = useState(false);

  /** Loads who is signed in; `signedInHere`: this tab just signed in, which session.ts tells every tab. */
  const refresh = async (signedInHere = false) => {
    try {
      const me = await loadMe();
      if (me && signedInHere) signedIn(me.account.id);
      else sessionKnown(me?.account.id ?? null);
      setSession(me ? { kind: 'signed-in', me } : { kind: 'signed-out' });
    } catch (err) {
      setSession(err instanceof ApiFailure && err.status === 401 ? { kind: 'signed-out' } : { kind: 'failed', error: err });
    }
  };

  /** Signed in as `accountId` (in this tab's dialog, or in another tab): another account starts over, nothing on the page belongs to it. */
  const follow = (accountId: string) => {
    const me = session.kind === 'signed-in' ? session.me : null;
    if (me && accountId !== me.account.id) return location.assign('/dashboard/');
    void refresh();
  };
  // session.ts's view is registered once; what it calls must see this render's session.
  const latestFollow = useRef(follow);
  latestFollow.current = follow;

  useEffect(() => {
    registerSessionView({
      asking: setAsking,
      signedInElsewhere: (accountId) => latestFollow.current(accountId),
      // Stays at its address: signing in again there opens the same page.
      signedOutElsewhere: () => setSession({ kind: 'signed-out' }),
    });
    void refresh();
  }, []);

  const signOut = async () => {
    // Before the request: an answer on its way meets the 401 after this, and must not ask to sign in.
    signingOut();
    try {
      await call(() => client.DELETE('/session'), { signIn: false });
    } catch {
      // Signed out already, or the service is unreachable: the page forgets the account either way.
    }
    setSession({ kind: 'signed-out' });
    navigate('/', true);
  };

  const joined = () => refresh(true);
  let content;
  if (session.kind === 'loading') content = <p class="loading">Loading…</p>;
  else if (session.kind === 'failed')
    content = (
      <main id="main" class="narrow">
        <h1>The dashboard could not start</h1>
        <ErrorBanner error={session.error} />
        <Button onClick={() => void refresh()}>Try again</Button>
      </main>
    );
  else if (path === '/accept-invitation') content = <AcceptInvitationPage me={session.kind === 'signed-in' ? session.me : null} onJoined={joined} />;
  else if (path === '/setup') content = <SetupPage onDone={joined} />;
  else if (path === '/forgot-password') content = <ForgotPasswordPage />;
  else if (path === '/reset-password') content = <ResetPasswordPage onSignedIn={joined} />;
  else if (path === '/verify-email') content = <VerifyEmailPage onDone={() => refresh()} />;
  else if (session.kind === 'signed-out') content = <SignInPage onSignedIn={joined} />;
  else content = <SignedInShell me={session.me} path={path} onSignOut={signOut} onSitesChanged={() => refresh()} />;

  return (
    <>
      {content}
      <ReauthHost />
      {asking && (
        <Dialog title="Your session ended" onClose={gaveUp}>
          <p>Sign in again to continue. The page stays as it is, and what you were doing is sent once you are signed in.</p>
          <SignInForm
            email={session.kind === 'signed-in' ? session.me.account.email : ''}
            onSignedIn={(s) => {
              signedIn(s.account.id);
              follow(s.account.id);
            }}
          />
        </Dialog>
      )}
    </>
  );
}

function SignedInShell({ me, path, onSignOut, onSitesChanged }: { me: Me; path: string; onSignOut: () => Promise<void>; onSitesChanged: () => Promise<void> }) {
  const match = matchSitePath(path);
  const site = match && me.sites.find((s) => s.id === match.siteId);
  const first = me.sites[0];

  // `/` and a site without a page open the inbox of the first (or that) site.
  useEffect(() => {
    if ((path === '/' || path === '/sign-in') && first) navigate(`/sites/${first.id}/inbox`, true);
    else if (site && match?.page === '') navigate(`/sites/${site.id}/inbox`, true);
  }, [path, first?.id, site?.id]);

  const route = site && SITE_PAGES.find((p) => p.path === match.page);
  // The account page belongs to the person, not to a site; so does making a new site.
  const account = path === '/account';
  const newSite = path === '/new-site';
  const title = account ? 'Account' : newSite ? 'New site' : (route?.title ?? (path === '/' ? 'Dashboard' : 'Not found'));
  const heading = useRef<HTMLHeadingElement>(null);
  const firstRender = useRef(true);
  // A layout effect: the heading takes the focus in the same task that shows it, so nothing (a key
  // pressed, a screen reader's read-out) sees the new page with the focus still on the old link.
  useLayoutEffect(() => {
    document.title = site ? `${title} · ${site.name} · Dashboard` : `${title} · Dashboard`;
    // After a navigation, focus goes to the new page's heading, so a screen reader announces it.
    if (!firstRender.current) heading.current?.focus();
    firstRender.current = false;
  }, [path]);

  let page;
  // A new site's owner lands on its settings, shown once the account's sites are read again (the
  // address first: at `/` with a site, the shell would go to the first site's inbox).
  const created = async (siteId: string) => {
    navigate(`/sites/${siteId}/settings`);
    await onSitesChanged();
  };
  if (account) page = <AccountPage me={me} />;
  else if (newSite || !me.sites.length) page = <NewSitePage first={!me.sites.length} onCreated={created} />;
  else if (!site || !route) page = <EmptyState title="There is no such page, or it is on a site you are not a member of." />;
  else if (route.owners && site.role !== 'owner')
    page = (
      <div class="banner banner-info" role="note">
        <p>
          <strong>Owners only.</strong> {route.title} is for the site's owners; your role on {site.name} is {site.role}.
        </p>
      </div>
    );
  else page = <route.component key={site.id} site={site} me={me} />;

  return (
    <div class="app">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link class="brand" to="/">
          Dashboard
        </Link>
        {me.sites.length > 0 && <SitePicker sites={me.sites} current={site} page={match?.page ?? 'inbox'} />}
        {me.sites.length > 0 && (
          <Link to="/new-site" aria-current={newSite ? 'page' : undefined}>
            New site
          </Link>
        )}
        <LiveStatus siteId={site?.id} />
        <span class="account">
          {/* Swagger UI is on the service's origin, outside the dashboard's router: a plain link. */}
          <a href="/docs/">API docs</a>
          <span class="account-email">{me.account.email}</span>
          <Link to="/account" aria-current={account ? 'page' : undefined}>
            Account
          </Link>
          <Button onClick={onSignOut}>Sign out</Button>
        </span>
      </header>
      {site && (
        <nav class="sitenav" aria-label="Site pages">
          <ul>
            {SITE_PAGES.filter((p) => p.nav !== false && (!p.owners || site.role === 'owner')).map((p) => (
              <li key={p.path}>
                <Link to={`/sites/${site.id}/${p.path}`} aria-current={p === route ? 'page' : undefined}>
                  {p.title}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
      )}
      <main id="main">
        <h1 ref={heading} tabIndex={-1}>
          {title}
        </h1>
        {page}
      </main>
    </div>
  );
}

/** Switches site, staying on the same page when the role there allows it. */
function SitePicker({ sites, current, page }: { sites: MySite[]; current: MySite | undefined; page: string }) {
  const choose = (id: string) => {
    const next = sites.find((s) => s.id === id)!;
    const route = SITE_PAGES.find((p) => p.path === page);
    navigate(`/sites/${id}/${route && (!route.owners || next.role === 'owner') ? page : 'inbox'}`);
  };
  return (
    <span class="site-picker">
      <label for="site-picker">Site</label>
      <select id="site-picker" value={current?.id ?? ''} onChange={(e) => choose(e.currentTarget.value)}>
        {!current && <option value="">Choose a site</option>}
        {sites.map((s) => (
          <option key={s.id} value={s.id}>
            {s.name} ({s.role})
          </option>
        ))}
      </select>
    </span>
  );
}
