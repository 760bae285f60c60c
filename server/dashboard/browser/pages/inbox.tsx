/** The inbox page: its parts are in ../inbox/ (InboxPage.tsx and what it uses). */
export { InboxPage } from '../inbox/InboxPage';
