import { firstRefusal, parsePolicies, policyAllows } from '../../server/sites/csp';

const page = new URL('https://shop.example/products/tea');
const loader = new URL('https://chat.example.com/window/v1/loader.js');
const panel = new URL('https://chat.example.com/window/v1/sites/ws_x/panel');

const one = (text: string) => {
  const [p] = parsePolicies(text, 'header');
  return p;
};
const script = (text: string, url = loader, nonce?: string) => policyAllows(one(text), 'script', url, page, nonce);
const frame = (text: string, url = panel) => policyAllows(one(text), 'frame', url, page);

describe('Content-Security-Policy for the loader and the panel', () => {
  test('no governing directive allows; the most specific directive decides', () => {
    expect(script('img-src *')).toEqual({ allowed: true, directive: null });
    expect(script("default-src 'self'")).toEqual({ allowed: false, directive: 'default-src' });
    expect(script("default-src 'self'; script-src https://chat.example.com")).toEqual({ allowed: true, directive: 'script-src' });
    expect(script("script-src https://chat.example.com; script-src-elem 'self'")).toEqual({ allowed: false, directive: 'script-src-elem' });
    expect(frame("default-src 'self'; child-src https://chat.example.com")).toEqual({ allowed: true, directive: 'child-src' });
    expect(frame("child-src https://chat.example.com; frame-src 'none'")).toEqual({ allowed: false, directive: 'frame-src' });
  });

  test('host sources: scheme, wildcard subdomains, ports, paths', () => {
    expect(script('script-src chat.example.com').allowed).toBe(true); // the page's scheme
    expect(script('script-src http://chat.example.com').allowed).toBe(true); // upgrade to https
    expect(script('script-src https://*.example.com').allowed).toBe(true);
    expect(script('script-src https://*.chat.example.com').allowed).toBe(false); // not the apex
    expect(script('script-src https://chat.example.com:8443').allowed).toBe(false);
    expect(script('script-src https://chat.example.com:*').allowed).toBe(true);
    expect(script('script-src https://chat.example.com/window/').allowed).toBe(true);
    expect(script('script-src https://chat.example.com/window/v1/loader.js').allowed).toBe(true);
    expect(script('script-src https://chat.example.com/other/').allowed).toBe(false);
    expect(script('script-src https://chat.example.org').allowed).toBe(false);
    expect(script('script-src https://chat.example.com:8443', new URL('https://chat.example.com:8443/window/v1/loader.js')).allowed).toBe(true);
    expect(script('script-src chat.example.com', new URL('https://chat.example.com:8443/window/v1/loader.js')).allowed).toBe(false);
  });

  test('keywords, schemes, * and none', () => {
    expect(script('script-src *').allowed).toBe(true);
    expect(script('script-src https:').allowed).toBe(true);
    expect(script('script-src http:').allowed).toBe(true);
    expect(script("script-src 'none'").allowed).toBe(false);
    expect(script('script-src').allowed).toBe(false);
    expect(script("script-src 'self' 'unsafe-inline'").allowed).toBe(false);
    expect(script("script-src 'self'", new URL('https://shop.example/window/v1/loader.js')).allowed).toBe(true);
    expect(script("SCRIPT-SRC 'SELF' HTTPS://CHAT.EXAMPLE.COM").allowed).toBe(true);
  });

  test("'strict-dynamic' ignores host sources; a matching nonce still lets the tag run", () => {
    expect(script("script-src 'strict-dynamic' 'nonce-abc' https://chat.example.com").allowed).toBe(false);
    expect(script("script-src 'strict-dynamic' 'nonce-abc' https://chat.example.com", loader, 'abc').allowed).toBe(true);
    expect(script("script-src 'nonce-abc'", loader, 'abd').allowed).toBe(false);
  });

  test('several policies: each must allow; a comma separates policies in one header', () => {
    const policies = parsePolicies("script-src *, script-src 'self'", 'header');
    expect(policies).toHaveLength(2);
    const refusal = firstRefusal(policies, 'script', loader, page);
    expect(refusal?.directive).toBe('script-src');
    expect(refusal?.policy.text).toBe("script-src 'self'");
    expect(firstRefusal(parsePolicies('script-src https://chat.example.com; frame-src https://chat.example.com', 'meta'), 'frame', panel, page)).toBeNull();
  });

  test('the first of two equal directives counts, as in browsers', () => {
    expect(script("script-src https://chat.example.com; script-src 'none'").allowed).toBe(true);
  });
});
