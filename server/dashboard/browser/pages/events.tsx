import type { PageProps } from '../types';
import { Placeholder } from '../components/Placeholder';

export const EventsPage = (_props: PageProps) => <Placeholder what="The event address and the delivery log" />;
