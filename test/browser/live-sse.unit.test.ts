/**
 * The one SSE parser of the browser code (server/browser-shared/sse.ts), shared by the chat
 * window's stream and the dashboard's inbox stream, both read through fetch() in arbitrary chunks.
 */
import { createSseParser, readSse, SseMessage } from '../../server/browser-shared/sse';

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

test('ephemeral events (no id line) carry no id, beside stored ones', () => {
  const text = 'id: 7\nevent: conversation.seen\ndata: {}\n\nevent: conversation.typing\ndata: {"typing":true}\n\n';
  expect(parse([text])).toEqual([
    { id: '7', event: 'conversation.seen', data: '{}' },
    { id: undefined, event: 'conversation.typing', data: '{"typing":true}' },
  ]);
});

test('a fetch body cut into bytes at every place (CR|LF and multi-byte characters split across chunks) reads the same events', async () => {
  const text = 'id: 1\r\nevent: message\r\ndata: {"content":"héllo ✓"}\r\n\r\nevent: typing\r\ndata: {"typing":true}\r\n\r\n';
  const bytes = new TextEncoder().encode(text);
  const read = async (chunks: Uint8Array[]) => {
    const out: SseMessage[] = [];
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const chunk of chunks) c.enqueue(chunk);
        c.close();
      },
    });
    await readSse(body, (m) => out.push(m));
    return out;
  };
  const whole = await read([bytes]);
  expect(whole).toEqual([
    { id: '1', event: 'message', data: '{"content":"héllo ✓"}' },
    { id: undefined, event: 'typing', data: '{"typing":true}' },
  ]);
  for (let i = 0; i <= bytes.length; i++) expect(await read([bytes.slice(0, i), bytes.slice(i)])).toEqual(whole);
  expect(await read([...bytes].map((b) => Uint8Array.of(b)))).toEqual(whole);
});
