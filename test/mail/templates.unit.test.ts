import { escapeHtml, html, renderEmail } from '../../server/mail/templates';

/** The templates: every value escaped in HTML, headers kept to one line, links http(s) only. */
test('values are escaped; only markup the module wrote is kept', () => {
  expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  const inner = html`<b>${'<i>x</i>'}</b>`;
  expect(html`<p>${inner}${['<', html`<br />`]}</p>`.value).toBe('<p><b>&lt;i&gt;x&lt;/i&gt;</b>&lt;<br /></p>');
});

test('a notification has both parts, its link and the one-click unsubscribe', () => {
  const e = renderEmail('notification', {
    subject: 'Waiting\r\nX-Injected: 1',
    body: 'line <1>\n\nline 2',
    url: 'https://example.test/c/1',
    unsubscribeUrl: 'https://example.test/u/t',
  });
  expect(e.subject).toBe('Waiting X-Injected: 1');
  expect(e.text).toBe('line <1>\n\nline 2\n\nOpen: https://example.test/c/1\n\nTo stop these emails: https://example.test/u/t\n');
  expect(e.html).toContain('<p>line &lt;1&gt;</p><p>line 2</p>');
  expect(e.html).toContain('<a href="https://example.test/c/1">Open</a>');
  expect(e.unsubscribeUrl).toBe('https://example.test/u/t');
});

test('a link that is not http(s) is dropped, with its unsubscribe header', () => {
  const e = renderEmail('notification', { subject: 's', body: 'b', url: 'javascript:alert(1)', unsubscribeUrl: 'mailto:x@example.test' });
  expect(e.html).not.toContain('href');
  expect(e.unsubscribeUrl).toBeUndefined();
});

test('quoted messages: markdown rendered by the window’s rules in the HTML part, plain in the text part, markup never', () => {
  const hostile = '<script>alert(1)</script> **bold** and `code` [site](https://shop.example/a?b=1&c=2) [bad](javascript:alert(2))\n\n- one\n- two';
  const e = renderEmail('notification', {
    subject: 'New reply',
    body: 'Acme replied:',
    messages: JSON.stringify([
      { author: 'Ann <b>', content: hostile, format: 'markdown' },
      { author: 'You', content: '**not markdown**', format: 'plain' },
      { author: 'You', content: '', format: 'plain' },
    ]),
    footer: 'Reply in the chat.',
  });
  expect(e.html).toContain('<strong>bold</strong>');
  expect(e.html).toContain('<code>code</code>');
  expect(e.html).toContain('<a href="https://shop.example/a?b=1&amp;c=2" rel="noopener noreferrer nofollow">site</a>');
  expect(e.html).toMatch(/<ul>\s*<li><p>one<\/p><\/li><li><p>two<\/p><\/li>\s*<\/ul>/);
  expect(e.html).toContain('<strong>Ann &lt;b&gt;</strong>');
  expect(e.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
  expect(e.html).not.toMatch(/<script|href="javascript:|<b>/i);
  expect(e.html).toContain('<p>**not markdown**</p>'); // a plain message is text, as in the window
  expect(e.html).toContain('<p>(a file)</p>');
  expect(e.text).toContain('Ann <b>: <script>alert(1)</script> bold and code site (https://shop.example/a?b=1&c=2) bad) one two');
  expect(e.text.indexOf('Acme replied:')).toBeLessThan(e.text.indexOf('Ann <b>:'));
  expect(e.text.indexOf('You: (a file)')).toBeLessThan(e.text.indexOf('Reply in the chat.'));
});
