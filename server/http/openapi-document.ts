import fs from 'node:fs';
import YAML from 'yaml';
import * as OpenApiValidator from 'express-openapi-validator';
import { fromProjectRoot } from '../platform/project-root';

export const OPENAPI_FILE = fromProjectRoot('openapi', 'openapi.yaml');

export const WINDOW_OPENAPI_FILE = fromProjectRoot('openapi', 'window.yaml');

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

/** The public API's document (openapi/openapi.yaml). */
export const openApiDocument = publicApi.doc;
export const openApiYaml = publicApi.yaml;
/** The chat window entry's document (openapi/window.yaml). */
export const windowDocument = windowEntry.doc;

/**
 * express-openapi-validator as both entries use it: every request checked against `document`
 * (unknown query parameters refused, nothing removed), answers too when `validateResponses` (outside
 * production and in every test). Rights are checked by our own middleware, files by multer.
 */
export function validateAgainst(document: Record<string, unknown>, validateResponses: boolean) {
  return OpenApiValidator.middleware({
    apiSpec: document as never,
    validateRequests: { allowUnknownQueryParameters: false, removeAdditional: false },
    validateResponses: validateResponses ? { removeAdditional: false } : false,
    validateSecurity: false,
    validateFormats: true,
    fileUploader: false,
    ignoreUndocumented: false,
  });
}

