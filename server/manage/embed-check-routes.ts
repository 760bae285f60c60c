import { Router } from 'express';
import type { components } from './generated/api';
import type { RateLimiter } from '../http/rate-limit/limiter';
import { ApiError } from '../platform/errors';
import type { EmbedCheck } from '../sites/embed-check';
import { EMBED_CHECK_LIMITS } from '../sites/embed-check';

type Schemas = components['schemas'];

/**
 * Counts one embed check against the site's budget and the account's, shared by every instance
 * (the shared limiter), so the check cannot be turned into a scanner: allowed origins are declared
 * by the owner, not proven, and any account may make sites, so the site's budget alone would not
 * bound one account. 429 past either.
 */
export async function admitEmbedCheck(limiter: RateLimiter, siteId: string, accountId: string): Promise<void> {
  const refuse = (what: string, limit: number, retryAfterSeconds: number) => {
    const retry = Math.max(1, retryAfterSeconds);
    return new ApiError('rate_limit_exceeded', `At most ${limit} embed checks a minute per ${what}; retry in ${retry} s.`, undefined, {
      'Retry-After': String(retry),
    });
  };
  const { perSitePerMinute, perAccountPerMinute } = EMBED_CHECK_LIMITS;
  const site = await limiter.spend(`manage:embed-check:site:${siteId}`, 1, perSitePerMinute, 60_000);
  if (!site.allowed) throw refuse('site', perSitePerMinute, site.retryAfterSeconds);
  const account = await limiter.spend(`manage:embed-check:account:${accountId}`, 1, perAccountPerMinute, 60_000);
  if (!account.allowed) {
    await site.refund(1);
    throw refuse('account', perAccountPerMinute, account.retryAfterSeconds);
  }
}

/** `POST /sites/{siteId}/embed/check` (openapi/manage.yaml, tag Sites, `x-role: owner`): see server/sites/embed-check.ts. */
export function embedCheckRoutes(check: EmbedCheck, limiter: RateLimiter): Router {
  const router = Router();
  router.post('/sites/:siteId/embed/check', async (req, res) => {
    const { url } = req.body as Schemas['EmbedCheckRequest'];
    const siteId = req.params.siteId;
    const manager = req.manager!;
    const data = await check.check(siteId, url, () => admitEmbedCheck(limiter, siteId, manager.accountId));
    const body: Schemas['EmbedCheckResponse'] = { data };
    res.status(200).json(body);
  });
  return router;
}
