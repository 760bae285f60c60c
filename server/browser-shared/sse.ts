/**
 * The one Server-Sent Events parser of the browser code, shared by the chat window's live
 * connection and the dashboard's inbox stream (both read their stream with fetch(): EventSource
 * cannot send Authorization, nor show a status or resume on any connection). Follows the HTML
 * standard's field rules: `id`, `event`, `data` (lines joined with "\n"), comments (lines starting
 * with ":") ignored, an event dispatched at a blank line, and CR, LF or CRLF as a line end, also
 * when a chunk ends between the CR and the LF.
 */
export interface SseMessage {
  /** The event's own `id` line; undefined when it had none (an ephemeral event: nothing to resume after). */
  id: string | undefined;
  event: string;
  data: string;
}

export function createSseParser(onMessage: (m: SseMessage) => void) {
  let buffer = '';
  let id: string | undefined;
  let event = '';
  let data: string[] = [];
  // A chunk may end between "\r" and "\n": the "\n" that follows is not a second line end.
  let skipLf = false;

  const line = (text: string) => {
    if (text === '') {
      if (data.length) onMessage({ id, event: event || 'message', data: data.join('\n') });
      id = undefined;
      event = '';
      data = [];
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) id = value;
  };

  return {
    push(chunk: string) {
      if (skipLf && chunk.startsWith('\n')) chunk = chunk.slice(1);
      skipLf = false;
      buffer += chunk;
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const c = buffer[i];
        if (c !== '\n' && c !== '\r') continue;
        line(buffer.slice(start, i));
        if (c === '\r') {
          if (i + 1 === buffer.length) skipLf = true;
          else if (buffer[i + 1] === '\n') i++;
        }
        start = i + 1;
      }
      buffer = buffer.slice(start);
    },
  };
}

/** Reads a fetch() answer's body through the parser until it ends (or `stop()` says so after a chunk). */
export async function readSse(body: ReadableStream<Uint8Array>, onMessage: (m: SseMessage) => void, onChunk?: () => boolean | void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = createSseParser(onMessage);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    if (onChunk?.() === false) return;
    parser.push(decoder.decode(value, { stream: true }));
  }
}
