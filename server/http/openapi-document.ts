import fs from 'node:fs';
import path from 'node:path';
import * as OpenApiValidator from 'express-openapi-validator';
import type { RequestHandler } from 'express';
import { fromProjectRoot, ownBuild } from '../platform/project-root';
import { ApiError } from '../platform/errors';

export const OPENAPI_FILE = fromProjectRoot('openapi', 'openapi.yaml');

export const WINDOW_OPENAPI_FILE = fromProjectRoot('openapi', 'window.yaml');

export const MANAGE_OPENAPI_FILE = fromProjectRoot('openapi', 'manage.yaml');

/**
 * A hand-written document, read once. Callers of `doc()` get a deep copy (the validator mutates
 * what it is given). A build carries each document as it was built, already parsed
 * (scripts/build.js): parsing the YAML took most of a second of every start.
 */
function documentFile(file: string) {
  const name = path.basename(file, '.yaml');
  let cached: { doc: Record<string, unknown> } | undefined;
  const load = () => {
    cached ??= { doc: ownBuild ? JSON.parse(fs.readFileSync(path.join(ownBuild, 'openapi', `${name}.json`), 'utf8')) : parseYaml(readYaml()) };
    return cached;
  };
  let yamlText: string | undefined;
  const readYaml = () => (yamlText ??= fs.readFileSync(ownBuild ? path.join(ownBuild, 'openapi', `${name}.yaml`) : file, 'utf8'));
  return { doc: () => structuredClone(load().doc), yaml: readYaml };
}

/** The YAML parser, loaded only when running from the sources: a build reads the documents as JSON. */
const parseYaml = (text: string): Record<string, unknown> => (require('yaml') as typeof import('yaml')).parse(text);

const publicApi = documentFile(OPENAPI_FILE);
const windowEntry = documentFile(WINDOW_OPENAPI_FILE);
const manageEntry = documentFile(MANAGE_OPENAPI_FILE);

/** The public API's document (openapi/openapi.yaml). */
export const openApiDocument = publicApi.doc;
export const openApiYaml = publicApi.yaml;
/** The chat window entry's document (openapi/window.yaml). */
export const windowDocument = windowEntry.doc;
/** The management API's document (openapi/manage.yaml). */
export const manageDocument = manageEntry.doc;
export const manageYaml = manageEntry.yaml;

/**
 * express-openapi-validator as both entries use it: every request checked against `document`
 * (unknown query parameters refused, nothing removed), answers too when `validateResponses` (outside
 * production and in every test). Rights are checked by our own middleware, files by multipartBody (http/bodies.ts).
 *
 * Its steps run as one middleware (one router layer instead of five), and its route lookup, which
 * turns every route of the document into a regular expression again on every request until one
 * matches, gets the expressions it already made (`memoisePathToRegexp`). What is validated does not
 * change.
 */
export function validateAgainst(document: Record<string, unknown>, validateResponses: boolean): RequestHandler {
  memoisePathToRegexp();
  skipUnusedDocumentSchema();
  resolveComponentSchemasDirectly();
  const steps = OpenApiValidator.middleware({
    apiSpec: document as never,
    validateRequests: { allowUnknownQueryParameters: false, removeAdditional: false },
    validateResponses: validateResponses ? { removeAdditional: false } : false,
    validateSecurity: false,
    validateFormats: true,
    // Checking the document itself against the OpenAPI schema took a second of every start; it finds
    // only our own mistakes, as checking answers does, so it runs where answers are checked (and
    // the documents are linted in every test run).
    validateApiSpec: validateResponses,
    fileUploader: false,
    ignoreUndocumented: false,
  }) as unknown as RequestHandler[];
  return inSequence([...steps, finiteQueryNumbers]);
}

/**
 * ajv lets ±Infinity through `integer` and its bounds ("limit=1e309" is coerced to Infinity and
 * passes `maximum: 100`), and a database driver cannot bind it. A query parameter the validator
 * turned into a number must be finite: anything else is the client's 400, never a 500.
 */
const finiteQueryNumbers: RequestHandler = (req, _res, next) => {
  for (const [name, value] of Object.entries(req.query)) {
    if (typeof value === 'number' && !Number.isFinite(value)) {
      return next(
        new ApiError('invalid_request', `request/query/${name} must be a finite number`, [{ path: `/query/${name}`, message: 'must be a finite number' }]),
      );
    }
  }
  next();
};

