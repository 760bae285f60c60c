/**
 * The settings page checks an origin before sending it (server/dashboard/browser/settings/
 * parse-origin.ts): it must accept exactly what the server accepts, and give the same origin, or a
 * person would be told off for a valid one or sent to a 400 the field could have explained.
 */
import { parseOrigin } from '../../server/dashboard/browser/settings/parse-origin';
import { normaliseOrigin } from '../../server/access/service';

const server = (input: string): string | null => {
  try {
    return normaliseOrigin(input);
  } catch {
    return null;
  }
};
const client = (input: string): string | null => {
  const r = parseOrigin(input);
  return 'origin' in r ? r.origin : null;
};

const INPUTS = [
  'https://shop.example',
  'https://shop.example/',
  '  https://Shop.Example:443 ',
  'https://shop.example:8443',
  'HTTPS://SHOP.EXAMPLE',
  'http://localhost:3000',
  'http://127.0.0.1:8080/',
  'http://[::1]:5173',
  'http://shop.example',
  'https://shop.example/products',
  'https://shop.example//',
  'https://shop.example?x=1',
  'https://shop.example#top',
  'https://*.shop.example',
  'https://user:pw@shop.example',
  'shop.example',
  '//shop.example',
  'ftp://shop.example',
  'javascript://shop.example',
  'https://',
  'https://exa mple.com',
  'https://xn--bcher-kva.example',
  'https://bücher.example',
  '',
  `https://${'a'.repeat(300)}.example`,
];

test.each(INPUTS)('client and server agree on %j', (input) => {
  expect(client(input)).toBe(server(input));
});

test('each refusal says why in words', () => {
  expect(parseOrigin('https://shop.example/products')).toEqual({ problem: 'An origin has no path: use https://shop.example.' });
  expect(parseOrigin('http://shop.example')).toEqual({ problem: 'Use https://: http:// is only for localhost, 127.0.0.1 and [::1].' });
  expect('problem' in parseOrigin('https://*.shop.example')).toBe(true);
  expect(parseOrigin(' https://Shop.Example:443/ ')).toEqual({ origin: 'https://shop.example' });
});
