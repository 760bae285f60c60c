import fs from 'node:fs';
import YAML from 'yaml';
import * as OpenApiValidator from 'express-openapi-validator';
import type { RequestHandler } from 'express';
import { fromProjectRoot } from '../platform/project-root';
import { ApiError } from '../platform/errors';

export const OPENAPI_FILE = fromProjectRoot('openapi', 'openapi.yaml');

export const WINDOW_OPENAPI_FILE = fromProjectRoot('openapi', 'window.yaml');

export const MANAGE_OPENAPI_FILE = fromProjectRoot('openapi', 'manage.yaml');

/**
 * A hand-written document, read once. Callers of `doc()` get a deep copy (the validator mutates
 * what it is given).
 */
function documentFile(file: string) {
  let cached: { yaml: string; doc: Record<string, unknown> } | undefined;
  const load = () => {
    if (!cached) {
      const yaml = fs.readFileSync(file, 'utf8');
      cached = { yaml, doc: YAML.parse(yaml) };
    }
    return cached;
  };
  return { doc: () => structuredClone(load().doc), yaml: () => load().yaml };
}

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
  const steps = OpenApiValidator.middleware({
    apiSpec: document as never,
    validateRequests: { allowUnknownQueryParameters: false, removeAdditional: false },
    validateResponses: validateResponses ? { removeAdditional: false } : false,
    validateSecurity: false,
    validateFormats: true,
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
  const module = require(require.resolve('path-to-regexp', { paths: [require.resolve('express-openapi-validator')] })) as {
    pathToRegexp: (path: unknown, options?: object) => { regexp: RegExp; keys: unknown[] };
  };
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
