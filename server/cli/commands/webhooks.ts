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

  'webhook deliveries': async (rt, args) => {
    const limit = optional(args.flags, 'limit');
    const deliveries = await rt.services.webhooks.deliveries(required(args, 'site'), {
      event: optional(args.flags, 'event'),
      failed: args.flags.failed === true,
      limit: limit ? Number(limit) : undefined,
    });
    const text =
      deliveries
        .map((d) => `${d.startedAt}  ${d.eventId}  #${d.attempt}  ${d.status ?? '---'}  ${d.durationMs} ms  ${d.error ?? ''}  (${d.deliveryStatus ?? 'removed'})`)
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
