import { Request, Response, Router } from 'express';
import type { components } from './generated/api';
import type { Services } from '../services';
import { invalid } from '../platform/errors';

type Schemas = components['schemas'];
type Body<T extends keyof Schemas> = Schemas[T];
const send = <T extends keyof Schemas>(res: Response, status: number, body: Body<T>) => res.status(status).json(body);

/**
 * The event address, its secrets, the delivery log and a conversation's timeline
 * (openapi/manage.yaml, tags Events and Deliveries). Owners only, except the timeline, which agents
 * read too (`x-role`, checked by the entry before any of these runs); each calls the webhook
 * service the CLI's `webhook` commands call, with the caller as the audit actor.
 */
export function eventRoutes(services: Pick<Services, 'webhooks' | 'timeline'>): Router {
  const { webhooks } = services;
  const router = Router();

  /** The owner behind the request, as an audit actor (the entry has checked the role, `x-role: owner`). */
  async function owner(req: Request) {
    return { manager: req.manager!, clientIp: req.ip ?? null };
  }
  const site = (req: Request) => req.params.siteId as string;
  const time = (value: string | undefined, name: string) => {
    if (value === undefined) return undefined;
    const ms = Date.parse(value);
    if (Number.isNaN(ms)) throw invalid(`${name} must be an ISO 8601 time.`, [{ path: `/query/${name}`, message: 'must be a date-time' }]);
    return ms;
  };

  router.get('/sites/:siteId/event-address', async (req, res) => {
    await owner(req);
    send<'EventAddressResponse'>(res, 200, { data: await webhooks.getEndpoint(site(req)) });
  });

  router.put('/sites/:siteId/event-address', async (req, res) => {
    const actor = await owner(req);
    const { url, events } = req.body as Body<'SetEventAddressRequest'>;
    const set = await webhooks.setEndpoint(site(req), url, events?.join(','), actor);
    const address = await webhooks.getEndpoint(site(req));
    send<'SetEventAddressResponse'>(res, set.secret ? 201 : 200, { data: { address, secret: set.secret } });
  });

  router.patch('/sites/:siteId/event-address', async (req, res) => {
    const actor = await owner(req);
    const { enabled } = req.body as Body<'EventAddressStateRequest'>;
    send<'EventAddressResponse'>(res, 200, { data: await webhooks.setEnabled(site(req), enabled, actor) });
  });

  router.post('/sites/:siteId/event-address/secret/rotate', async (req, res) => {
    const actor = await owner(req);
    send<'RotatedSecretResponse'>(res, 200, { data: await webhooks.rotateSecret(site(req), actor) });
  });

  router.post('/sites/:siteId/event-address/secret/roll', async (req, res) => {
    const actor = await owner(req);
    const { switchInHours } = (req.body ?? {}) as Body<'RollSecretRequest'>;
    send<'RolledSecretResponse'>(res, 200, { data: await webhooks.rollSecret(site(req), switchInHours, actor) });
  });

  router.delete('/sites/:siteId/event-address/secret/roll', async (req, res) => {
    const actor = await owner(req);
    send<'EventAddressResponse'>(res, 200, { data: await webhooks.cancelSecretRoll(site(req), actor) });
  });

  router.post('/sites/:siteId/event-address/secret/switch', async (req, res) => {
    const actor = await owner(req);
    send<'SwitchedSecretResponse'>(res, 200, { data: await webhooks.switchSecret(site(req), actor) });
  });

  router.post('/sites/:siteId/event-address/test', async (req, res) => {
    const actor = await owner(req);
    const { event } = req.body as Body<'TestDeliveryRequest'>;
    send<'TestDeliveryResponse'>(res, 200, { data: await webhooks.sendTest(site(req), event, actor) });
  });

  router.get('/sites/:siteId/deliveries', async (req, res) => {
    await owner(req);
    const q = req.query as { event?: string; outcome?: string; since?: string; until?: string; limit?: number; cursor?: string };
    time(q.since, 'since');
    time(q.until, 'until');
    send<'DeliveryList'>(res, 200, (await webhooks.listDeliveries(site(req), q)) as Body<'DeliveryList'>);
  });

  router.get('/sites/:siteId/deliveries/:eventId', async (req, res) => {
    await owner(req);
    send<'DeliveryResponse'>(res, 200, { data: (await webhooks.getDelivery(site(req), req.params.eventId as string)) as Body<'DeliveryDetail'> });
  });

  router.post('/sites/:siteId/deliveries/:eventId/redeliver', async (req, res) => {
    const actor = await owner(req);
    const queued = await webhooks.redeliverEvent(req.params.eventId as string, { siteId: site(req), actor });
    send<'RedeliveredResponse'>(res, 202, { data: { eventIds: queued } });
  });

  router.get('/sites/:siteId/delivery-recovery', async (req, res) => {
    await owner(req);
    const since = time((req.query as { since: string }).since, 'since')!;
    send<'RecoveryCountResponse'>(res, 200, { data: { since: new Date(since).toISOString(), failed: await webhooks.countFailedSince(site(req), since) } });
  });

  router.post('/sites/:siteId/delivery-recovery', async (req, res) => {
    const actor = await owner(req);
    const since = Date.parse((req.body as Body<'RecoveryRequest'>).since);
    const queued = await webhooks.redeliverFailedSince(site(req), since, actor);
    send<'RedeliveredResponse'>(res, 202, { data: { eventIds: queued } });
  });

  router.get('/sites/:siteId/conversations/:conversationId/timeline', async (req, res) => {
    const q = req.query as { limit?: number; cursor?: string };
    send<'TimelineResponse'>(res, 200, (await services.timeline(site(req), req.params.conversationId as string, q)) as Body<'TimelineResponse'>);
  });

  return router;
}
