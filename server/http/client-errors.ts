import { STATUS_CODES } from 'node:http';
import type { Server } from 'node:https';
import type { Duplex } from 'node:stream';
import type { ErrorCode } from '../platform/errors';

// Typed, so a code the document does not list fails type-checking here too.
const INVALID: ErrorCode = 'invalid_request';

/** What Node's HTTP parser refuses before Express sees the request, as our envelope (not an empty body). */
function rawAnswer(status: number, message: string): string {
  const body = JSON.stringify({ error: { code: INVALID, message } });
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * Requests the parser refuses (no Host, a malformed request line or header, headers over the size
 * limit, a request that ran out of time) and unknown `Expect` values get the error envelope like
 * every other failure, then the connection closes.
 */
export function answerClientErrorsInEnvelope(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const answer =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? rawAnswer(408, 'The request did not arrive in time.')
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? rawAnswer(431, 'The request headers are too large.')
          : rawAnswer(400, 'The request is not valid HTTP/1.1.');
    // Written, then destroyed: the socket is half-open capable, so end() alone would leave a client
    // that never reads or closes (a slowloris) holding the connection.
    socket.write(answer, () => socket.destroy());
    setTimeout(() => socket.destroy(), 1000).unref(); // a client that does not even read the answer
  });
  server.on('checkExpectation', (_req, res) => {
    const body = JSON.stringify({ error: { code: INVALID, message: 'Only "Expect: 100-continue" is supported.' } });
    res.writeHead(417, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      'Cache-Control': 'no-store',
      Connection: 'close',
    });
    res.end(body);
  });
}
