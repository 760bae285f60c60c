import path from 'node:path';
import { loadDocument, JsonObject } from '../../scripts/lib/openapi-doc';

/** A JSON Schema node of the document, with every `$ref` already resolved. */
export type Schema = JsonObject;

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  schema: Schema;
}

/** One operation of the document, in the shape the request generators need. */
export interface Operation {
  operationId: string;
  method: string;
  /** The document's path template under the server URL, e.g. `/conversations/{id}/messages`. */
  template: string;
  params: Parameter[];
  /** Media type -> body schema; empty when the operation takes no body. */
  bodies: Record<string, Schema>;
  /** Scopes of the `apiKey` scheme; null when the operation needs no key. */
  scopes: string[] | null;
  /** Names of the security schemes that admit a request; empty when the operation needs no credential. */
  security: string[];
  /** The operation's description (the management document opens owner-only ones with "Owners only"). */
  description: string;
  /** Marked `x-cross-site: true`: a change another site may post (its credential is in its URL). */
  crossSite: boolean;
}

export const DOCUMENT_FILE = path.resolve(__dirname, '../../openapi/openapi.yaml');
export const MANAGE_DOCUMENT_FILE = path.resolve(__dirname, '../../openapi/manage.yaml');

/** Copies `node` with every local `$ref` replaced by its target (the document has no cycles). */
function deref(doc: JsonObject, node: unknown, seen: string[] = []): unknown {
  if (Array.isArray(node)) return node.map((n) => deref(doc, n, seen));
  if (!node || typeof node !== 'object') return node;
  const ref = (node as JsonObject).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/')) {
    if (seen.includes(ref)) throw new Error(`cyclic $ref ${ref}: the generators expect none`);
    const target = ref
      .slice(2)
      .split('/')
      .reduce<unknown>((at, part) => (at as JsonObject)[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
    return deref(doc, target, [...seen, ref]);
  }
  return Object.fromEntries(Object.entries(node as JsonObject).map(([k, v]) => [k, deref(doc, v, seen)]));
}

/** Every operation of the document's `paths` (under its first server, e.g. `/api/v1`), in document order. */
export function loadOperations(file = DOCUMENT_FILE): { operations: Operation[]; basePath: string } {
  const doc = loadDocument(file);
  const basePath = String(((doc.servers as JsonObject[])[0] ?? {}).url ?? '');
  const globalSecurity = doc.security as JsonObject[] | undefined;
  const operations: Operation[] = [];
  for (const [template, rawItem] of Object.entries(doc.paths as JsonObject)) {
    const item = deref(doc, rawItem) as JsonObject;
    const shared = (item.parameters as Parameter[] | undefined) ?? [];
    for (const method of ['get', 'put', 'post', 'delete', 'patch', 'head', 'options']) {
      const op = item[method] as JsonObject | undefined;
      if (!op) continue;
      const params = [...shared, ...((op.parameters as Parameter[] | undefined) ?? [])].map((p) => ({
        name: p.name,
        in: p.in,
        required: Boolean(p.required),
        schema: (p.schema as Schema) ?? {},
      }));
      const content = ((op.requestBody as JsonObject | undefined)?.content ?? {}) as Record<string, JsonObject>;
      const bodies = Object.fromEntries(Object.entries(content).map(([type, media]) => [type, (media.schema as Schema) ?? {}]));
      const security = (op.security as JsonObject[] | undefined) ?? globalSecurity ?? [];
      const apiKey = security.find((s) => 'apiKey' in s);
      operations.push({
        operationId: String(op.operationId),
        method: method.toUpperCase(),
        template,
        params,
        bodies,
        scopes: apiKey ? (apiKey.apiKey as string[]) : null,
        security: [...new Set(security.flatMap((s) => Object.keys(s)))],
        description: String(op.description ?? ''),
        crossSite: op['x-cross-site'] === true,
      });
    }
  }
  return { operations, basePath };
}
