import { Writable } from 'node:stream';
import { createApp } from '../../server/app';
import { createMemoryLimiter, RateLimiter } from '../../server/http/rate-limit/limiter';
import { createLogger, Logger } from '../../server/platform/logger';
import type { Services } from '../../server/services';

/**
 * The service's app over existing services, as a test beside the harness's own app needs it (the
 * CLI's runtime, a second instance): answers validated, always ready, silent unless given a logger.
 */
export function testApp(services: Services, limiter: RateLimiter = createMemoryLimiter(300), logger: Logger = createLogger('silent')) {
  return createApp({ services, logger, limiter, validateResponses: true, ready: async () => true });
}

/**
 * The same with its log written to memory at level info, for tests of what the log says (and never
 * says): `lines()` are the JSON lines written so far.
 */
export function loggedApp(services: Services, limiter: RateLimiter) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { app: testApp(services, limiter, createLogger('info', sink)), lines: () => [...lines] };
}
