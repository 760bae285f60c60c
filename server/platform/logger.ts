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
    destination ?? pino.destination(1),
  );
}

export type Logger = ReturnType<typeof createLogger>;
