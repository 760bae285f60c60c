import fs from 'node:fs';
import YAML from 'yaml';

export type JsonObject = { [key: string]: unknown };

export function loadDocument(file: string): JsonObject {
  return YAML.parse(fs.readFileSync(file, 'utf8')) as JsonObject;
}

export const EVENT_SCHEMA_COMPONENTS = {
  'conversation.started': 'ConversationStartedEvent',
  'message.created': 'MessageCreatedEvent',
  'conversation.closed': 'ConversationClosedEvent',
} as const;

export type EventName = keyof typeof EVENT_SCHEMA_COMPONENTS;

/**
 * One self-contained JSON Schema per event: the event's component with every schema it refers
 * to copied under `$defs` and the `$ref`s rewritten, so it validates with any 2020-12 validator
 * without the OpenAPI document.
 */
export function eventSchemas(doc: JsonObject): Record<EventName, JsonObject> {
  const components = (doc.components as JsonObject).schemas as Record<string, JsonObject>;
  const version = String((doc.info as JsonObject).version);
  const out = {} as Record<EventName, JsonObject>;
  for (const [event, componentName] of Object.entries(EVENT_SCHEMA_COMPONENTS) as [EventName, string][]) {
    const defs: Record<string, unknown> = {};
    const rewrite = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(rewrite);
      if (!node || typeof node !== 'object') return node;
      const result: JsonObject = {};
      for (const [k, v] of Object.entries(node as JsonObject)) {
        if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')) {
          const name = v.slice('#/components/schemas/'.length);
          if (!(name in defs)) {
            defs[name] = null; // placeholder stops cycles
            defs[name] = rewrite(components[name]);
          }
          result[k] = `#/$defs/${name}`;
        } else {
          result[k] = rewrite(v);
        }
      }
      return result;
    };
    const body = rewrite(components[componentName]) as JsonObject;
    out[event] = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: `https://schemas.chat-service.example/v1/${event}.json`,
      title: `${event} event payload`,
      'x-api-version': version,
      ...body,
      $defs: Object.fromEntries(Object.entries(defs).sort(([a], [b]) => a.localeCompare(b))),
    };
  }
  return out;
}
