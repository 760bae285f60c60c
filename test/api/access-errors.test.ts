/**
 * The access service (sites, keys, the window's settings) refuses with ApiError like every other
 * service, so its callers (the CLI, the window gateway) read a code, not a bare message.
 */
import { createHarness, Harness } from '../helpers/harness';
import { ApiError } from '../../server/platform/errors';
import { parseScopes } from '../../server/access/scopes';
import { normaliseOrigin } from '../../server/access/service';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const refusal = (code: string, message: RegExp) => expect.objectContaining({ constructor: ApiError, code, message: expect.stringMatching(message) });

async function caught(work: () => unknown): Promise<unknown> {
  try {
    await work();
  } catch (err) {
    return err;
  }
  throw new Error('expected a refusal');
}

test('bad input is invalid_request', async () => {
  const access = h.runtime.services.access;
  expect(await caught(() => access.createSite('  '))).toEqual(refusal('invalid_request', /site name/));
  expect(await caught(() => access.setAllowedOrigins(h.site.id, ['http://shop.example']))).toEqual(refusal('invalid_request', /https/));
  expect(
    await caught(() =>
      access.setAllowedOrigins(
        h.site.id,
        Array.from({ length: 21 }, (_, i) => `https://s${i}.example`),
      ),
    ),
  ).toEqual(refusal('invalid_request', /At most 20/));
  expect(await caught(() => access.setIdentity(h.site.id, { mode: 'sometimes' as never }))).toEqual(refusal('invalid_request', /identity mode/));
  expect(await caught(() => normaliseOrigin('https://*.example'))).toEqual(refusal('invalid_request', /wildcards/));
  expect(await caught(() => parseScopes('everything'))).toEqual(refusal('invalid_request', /Unknown right "everything"/));
  expect(await caught(() => parseScopes(' , '))).toEqual(refusal('invalid_request', /At least one right/));
});

test('a missing site or key is not_found, naming it', async () => {
  const access = h.runtime.services.access;
  expect(await caught(() => access.createKey('ws_missing', ['conversations:read']))).toEqual(refusal('not_found', /ws_missing/));
  expect(await caught(() => access.setAllowedOrigins('ws_missing', []))).toEqual(refusal('not_found', /ws_missing/));
  expect(await caught(() => access.setIdentity('ws_missing', { mode: 'optional' }))).toEqual(refusal('not_found', /ws_missing/));
  expect(await caught(() => access.revokeKey('key_missing'))).toEqual(refusal('not_found', /key_missing/));
});
