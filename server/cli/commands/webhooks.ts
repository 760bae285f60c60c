import { CliError, Command, required } from '../args';

function optional(flags: Record<string, string | true>, name: string): string | undefined {
  const v = flags[name];
  if (v === true) throw new CliError(`--${name} needs a value`);
  return v;
}

export const webhookCommands: Record<string, Command> = {
  'webhook set': async (rt, args) => {
    const result = await rt.services.webhooks.setEndpoint(required(args, 'site'), required(args, 'url'), optional(args.flags, 'events'));
    const text = result.secret
      ? `event address ${result.id}: ${result.url}\nevents: ${result.events.join(', ')}\n\nsigning secret (shown once, set it in your receiver):\n\n  ${result.secret}\n`
      : `event address ${result.id} updated: ${result.url}\nevents: ${result.events.join(', ')}\nthe signing secret is unchanged (webhook rotate-secret makes a new one)`;
    return { json: result, text };
  },

  'webhook rotate-secret': async (rt, args) => {
    const result = await rt.services.webhooks.rotateSecret(required(args, 'site'));
    return {
      json: result,
      text: `new signing secret of ${result.id} (the old one stopped working now; shown once):\n\n  ${result.secret}\n`,
    };
  },

  'webhook roll-secret': async (rt, args) => {
    const hours = optional(args.flags, 'switch-in-hours');
    const result = await rt.services.webhooks.rollSecret(required(args, 'site'), hours === undefined ? undefined : Number(hours));
    return {
      json: result,
      text: `new signing secret of ${result.id} (shown once; add it to your receiver beside the current one):\n\n  ${result.secret}\n\ndeliveries stay signed with the current secret until ${result.switchAt}, then with this one (webhook switch-secret switches sooner)`,
    };
  },

  'webhook switch-secret': async (rt, args) => {
    const result = await rt.services.webhooks.switchSecret(required(args, 'site'));
    return { json: result, text: `attempts of ${result.id} signed from ${result.switchAt} on carry the new secret; the old one is dropped then` };
  },

  'webhook cancel-roll': async (rt, args) => {
    const result = await rt.services.webhooks.cancelSecretRoll(required(args, 'site'));
    return { json: result, text: `the pending roll of ${result.id} is cancelled; the current secret keeps signing` };
  },

  'webhook deliveries': async (rt, args) => {
    const limit = optional(args.flags, 'limit');
    const deliveries = await rt.services.webhooks.deliveries(required(args, 'site'), {
      event: optional(args.flags, 'event'),
      failed: args.flags.failed === true,
      limit: limit ? Number(limit) : undefined,
    });
    const text =
      deliveries
        .map(
          (d) => `${d.startedAt}  ${d.eventId}  #${d.attempt}  ${d.status ?? '---'}  ${d.durationMs} ms  ${d.error ?? ''}  (${d.deliveryStatus ?? 'removed'})`,
        )
        .join('\n') || '(no delivery attempts)';
    return { json: { deliveries }, text };
  },

  'webhook redeliver': async (rt, args) => {
    const service = rt.services.webhooks;
    const eventId = optional(args.flags, 'event');
    const since = optional(args.flags, 'failed-since');
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
};