/** Handlers run one after the other as one middleware; the first error goes to `next`. */
export function inSequence(handlers: RequestHandler[]): RequestHandler {
  return (req, res, next) => {
    let i = 0;
    const step = (err?: unknown) => {
      if (err) return next(err);
      const handler = handlers[i++];
      if (!handler) return next();
      try {
        const returned = handler(req, res, step) as unknown;
        if (returned instanceof Promise) returned.catch(step);
      } catch (e) {
        next(e);
      }
    };
    step();
  };
}

/**
 * A module as express-openapi-validator loads it (the same instance, so a patch applies to what it
 * calls): resolved from the validator's own directory, never from ours.
 */
export function validatorModule<T>(specifier: string): T {
  return require(require.resolve(specifier, { paths: [require.resolve('express-openapi-validator')] })) as T;
}

let memoised = false;

/**
 * path-to-regexp's `pathToRegexp` as its importers outside the package call it (the validator's
 * route lookup: a handful of route templates, compiled again on every request): the same template
 * and options give the same (stateless: no g or y flag) expression and keys, so they are kept.
 * Express's router calls the package's `match`, which uses its own inner reference and is untouched.
 * Library patch 5 (docs/library-patches.md).
 */
function memoisePathToRegexp() {
  if (memoised) return;
  memoised = true;
  const module = validatorModule<{
    pathToRegexp: (path: unknown, options?: object) => { regexp: RegExp; keys: unknown[] };
  }>('path-to-regexp');
  const original = module.pathToRegexp;
  const cache = new Map<string, ReturnType<typeof original>>();
  module.pathToRegexp = (path, options) => {
    if (typeof path !== 'string') return original(path, options);
    const key = `${path}\u0000${options ? JSON.stringify(options) : ''}`;
    let compiled = cache.get(key);
    if (!compiled) {
      compiled = original(path, options);
      if (compiled.regexp.global || compiled.regexp.sticky) return compiled;
      if (cache.size < 1000) cache.set(key, compiled);
    }
    return compiled;
  };
}

let skipping = false;

/**
 * The validator builds its checker of the document against the OpenAPI schema even when told not to
 * check the document (`validateApiSpec: false`, production), and never calls it then: compiling
 * that schema cost a quarter of a second per entry at every start. Without the check it gets an
 * object that is never asked anything. Library patch 7 (docs/library-patches.md).
 */
function skipUnusedDocumentSchema() {
  if (skipping) return;
  skipping = true;
  const module = validatorModule<{ OpenAPISchemaValidator: new (opts: { validateApiSpec?: boolean }) => unknown }>(
    'express-openapi-validator/dist/framework/openapi.schema.validator',
  );
  const Original = module.OpenAPISchemaValidator;
  // Called with `new`: a constructor that returns an object makes that object the result.
  module.OpenAPISchemaValidator = function OpenAPISchemaValidator(opts: { validateApiSpec?: boolean }) {
    return opts.validateApiSpec ? new Original(opts) : { validate: () => ({ errors: [] }) };
  } as unknown as typeof Original;
}

export interface Preprocessor {
  apiDoc: { components?: { schemas?: Record<string, unknown> } };
}
export type ResolveSchema = ((this: Preprocessor, schema: unknown) => unknown) & { unpatched?: ResolveSchema };

/**
 * The validator's schema preprocessor finds the schema a `#/components/schemas/<id>` reference
 * names by asking ajv for it, which compiles that schema (and all it references) only to hand back
 * the object it was given: most of a second of every start over the three documents. For such a
 * reference the object is the document's own component, returned directly; anything else goes the
 * library's way. Library patch 8 (docs/library-patches.md).
 */
export function resolveComponentSchemasDirectly() {
  const module = validatorModule<{ SchemaPreprocessor: { prototype: { resolveSchema: ResolveSchema } } }>(
    'express-openapi-validator/dist/middlewares/parsers/schema.preprocessor',
  );
  const proto = module.SchemaPreprocessor.prototype;
  if (proto.resolveSchema.unpatched) return;
  const original = proto.resolveSchema;
  const PREFIX = '#/components/schemas/';
  const patched: ResolveSchema = function (this: Preprocessor, schema: unknown) {
    const ref = (schema as { $ref?: unknown } | null)?.$ref;
    if (typeof ref === 'string' && ref.startsWith(PREFIX)) {
      const id = ref.slice(PREFIX.length);
      const components = this.apiDoc.components?.schemas;
      if (components && Object.hasOwn(components, id)) return components[id];
    }
    return original.call(this, schema);
  };
  patched.unpatched = original;
  proto.resolveSchema = patched;
}
