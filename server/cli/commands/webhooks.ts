import { CliError, Command, optional, required, SITE_OPTION } from '../args';
import { ApiError } from '../../platform/errors';

/**
 * The CLI is a process of its own: a server started with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true does
 * not make the CLI accept a private address, so its refusal says where the setting is read.
 */
function withOwnEnvironmentNote(err: unknown): unknown {
  if (err instanceof ApiError && err.message.includes('WEBHOOK_ALLOW_PRIVATE_NETWORKS')) {
    return new ApiError(
      err.code,
      `${err.message} This CLI reads WEBHOOK_ALLOW_PRIVATE_NETWORKS from its own environment, not the server's: run it as WEBHOOK_ALLOW_PRIVATE_NETWORKS=true npm run admin -- webhook set ...`,
      err.details,
    );
  }
  return err;
}

export const webhookCommands: Record<string, Command> = {
  'webhook set': {
    summary: "Sets the site's event address (made with a new signing secret, shown once) and the events sent to it.",
    options: [
      SITE_OPTION,
      { name: 'url', value: 'U', help: 'the https address that receives the events' },
      { name: 'events', value: 'e1,e2', help: 'the events to send (default: every event)' },
    ],
    run: async (rt, args) => {
      const result = await rt.services.webhooks.setEndpoint(required(args, 'site'), required(args, 'url'), optional(args, 'events')).catch((err) => {
        throw withOwnEnvironmentNote(err);
      });
      const text = result.secret
        ? `event address ${result.id}: ${result.url}\nevents: ${result.events.join(', ')}\n\nsigning secret (shown once, set it in your receiver):\n\n  ${result.secret}\n`
        : `event address ${result.id} updated: ${result.url}\nevents: ${result.events.join(', ')}\nthe signing secret is unchanged (webhook rotate-secret makes a new one)`;
      return { json: result, text };
    },
  },

  'webhook rotate-secret': {
    summary: 'Replaces the signing secret at once (the old one stops working now); the new one is shown once.',
    options: [SITE_OPTION],
    run: async (rt, args) => {
      const result = await rt.services.webhooks.rotateSecret(required(args, 'site'));
      return {
        json: result,
        text: `new signing secret of ${result.id} (the old one stopped working now; shown once):\n\n  ${result.secret}\n`,
      };
    },
  },

  'webhook roll-secret': {
    summary: 'Makes a new signing secret (shown once) that takes over after a delay, so receivers can accept both meanwhile.',
    options: [SITE_OPTION, { name: 'switch-in-hours', value: 'H', help: 'hours until deliveries are signed with the new secret' }],
    run: async (rt, args) => {
      const hours = optional(args, 'switch-in-hours');
      const result = await rt.services.webhooks.rollSecret(required(args, 'site'), hours === undefined ? undefined : Number(hours));
      return {
        json: result,
        text: `new signing secret of ${result.id} (shown once; add it to your receiver beside the current one):\n\n  ${result.secret}\n\ndeliveries stay signed with the current secret until ${result.switchAt}, then with this one (webhook switch-secret switches sooner)`,
      };
    },
  },

  'webhook switch-secret': {
    summary: 'Switches a pending roll now: attempts from now on carry the new secret.',
    options: [SITE_OPTION],
    run: async (rt, args) => {
      const result = await rt.services.webhooks.switchSecret(required(args, 'site'));
      return { json: result, text: `attempts of ${result.id} signed from ${result.switchAt} on carry the new secret; the old one is dropped then` };
    },
  },

  'webhook cancel-roll': {
    summary: 'Cancels a pending roll: the current secret keeps signing.',
    options: [SITE_OPTION],
    run: async (rt, args) => {
      const result = await rt.services.webhooks.cancelSecretRoll(required(args, 'site'));
      return { json: result, text: `the pending roll of ${result.id} is cancelled; the current secret keeps signing` };
    },
  },

  'webhook deliveries': {
    summary: 'Lists delivery attempts of the site, newest first.',
    options: [
      SITE_OPTION,
      { name: 'event', value: 'E', help: 'only the attempts of this event id' },
      { name: 'failed', help: 'only failed attempts' },
      { name: 'limit', value: 'N', help: 'at most N attempts' },
    ],
    run: async (rt, args) => {
      const limit = optional(args, 'limit');
      const deliveries = await rt.services.webhooks.deliveries(required(args, 'site'), {
        event: optional(args, 'event'),
        failed: args.flags.failed === true,
        limit: limit ? Number(limit) : undefined,
      });
      const text =
        deliveries
          .map(
            (d) =>
              `${d.startedAt}  ${d.eventId}  #${d.attempt}  ${d.status ?? '---'}  ${d.durationMs} ms  ${d.error ?? ''}  (${d.deliveryStatus ?? 'removed'})`,
          )
          .join('\n') || '(no delivery attempts)';
      return { json: { deliveries }, text };
    },
  },

  'webhook redeliver': {
    summary: 'Queues one event again (--event), or every event of the site that failed since a time (--failed-since with --site).',
    options: [
      { name: 'event', value: 'E', help: 'the event id to deliver again' },
      { name: 'failed-since', value: 'T', help: 'ISO 8601 time: every event that failed since then (needs --site)' },
      SITE_OPTION,
    ],
    run: async (rt, args) => {
      const service = rt.services.webhooks;
      const eventId = optional(args, 'event');
      const since = optional(args, 'failed-since');
      let redelivered: string[];
      if (eventId && !since) {
        redelivered = await service.redeliverEvent(eventId);
      } else if (since && !eventId) {
        const ms = Date.parse(since);
        if (Number.isNaN(ms)) throw new CliError('--failed-since takes an ISO 8601 time, e.g. 2026-11-22T00:00:00Z');
        redelivered = await service.redeliverFailedSince(required(args, 'site'), ms);
      } else {
        throw new CliError('usage: webhook redeliver --event E  |  webhook redeliver --failed-since T --site S');
      }
      return { json: { redelivered }, text: redelivered.length ? `queued again: ${redelivered.join(', ')}` : 'nothing to redeliver' };
    },
  },
};
