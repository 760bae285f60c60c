/**
 * `@chat-service/sdk/validate`: checks an event payload against the published JSON Schemas
 * (draft 2020-12, the files under `schemas/` of this package). Optional: it needs the peer
 * dependencies `ajv` (8) and `ajv-formats`, and a runtime that allows code generation (Ajv
 * compiles schemas to functions; Cloudflare Workers forbid that).
 *
 * ```ts
 * import { validateEvent } from '@chat-service/sdk/validate';
 * const result = validateEvent(event);
 * if (!result.valid) console.error(result.errors);
 * ```
 */
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { ChatError } from './errors.js';
import { eventSchemas } from './event-schemas.js';
import type { WebhookEvent, WebhookEventName } from './types.js';

export { eventSchemas };

export interface EventValidationIssue {
  /** JSON Pointer into the payload, `''` for the root. */
  path: string;
  message: string;
  /** The JSON Schema keyword that failed (`required`, `pattern`, ...). */
  keyword: string;
}

export type EventValidationResult = { valid: true; event: WebhookEvent } | { valid: false; errors: EventValidationIssue[] };

/** A payload does not match its event's schema. */
export class EventValidationError extends ChatError {
  readonly errors: EventValidationIssue[];
  constructor(errors: EventValidationIssue[]) {
    super(`The event does not match its schema: ${errors.map((e) => `${e.path || '/'} ${e.message}`).join('; ')}`);
    this.errors = errors;
  }
}

// ajv and ajv-formats are CommonJS; under ESM their default export is `module.exports`, under the
// CommonJS build it is `.default`. Take whichever is the function.
type AjvClass = typeof Ajv2020Module;
const Ajv2020 = ((Ajv2020Module as unknown as { default?: AjvClass }).default ?? Ajv2020Module) as AjvClass;
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as typeof addFormatsModule;

let validators: Map<string, ValidateFunction> | undefined;

function compiled(): Map<string, ValidateFunction> {
  if (!validators) {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    addFormats(ajv);
    validators = new Map(Object.entries(eventSchemas).map(([name, schema]) => [name, ajv.compile(schema as object)]));
  }
  return validators;
}

function issues(errors: ErrorObject[] | null | undefined): EventValidationIssue[] {
  return (errors ?? []).map((e) => ({ path: e.instancePath, message: e.message ?? 'is invalid', keyword: e.keyword }));
}

/**
 * Validates a payload (an object, or the JSON text) against the schema of its `event`. The
 * schemas are compiled once, on first use.
 */
export function validateEvent(payload: unknown): EventValidationResult {
  let value = payload;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return { valid: false, errors: [{ path: '', message: 'is not valid JSON', keyword: 'json' }] };
    }
  }
  const name = (value as { event?: unknown } | null)?.event;
  const validate = typeof name === 'string' ? compiled().get(name) : undefined;
  if (!validate) {
    return { valid: false, errors: [{ path: '/event', message: `must be one of ${Object.keys(eventSchemas).join(', ')}`, keyword: 'enum' }] };
  }
  return validate(value) ? { valid: true, event: value as WebhookEvent } : { valid: false, errors: issues(validate.errors) };
}

/** Like `validateEvent`, but returns the typed event or throws `EventValidationError`. */
export function assertValidEvent(payload: unknown): WebhookEvent {
  const result = validateEvent(payload);
  if (!result.valid) throw new EventValidationError(result.errors);
  return result.event;
}

/** The names of the events that have a schema. */
export const eventNames = Object.keys(eventSchemas) as WebhookEventName[];
