/**
 * The dashboard's HTML shell (served by routes.ts at every client route, measured by
 * scripts/build-dashboard.ts as part of the first load). It holds no inline script or style.
 */

export const DASHBOARD_BASE_PATH = '/dashboard';

/**
 * The shell, naming the build's files by their hashed names: the entry module, the modules of the
 * first load preloaded beside it (so the inbox's chunk comes in the same round trip), the stylesheet.
 */
export function shellHtml(m: { script: string; preload: string[]; style: string }): string {
  // The names are the builder's hashes (letters and digits): nothing here needs escaping. The empty icon keeps the
  // browser from asking for /favicon.ico, whose 404 would be a console error on every first load.
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${DASHBOARD_BASE_PATH}/assets/${m.style}">
<script type="module" src="${DASHBOARD_BASE_PATH}/assets/${m.script}"></script>
${m.preload.map((name) => `<link rel="modulepreload" href="${DASHBOARD_BASE_PATH}/assets/${name}">\n`).join('')}</head>
<body>
<div id="app"></div>
<noscript><p>The dashboard needs JavaScript.</p></noscript>
</body>
</html>
`;
}
