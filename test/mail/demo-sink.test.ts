/**
 * The demo's mail sink (scripts/lib/mail-sink.ts): an email sent to its SMTP port is listed on its
 * page, its text escaped and its links clickable.
 */
import nodemailer from 'nodemailer';
import { startMailSink, MailSink } from '../../scripts/lib/mail-sink';

let sink: MailSink;
beforeAll(async () => {
  sink = await startMailSink();
});
afterAll(() => sink?.close());

test('an email sent to the sink shows on its page, escaped', async () => {
  const transport = nodemailer.createTransport(sink.smtpUrl);
  await transport.sendMail({
    from: 'chat@example.test',
    to: 'someone@example.test',
    subject: 'Join <b>Acme</b>',
    text: 'Hello <script>alert(1)</script>\nAccept: https://chat.example.test/dashboard/accept-invitation#token=abc123',
  });
  transport.close();
  const res = await fetch(sink.webUrl);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
  const page = await res.text();
  expect(page).toContain('someone@example.test');
  expect(page).toContain('Join &#60;b&#62;Acme&#60;/b&#62;');
  expect(page).not.toContain('<script>');
  expect(page).not.toContain('<b>');
  expect(page).toContain('<a href="https://chat.example.test/dashboard/accept-invitation#token=abc123"');
});
