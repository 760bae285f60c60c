import type { PageProps } from '../types';
import { Placeholder } from '../components/Placeholder';

export const InboxPage = (_props: PageProps) => <Placeholder what="The inbox" />;
