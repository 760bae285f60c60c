import { VERSION } from './version.js';

interface RuntimeGlobals {
  process?: { versions?: { node?: string; bun?: string }; platform?: string; arch?: string };
  Deno?: { version?: { deno?: string } };
  EdgeRuntime?: string;
  navigator?: { userAgent?: string };
  window?: unknown;
  document?: unknown;
}

const g = globalThis as unknown as RuntimeGlobals;

/** `name/version` of the JavaScript runtime, for the User-Agent. */
function runtimeVersion(): string {
  if (typeof g.Deno?.version?.deno === 'string') return `deno/${g.Deno.version.deno}`;
  if (typeof g.process?.versions?.bun === 'string') return `bun/${g.process.versions.bun}`;
  if (typeof g.EdgeRuntime === 'string') return `edge-runtime/${g.EdgeRuntime}`;
  if (g.navigator?.userAgent === 'Cloudflare-Workers') return 'cloudflare-workers';
  if (typeof g.process?.versions?.node === 'string') {
    const platform = g.process.platform && g.process.arch ? ` (${g.process.platform}; ${g.process.arch})` : '';
    return `node/${g.process.versions.node}${platform}`;
  }
  return 'unknown-runtime';
}

/** `chat-service-sdk-js/0.1.0 node/20.11.0 (linux; x64)`, with the caller's own product (`appInfo`) first when given. */
export function userAgent(appInfo?: string): string {
  const ua = `chat-service-sdk-js/${VERSION} ${runtimeVersion()}`;
  return appInfo ? `${appInfo} ${ua}` : ua;
}

/** True in a web page, where an access key must never be used. */
export function isBrowserPage(): boolean {
  return typeof g.window !== 'undefined' && typeof g.document !== 'undefined' && g.navigator?.userAgent !== 'Cloudflare-Workers';
}
