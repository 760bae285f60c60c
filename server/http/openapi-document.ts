import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import * as OpenApiValidator from 'express-openapi-validator';

export const OPENAPI_FILE = path.resolve(__dirname, '../../openapi/openapi.yaml');

let cached: { yaml: string; doc: Record<string, unknown> } | undefined;

/** The hand-written document, read once. Callers get a deep copy (the validator mutates what it is given). */
export function openApiDocument(): Record<string, unknown> {
  if (!cached) {
    const yaml = fs.readFileSync(OPENAPI_FILE, 'utf8');
    cached = { yaml, doc: YAML.parse(yaml) };
  }
  return structuredClone(cached.doc);
}

export function openApiYaml(): string {
  openApiDocument();
  return cached!.yaml;
}

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

