import type { Me, MySite } from './api';

/** What every site page is given (pages.ts routes to them). */
export interface PageProps {
  /** The site the page is about, with the signed-in account's role on it (`site.role`). */
  site: MySite;
  /** The signed-in account and all its sites. */
  me: Me;
}
