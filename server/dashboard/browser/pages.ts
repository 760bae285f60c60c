/**
 * The route table of a site's pages: `/dashboard/sites/<siteId>/<path>` opens `component`. Each
 * page is a file of its own in pages/, so a page is replaced without touching the router. `owners`
 * pages are listed in the navigation of owners only; an agent who opens one by its address sees an
 * "owners only" message instead (and the API would refuse its calls anyway).
 */
import type { FunctionComponent } from 'preact';
import type { PageProps } from './types';
import { InboxPage } from './pages/inbox';
import { KeysPage } from './pages/keys';
import { EventsPage } from './pages/events';
import { SettingsPage } from './pages/settings';
import { TeamPage } from './pages/team';
import { TimelinePage } from './pages/timeline';

export interface SitePage {
  path: string;
  /** The navigation's label and the page's title. */
  title: string;
  owners: boolean;
  /** false: opened by links only (the timeline, from the inbox), not listed in the navigation. */
  nav?: false;
  component: FunctionComponent<PageProps>;
}

export const SITE_PAGES: SitePage[] = [
  { path: 'inbox', title: 'Inbox', owners: false, component: InboxPage },
  { path: 'keys', title: 'Keys', owners: true, component: KeysPage },
  { path: 'events', title: 'Events', owners: true, component: EventsPage },
  { path: 'settings', title: 'Settings', owners: true, component: SettingsPage },
  { path: 'team', title: 'Team', owners: true, component: TeamPage },
  { path: 'timeline', title: 'Timeline', owners: false, component: TimelinePage, nav: false },
];
