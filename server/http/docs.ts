import express, { Router } from 'express';
import swaggerUi from 'swagger-ui-dist';
import { openApiDocument, openApiYaml } from './openapi-document';

const INDEX_HTML = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Website Chat API</title>
  <link rel="stylesheet" href="./swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="./swagger-ui-bundle.js"></script>
  <script src="./init.js"></script>
</body>
</html>`;

// Kept in a file (not inline) so the page runs under a CSP without 'unsafe-inline' scripts.
const INIT_JS = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  persistAuthorization: true,
  tryItOutEnabled: true,
  displayRequestDuration: true,
});`;

const DOCS_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

/** Swagger UI at /docs and the document at /openapi.json and /openapi.yaml. */
export function docsRoutes(): Router {
  const router = Router();
  router.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument());
  });
  router.get('/openapi.yaml', (_req, res) => {
    res.type('application/yaml').send(openApiYaml());
  });
  router.get('/docs/', (req, res) => {
    if (!req.originalUrl.split('?')[0].endsWith('/')) return res.redirect(301, '/docs/');
    res.setHeader('Content-Security-Policy', DOCS_CSP);
    res.type('html').send(INDEX_HTML);
  });
  router.get('/docs/init.js', (_req, res) => {
    res.type('application/javascript').send(INIT_JS);
  });
  router.use('/docs', express.static(swaggerUi.getAbsoluteFSPath(), { index: false }));
  return router;
}
