/** The dashboard's SSE parser (live/sse.ts): the inbox stream read through fetch() in arbitrary chunks. */
import { createSseParser, SseMessage } from '../../server/dashboard/browser/live/sse';

function parse(chunks: string[]): SseMessage[] {
  const out: SseMessage[] = [];
  const p = createSseParser((m) => out.push(m));
  for (const c of chunks) p.push(c);
  return out;
}

const STREAM = 'retry: 2000\n\nid: 41\nevent: ready\ndata: {"lastEventId":"41"}\n\n: ping\n\nid: 42\nevent: message.created\ndata: {"a":1}\n\n';

test('whole events, comments and retry lines skipped', () => {
  expect(parse([STREAM])).toEqual([
    { id: '41', event: 'ready', data: '{"lastEventId":"41"}' },
    { id: '42', event: 'message.created', data: '{"a":1}' },
  ]);
});

test('the same at every split point, and one character at a time', () => {
  const whole = parse([STREAM]);
  for (let i = 0; i <= STREAM.length; i++) expect(parse([STREAM.slice(0, i), STREAM.slice(i)])).toEqual(whole);
  expect(parse([...STREAM])).toEqual(whole);
});

test('CRLF and CR line ends, split between CR and LF; multi-line data; no space after the colon', () => {
  const crlf = STREAM.replace(/\n/g, '\r\n');
  const whole = parse([STREAM]);
  for (let i = 0; i <= crlf.length; i++) expect(parse([crlf.slice(0, i), crlf.slice(i)])).toEqual(whole);
  expect(parse([STREAM.replace(/\n/g, '\r')])).toEqual(whole);
  expect(parse(['data:a\ndata: b\n\n'])).toEqual([{ id: undefined, event: 'message', data: 'a\nb' }]);
});

test('an event without data is not dispatched, and an unfinished one waits', () => {
  expect(parse(['event: x\n\n', 'id: 5\nevent: y\ndata: z\n'])).toEqual([]);
});
