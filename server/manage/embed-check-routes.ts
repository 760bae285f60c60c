import { Router } from 'express';
import type { components } from './generated/api';
import type { RateLimiter } from '../http/rate-limit/limiter';
import { ApiError } from '../platform/errors';
import type { EmbedCheck } from '../sites/embed-check';
import { EMBED_CHECK_LIMITS } from '../sites/embed-check';

type Schemas = components['schemas'];

/**
 * Counts one embed check against the site's budget, shared by every owner and instance (the
 * shared limiter), so the check cannot be turned into a scanner of the site's host: 429 past it.
 */
export async function admitEmbedCheck(limiter: RateLimiter, siteId: string): Promise<void> {
  const limit = EMBED_CHECK_LIMITS.perSitePerMinute;
  const spent = await limiter.spend(`manage:embed-check:${siteId}`, 1, limit, 60_000);
  if (!spent.allowed) {
    const retry = Math.max(1, spent.retryAfterSeconds);
    throw new ApiError('rate_limit_exceeded', `At most ${limit} embed checks a minute per site; retry in ${retry} s.`, undefined, {
      'Retry-After': String(retry),
    });
  }
}

/** `POST /sites/{siteId}/embed/check` (openapi/manage.yaml, tag Sites): owners only, see server/sites/embed-check.ts. */
export function embedCheckRoutes(check: EmbedCheck, limiter: RateLimiter): Router {
  const router = Router();
  router.post('/sites/:siteId/embed/check', async (req, res) => {
    const { url } = req.body as Schemas['EmbedCheckRequest'];
    const siteId = req.params.siteId;
    const data = await check.check(req.manager!, siteId, url, () => admitEmbedCheck(limiter, siteId));
    const body: Schemas['EmbedCheckResponse'] = { data };
    res.status(200).json(body);
  });
  return router;
}
