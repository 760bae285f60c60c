/**
 * `@chat-service/sdk/validate` on real emitted payloads, the embedded copy of the shipped
 * schemas kept fresh, and the SDK's version kept equal to its package.json.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createHarness, Harness } from '../helpers/harness';
import { outboxEvents } from './helpers';
import { EventValidationError, assertValidEvent, eventNames, eventSchemas, validateEvent } from '../../sdk/src/validate';
import { VERSION } from '../../sdk/src';

const sdk = path.join(__dirname, '../../sdk');
let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

test('every payload the service emits is valid against its published schema', async () => {
  const { conversation } = await h.runtime.services.window.chat.visitorSay(h.site.id, 'v-validate', 'with a file', {
    files: [{ buffer: Buffer.from('%PDF'), originalName: 'a.pdf', mimeType: 'application/pdf' }],
  });
  await h.runtime.services.window.chat.agentSay(conversation.id, 'agent answer', 'markdown');
  await h.runtime.services.conversations.close(h.site.id, conversation.id);
  const events = await outboxEvents(h, h.site.id);
  expect(new Set(events.map((e) => e.name))).toEqual(new Set(['conversation.started', 'message.created', 'conversation.closed']));
  for (const e of events) {
    const result = validateEvent(JSON.parse(e.body));
    expect(result).toEqual({ valid: true, event: JSON.parse(e.body) });
    expect(validateEvent(e.body).valid).toBe(true); // the raw JSON text works too
    expect(assertValidEvent(JSON.parse(e.body)).id).toBe(e.id);
  }
});

test('invalid payloads are reported with JSON pointers; assertValidEvent throws a typed error', async () => {
  const body = JSON.parse((await outboxEvents(h, h.site.id)).find((e) => e.name === 'message.created')!.body);
  const broken = { ...body, workspaceKey: 'nope', data: { ...body.data, message: { ...body.data.message, origin: 'fax' } }, extra: 1 };
  const result = validateEvent(broken);
  expect(result.valid).toBe(false);
  if (result.valid) return;
  const paths = result.errors.map((e) => e.path);
  expect(paths).toEqual(expect.arrayContaining(['/workspaceKey', '/data/message/origin', '']));
  expect(() => assertValidEvent(broken)).toThrow(EventValidationError);
  expect(validateEvent({ event: 'conversation.deleted' })).toMatchObject({ valid: false, errors: [{ path: '/event' }] });
  expect(validateEvent('not json')).toMatchObject({ valid: false, errors: [{ keyword: 'json' }] });
});

test('the validator uses exactly the schemas shipped in sdk/schemas (embedded copy is fresh)', () => {
  expect([...eventNames].sort()).toEqual(['conversation.closed', 'conversation.started', 'message.created']);
  for (const name of eventNames) {
    expect(eventSchemas[name]).toEqual(JSON.parse(fs.readFileSync(path.join(sdk, 'schemas', `${name}.json`), 'utf8')));
  }
  // The byte-level freshness of src/event-schemas.ts is checked by `scripts/generate.ts --check`
  // (test/contract/generated.test.ts), like every other generated file.
});

test('VERSION (User-Agent) equals sdk/package.json version', () => {
  expect(VERSION).toBe(JSON.parse(fs.readFileSync(path.join(sdk, 'package.json'), 'utf8')).version);
});
