import { Router, RequestHandler } from 'express';
import swaggerUi, { SwaggerUiOptions } from 'swagger-ui-express';
import { manageDocument, manageYaml, openApiDocument, openApiYaml } from './openapi-document';

/**
 * swagger-ui-express writes the page's settings into a separate `swagger-ui-init.js`, so no script
 * is inline and the policy allows scripts from this origin only. Its page and Swagger UI itself set
 * inline styles, hence `style-src 'unsafe-inline'`. `connect-src 'self'`: the document and the
 * "Try it out" calls go to this service and nowhere else.
 */
const DOCS_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

/**
 * The files of swagger-ui-dist the page loads; the rest of that package (its own index.html,
 * swagger-initializer.js, oauth2-redirect.html and .js, the ES bundles, source maps) is not served:
 * each would be another page or script on this origin for nothing.
 */
const PAGE_FILES = new Set([
  'swagger-ui.css',
  'swagger-ui-bundle.js',
  'swagger-ui-standalone-preset.js',
  'swagger-ui-init.js',
  'favicon-32x32.png',
  'favicon-16x16.png',
]);

/**
 * With persistence off Swagger UI neither reads nor removes the key an earlier page left in
 * localStorage (`authorized`): this script, loaded before the page's own, removes it.
 */
const FORGET_KEY_JS = "try { localStorage.removeItem('authorized'); } catch (e) { /* storage refused: nothing kept */ }\n";

function swaggerUiOptions(persistAuthorization: boolean): SwaggerUiOptions {
  return {
    customSiteTitle: 'Website Chat API',
    ...(persistAuthorization ? {} : { customJs: './forget-key.js' }),
    swaggerUrl: '/openapi.json',
    explorer: true, // the top bar's document selector
    swaggerOptions: {
      // Off unless DOCS_PERSIST_AUTHORIZATION=true: kept, the key entered under Authorize would sit
      // in this origin's localStorage, readable by any script that ever ran here.
      persistAuthorization,
      tryItOutEnabled: true,
      displayRequestDuration: true,
      validatorUrl: null, // the default sends the document's URL to validator.swagger.io
      // Both documents, chosen in the top bar; the public API first, so it opens by default.
      urls: [
        { url: '/openapi.json', name: 'Public API (/api/v1)' },
        { url: '/manage/openapi.json', name: 'Management API (/manage/v1)' },
      ],
    },
  };
}

const withDocsCsp: RequestHandler = (_req, res, next) => {
  res.setHeader('Content-Security-Policy', DOCS_CSP);
  next();
};

/** The page's links are relative (`./swagger-ui.css`): they resolve under /docs/ only. */
const requireTrailingSlash: RequestHandler = (req, res, next) => {
  if (!req.originalUrl.split('?')[0].endsWith('/')) return res.redirect(301, '/docs/');
  next();
};

/** Anything under /docs/ but the page and its files is 404 (in the envelope, by the app's handler). */
const onlyPageFiles: RequestHandler = (req, _res, next) => (PAGE_FILES.has(req.path.slice(1)) ? next() : next('router'));

/** Swagger UI at /docs/, the public API's document at /openapi.json and /openapi.yaml, the management API's at /manage/openapi.json and .yaml. */
export function docsRoutes(opts: { persistAuthorization: boolean }): Router {
  const router = Router();
  const settings = swaggerUiOptions(opts.persistAuthorization);
  router.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument());
  });
  router.get('/openapi.yaml', (_req, res) => {
    res.type('application/yaml').send(openApiYaml());
  });
  router.get('/manage/openapi.json', (_req, res) => {
    res.json(manageDocument());
  });
  router.get('/manage/openapi.yaml', (_req, res) => {
    res.type('application/yaml').send(manageYaml());
  });
  router.use('/docs', withDocsCsp);
  router.get('/docs/', requireTrailingSlash, swaggerUi.setup(null, settings));
  if (!opts.persistAuthorization) {
    router.get('/docs/forget-key.js', (_req, res) => {
      res.type('application/javascript; charset=utf-8').send(FORGET_KEY_JS);
    });
  }
  // serveFiles (not `serve`): its swagger-ui-init.js is built from these options, not from the
  // module-wide copy that every `setup` call overwrites. Then the page's files of swagger-ui-dist.
  router.use('/docs', onlyPageFiles, swaggerUi.serveFiles(undefined, settings));
  return router;
}
