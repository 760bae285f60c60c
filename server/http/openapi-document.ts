import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';

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
