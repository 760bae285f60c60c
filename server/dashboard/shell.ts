/**
 * The dashboard's HTML shell (served by routes.ts at every client route, measured by
 * scripts/build-dashboard.ts as part of the first load). It holds no inline script or style.
 */

export const DASHBOARD_BASE_PATH = '/dashboard';

/** The shell, naming the build's two files by their hashed names. */
export function shellHtml(m: { script: string; style: string }): string {
  // The names are the builder's hex hashes: nothing here needs escaping. The empty icon keeps the
  // browser from asking for /favicon.ico, whose 404 would be a console error on every first load.
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${DASHBOARD_BASE_PATH}/assets/${m.style}">
<script src="${DASHBOARD_BASE_PATH}/assets/${m.script}" defer></script>
</head>
<body>
<div id="app"></div>
<noscript><p>The dashboard needs JavaScript.</p></noscript>
</body>
</html>
`;
}
