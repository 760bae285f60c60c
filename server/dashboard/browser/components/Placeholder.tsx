import { EmptyState } from './EmptyState';

/** A page that is not built yet: its file in pages/ is replaced by the real page. */
export const Placeholder = ({ what }: { what: string }) => <EmptyState title="Not built yet">{what} will be here.</EmptyState>;
