import { Router, RequestHandler } from 'express';
import swaggerUi, { SwaggerUiOptions } from 'swagger-ui-express';
import { openApiDocument, openApiYaml } from './openapi-document';

/**
 * swagger-ui-express writes the page's settings into a separate `swagger-ui-init.js`, so no script
 * is inline and the policy allows scripts from this origin only. Its page and Swagger UI itself set
 * inline styles, hence `style-src 'unsafe-inline'`. `connect-src 'self'`: the document and the
 * "Try it out" calls go to this service and nowhere else.
 */
const DOCS_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

const SWAGGER_UI: SwaggerUiOptions = {
  customSiteTitle: 'Website Chat API',
  swaggerUrl: '/openapi.json',
  swaggerOptions: {
    persistAuthorization: true, // the key pasted under Authorize survives a reload
    tryItOutEnabled: true,
    displayRequestDuration: true,
    validatorUrl: null, // the default sends the document's address to validator.swagger.io
  },
};

const withDocsCsp: RequestHandler = (_req, res, next) => {
  res.setHeader('Content-Security-Policy', DOCS_CSP);
  next();
};

/** The page's links are relative (`./swagger-ui.css`): they resolve under /docs/ only. */
const requireTrailingSlash: RequestHandler = (req, res, next) => {
  if (!req.originalUrl.split('?')[0].endsWith('/')) return res.redirect(301, '/docs/');
  next();
};

/** Swagger UI at /docs/ and the document at /openapi.json and /openapi.yaml. */
export function docsRoutes(): Router {
  const router = Router();
  router.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument());
  });
  router.get('/openapi.yaml', (_req, res) => {
    res.type('application/yaml').send(openApiYaml());
  });
  router.use('/docs', withDocsCsp);
  router.get('/docs/', requireTrailingSlash, swaggerUi.setup(null, SWAGGER_UI));
  // serveFiles (not `serve`): its swagger-ui-init.js is built from these options, not from the
  // module-wide copy that every `setup` call overwrites. Then the files of swagger-ui-dist.
  router.use('/docs', swaggerUi.serveFiles(undefined, SWAGGER_UI));
  return router;
}
