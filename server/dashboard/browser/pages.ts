/**
 * The route table of a site's pages: `/dashboard/sites/<siteId>/<path>` opens `component`. Each
 * page is a file of its own in pages/, so a page is replaced without touching the router. `owners`
 * pages are listed in the navigation of owners only; an agent who opens one by its address sees an
 * "owners only" message instead (and the API would refuse its calls anyway). Each page is a module
 * of its own, loaded on first visit (lazy.tsx); the inbox's comes with the first load
 * (scripts/build-dashboard.ts preloads it), since `/` leads there.
 */
import type { FunctionComponent } from 'preact';
import type { PageProps } from './types';
import { lazyPage } from './lazy';

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
  { path: 'inbox', title: 'Inbox', owners: false, component: lazyPage(() => import('./pages/inbox').then((m) => m.InboxPage)) },
  { path: 'keys', title: 'Keys', owners: true, component: lazyPage(() => import('./pages/keys').then((m) => m.KeysPage)) },
  { path: 'events', title: 'Events', owners: true, component: lazyPage(() => import('./pages/events').then((m) => m.EventsPage)) },
  { path: 'settings', title: 'Settings', owners: true, component: lazyPage(() => import('./pages/settings').then((m) => m.SettingsPage)) },
  { path: 'team', title: 'Team', owners: true, component: lazyPage(() => import('./pages/team').then((m) => m.TeamPage)) },
  { path: 'timeline', title: 'Timeline', owners: false, component: lazyPage(() => import('./pages/timeline').then((m) => m.TimelinePage)), nav: false },
];
