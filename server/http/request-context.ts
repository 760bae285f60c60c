import type { Principal } from '../access/service';
import type { IdempotencyHandle } from '../idempotency/service';
import type { Logger } from '../platform/logger';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The request id (X-Request-Id), set first thing by the access log (http/access-log.ts). */
      id: string;
      /** A logger bound to the request id, made when first used. */
      log: Logger;
      /** Who is calling: a key (principal) or a signed media link (no key). */
      principal?: Principal;
      mediaLink?: boolean;
      idempotency?: IdempotencyHandle;
    }
  }
}

export {};
