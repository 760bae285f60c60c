/** The dashboard's entry (bundled by scripts/build-dashboard.ts into the shell's one script). */
import { render } from 'preact';
import { App } from './app';

render(<App />, document.getElementById('app')!);
