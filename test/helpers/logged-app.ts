import { Writable } from 'node:stream';
import { createApp } from '../../server/app';
import type { RateLimiter } from '../../server/http/rate-limit/limiter';
import { createLogger } from '../../server/platform/logger';
import type { Services } from '../../server/services';

/**
 * The service's app with its log written to memory at level info, for tests of what the log says
 * (and never says): `lines()` are the JSON lines written so far.
 */
export function loggedApp(services: Services, limiter: RateLimiter) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const app = createApp({ services, logger: createLogger('info', sink), limiter, validateResponses: true, ready: async () => true });
  return { app, lines: () => [...lines] };
}
