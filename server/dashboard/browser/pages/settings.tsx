import type { PageProps } from '../types';
import { Placeholder } from '../components/Placeholder';

export const SettingsPage = (_props: PageProps) => <Placeholder what="The site's settings" />;
