import type { Command } from '../admin';
import { CliError, required } from '../args';
import { ApiError } from '../../platform/errors';
import { webhookServiceFor } from '../../events/service';

function unwrap(err: unknown): never {
  if (err instanceof ApiError) throw new CliError(err.message);
  throw err;
}

function optional(flags: Record<string, string | true>, name: string): string | undefined {
  const v = flags[name];
  if (v === true) throw new CliError(`--${name} needs a value`);
  return v;
}

export const webhookCommands: Record<string, Command> = {
  'webhook set': async (rt, args) => {
    const result = await webhookServiceFor(rt)
      .setEndpoint(required(args, 'site'), required(args, 'url'), optional(args.flags, 'events'))
      .catch(unwrap);
    const text = result.secret
      ? `event address ${result.id}: ${result.url}\nevents: ${result.events.join(', ')}\n\nsigning secret (shown once, set it in your receiver):\n\n  ${result.secret}\n`
      : `event address ${result.id} updated: ${result.url}\nevents: ${result.events.join(', ')}\nthe signing secret is unchanged (webhook rotate-secret makes a new one)`;
    return { json: result, text };
  },

  'webhook rotate-secret': async (rt, args) => {
    const result = await webhookServiceFor(rt).rotateSecret(required(args, 'site')).catch(unwrap);
    return {
      json: result,
      text: `new signing secret of ${result.id} (the old one stopped working now; shown once):\n\n  ${result.secret}\n`,
    };
  },

  'webhook deliveries': async (rt, args) => {
    const limit = optional(args.flags, 'limit');
    const deliveries = await webhookServiceFor(rt)
      .deliveries(required(args, 'site'), { event: optional(args.flags, 'event'), failed: args.flags.failed === true, limit: limit ? Number(limit) : undefined })
      .catch(unwrap);
    const text =
      deliveries
        .map((d) => `${d.startedAt}  ${d.eventId}  #${d.attempt}  ${d.status ?? '---'}  ${d.durationMs} ms  ${d.error ?? ''}  (${d.deliveryStatus ?? 'removed'})`)
        .join('\n') || '(no delivery attempts)';
    return { json: { deliveries }, text };
  },

  'webhook redeliver': async (rt, args) => {
    const service = webhookServiceFor(rt);
    const eventId = optional(args.flags, 'event');
    const since = optional(args.flags, 'failed-since');
    let redelivered: string[];
    if (eventId && !since) {
      redelivered = await service.redeliverEvent(eventId).catch(unwrap);
    } else if (since && !eventId) {
      const ms = Date.parse(since);
      if (Number.isNaN(ms)) throw new CliError('--failed-since takes an ISO 8601 time, e.g. 2026-11-22T00:00:00Z');
      redelivered = await service.redeliverFailedSince(required(args, 'site'), ms).catch(unwrap);
    } else {
      throw new CliError('usage: webhook redeliver --event E  |  webhook redeliver --failed-since T --site S');
    }
    return { json: { redelivered }, text: redelivered.length ? `queued again: ${redelivered.join(', ')}` : 'nothing to redeliver' };
  },
};
