/** The OpenAPI documents scripts/generate.ts makes files from: adding a document is adding an entry. */
export interface GeneratedDocument {
  /** The document, relative to the repository root. */
  document: string;
  /** Where its types go (openapi-typescript). */
  types: string;
  /** The document whose event payloads become the SDK's JSON Schemas. */
  eventSchemas?: boolean;
}

export const DOCUMENTS: GeneratedDocument[] = [
  { document: 'openapi/openapi.yaml', types: 'sdk/src/generated/api.ts', eventSchemas: true },
  { document: 'openapi/window.yaml', types: 'server/window/generated/api.ts' },
  { document: 'openapi/manage.yaml', types: 'server/manage/generated/api.ts' },
];
