import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { openApiDocument } from '../../server/http/openapi-document';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * The contract checks of one document: its (operation, status) pairs, and an answer checked
 * against it. `requiredHeadersOnly`: only headers the document marks `required` must be present
 * (the management API declares its per-account counters on answers that may be to requests
 * without an account).
 */
export function documentChecks(doc: Json, opts: { requiredHeadersOnly?: boolean } = {}) {
  /** Every (operationId, status) pair the document promises, for the contract coverage check. */
  function documentedOperations(): { operationId: string; method: string; path: string; statuses: string[] }[] {
    const out = [];
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const [method, op] of Object.entries(item as Json)) {
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        out.push({ operationId: (op as Json).operationId, method, path, statuses: Object.keys((op as Json).responses) });
      }
    }
    return out;
  }

  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ $id: 'doc', components: doc.components }, 'doc');

  function resolve(node: Json): Json {
    return node.$ref ? resolve(doc.components.responses[node.$ref.split('/').pop()]) : node;
  }

  /**
   * Checks an answer against the document independently of the server's own response validation
   * (which skips statuses >= 500 and non-JSON bodies): the status is documented, the declared
   * headers are present, and a JSON body matches the schema.
   */
  function assertMatchesDocument(operationId: string, res: { status: number; headers: Record<string, string>; body: unknown; text?: string }) {
    const op = documentedOperations().find((o) => o.operationId === operationId);
    if (!op) throw new Error(`no operation ${operationId}`);
    const response = (doc.paths as Json)[op.path][op.method].responses[String(res.status)];
    if (!response) throw new Error(`${operationId} answered ${res.status}, which the document does not list`);
    const resolved = resolve(response);
    for (const [name, header] of Object.entries<Json>(resolved.headers ?? {})) {
      if (opts.requiredHeadersOnly && !(header.$ref ? doc.components.headers[header.$ref.split('/').pop()] : header).required) continue;
      const optional = ['Idempotent-Replayed', 'Content-Disposition', 'Content-Length'].includes(name) && res.status !== 200;
      if (name === 'Idempotent-Replayed' || optional) continue;
      if (res.headers[name.toLowerCase()] === undefined) throw new Error(`${operationId} ${res.status}: header ${name} missing`);
    }
    const json = resolved.content?.['application/json'];
    if (json) {
      const validate = ajv.compile({ $ref: 'doc#/components/schemas/' + json.schema.$ref.split('/').pop() });
      if (!validate(res.body))
        throw new Error(`${operationId} ${res.status}: body does not match: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(res.body)}`);
    }
  }

  return { documentedOperations, assertMatchesDocument };
}

export const doc = openApiDocument() as Json;
export const { documentedOperations, assertMatchesDocument } = documentChecks(doc);
