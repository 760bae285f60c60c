import type { Principal } from '../access/service';
import type { IdempotencyHandle } from '../idempotency/service';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Who is calling: a key (principal) or a signed media link (no key). */
      principal?: Principal;
      mediaLink?: boolean;
      idempotency?: IdempotencyHandle;
    }
  }
}

export {};
