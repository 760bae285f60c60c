/**
 * The error codes are listed once: the `enum` of `Error.code` in openapi/openapi.yaml. The server's
 * status table and the SDK's `KnownErrorCode` are typed from the generated types (a code missing or
 * extra fails `tsc`); these checks also fail at run time when the lists drift apart.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { ERROR_STATUS, ErrorCode, PublicErrorCode } from '../../server/platform/errors';
import type { KnownErrorCode } from '../../sdk/src';

const root = path.resolve(__dirname, '../..');
const read = (file: string) => YAML.parse(fs.readFileSync(path.join(root, file), 'utf8'));
const publicApi = read('openapi/openapi.yaml');
const windowEntry = read('openapi/window.yaml');
const manageApi = read('openapi/manage.yaml');

// Fails type-checking (npx tsc -p tsconfig.json) unless the SDK's codes are exactly the server's.
type SameCodes<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sdkCodesAreTheServers: SameCodes<KnownErrorCode, PublicErrorCode> = true;

const documented: string[] = publicApi.components.schemas.Error.properties.code.enum;
/** The management API's codes: the public API's and its own four. */
const manageCodes: string[] = manageApi.components.schemas.Error.properties.code.enum;

test('the server has a status for every documented code and for no other', () => {
  expect(sdkCodesAreTheServers).toBe(true);
  expect(documented.length).toBeGreaterThan(10);
  expect(Object.keys(ERROR_STATUS).sort()).toEqual([...manageCodes].sort());
});

test('the management API answers the public codes and its own four: three 403s and a 409', () => {
  expect(manageCodes.filter((c) => !documented.includes(c)).sort()).toEqual(['conflict', 'cross_site_request', 'forbidden', 'reauthentication_required']);
  expect(ERROR_STATUS.reauthentication_required).toBe(403);
  expect(ERROR_STATUS.conflict).toBe(409);
  expect(documented.filter((c) => !manageCodes.includes(c))).toEqual([]);
  expect(ERROR_STATUS.forbidden).toBe(403);
  expect(ERROR_STATUS.cross_site_request).toBe(403);
});

test("the chat window's document answers with the same codes", () => {
  // window.yaml is validated as a document of its own, so it cannot $ref into openapi.yaml.
  expect(windowEntry.components.schemas.ErrorResponse.properties.error.properties.code.enum).toEqual(documented);
});

test('every error example in the documents carries a code whose status is the one it is listed under', () => {
  const seen: string[] = [];
  const wrong: string[] = [];
  // A code only the chat window's entry answers (quota_exceeded) has its example in window.yaml.
  for (const document of [publicApi, windowEntry, manageApi]) collectExamples(document, seen, wrong);
  expect(wrong).toEqual([]);
  // Not a vacuous pass: every code has an example but 405's, which the documents list on no operation.
  expect(manageCodes.filter((code) => !seen.includes(code))).toEqual(['method_not_allowed']);
});

function collectExamples(document: typeof publicApi, seen: string[], wrong: string[]) {
  const resolve = (response: { $ref?: string }) =>
    response.$ref ? document.components.responses[response.$ref.replace('#/components/responses/', '')] : response;
  for (const [route, operations] of Object.entries<Record<string, { responses?: Record<string, { $ref?: string }> }>>(document.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      for (const [status, ref] of Object.entries(operation.responses ?? {})) {
        const json = resolve(ref)?.content?.['application/json'];
        const examples = [json?.example, ...Object.values<{ value: unknown }>(json?.examples ?? {}).map((e) => e.value)];
        for (const example of examples) {
          const code = (example as { error?: { code?: string } } | undefined)?.error?.code;
          if (code === undefined) continue;
          seen.push(code);
          if (ERROR_STATUS[code as ErrorCode] !== Number(status))
            wrong.push(`${method.toUpperCase()} ${route} ${status}: ${code} (${ERROR_STATUS[code as ErrorCode]})`);
        }
      }
    }
  }
}
