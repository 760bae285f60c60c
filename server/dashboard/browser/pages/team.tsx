import type { PageProps } from '../types';
import { Placeholder } from '../components/Placeholder';

export const TeamPage = (_props: PageProps) => <Placeholder what="Members, invitations and the audit log" />;
