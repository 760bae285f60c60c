import { newId } from '../platform/ids';
import { encrypt, randomBase62 } from '../platform/crypto';
import { ApiError, invalid, notFound } from '../platform/errors';
import { EVENT_NAMES, EventName } from './outbox';
import { BlockedIpError, hostOf, resolveChecked, Resolver } from './ssrf';
import { attemptToDto, EndpointRow, EventStore } from './store';
import type { AccessStore } from '../access/store';

export const SECRET_PREFIX = 'whsec_';

/** Parses `e1,e2`; every name must be one of the three events. No list means all of them. */
export function parseEventNames(value: string | undefined): EventName[] {
  if (value === undefined) return [...EVENT_NAMES];
  const names = [...new Set(value.split(',').map((s) => s.trim()).filter(Boolean))];
  const unknown = names.filter((n) => !EVENT_NAMES.includes(n as EventName));
  if (names.length === 0 || unknown.length) throw invalid(`events must be a comma-separated subset of ${EVENT_NAMES.join(', ')}${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}.`);
  return EVENT_NAMES.filter((n) => names.includes(n)); // stable order
}

/**
 * The rules of event addresses, signing secrets and redelivery (docs/events.md).
 * One address per site. The secret is needed to sign, so it is stored encrypted (AES-256-GCM under
 * a key derived from the master key), never as a fingerprint, and shown only when it is made.
 */
export function createWebhookService(deps: {
  store: EventStore;
  sites: Pick<AccessStore, 'findSite'>;
  /** services.keys.webhookSecrets: encrypts the signing secrets at rest. */
  secretKey: Buffer;
  allowPrivateNetworks: boolean;
  resolve?: Resolver;
  now?: () => number;
}) {
  const { store, sites } = deps;
  const now = deps.now ?? Date.now;

  async function checkUrl(raw: string): Promise<string> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw invalid(`"${raw}" is not a URL.`);
    }
    if (url.protocol !== 'https:') throw invalid('An event address must start with https://.');
    if (url.username || url.password) throw invalid('An event address must not carry a user name or password; authenticate deliveries with the signature.');
    if (raw.length > 2048) throw invalid('An event address is at most 2048 characters.');
    url.hash = '';
    const host = hostOf(url);
    try {
      await resolveChecked(host, { allowPrivate: deps.allowPrivateNetworks, resolve: deps.resolve });
    } catch (err) {
      if (err instanceof BlockedIpError) {
        throw invalid(`${host} resolves to a loopback, private, link-local or otherwise reserved IP; event addresses must be public (WEBHOOK_ALLOW_PRIVATE_NETWORKS=true allows them, for development only).`);
      }
      throw invalid(`${host} does not resolve (${(err as { code?: string }).code ?? (err as Error).message}).`);
    }
    return url.toString();
  }

  async function requireSite(siteId: string) {
    if (!(await sites.findSite(siteId))) throw notFound('Site');
  }

  const newSecret = () => SECRET_PREFIX + randomBase62(32);

  return {
    /**
     * Sets the site's address and events. The first time a secret is made and returned; later
     * changes keep the secret (receivers keep verifying) and return `secret: null`; use
     * rotateSecret for a new one.
     */
    async setEndpoint(siteId: string, rawUrl: string, events?: string): Promise<{ id: string; url: string; events: EventName[]; secret: string | null }> {
      await requireSite(siteId);
      const url = await checkUrl(rawUrl);
      const names = parseEventNames(events);
      const at = now();
      const existing = await store.findEndpoint(siteId);
      if (existing) {
        await store.updateEndpoint(existing.id, { url, events: names.join(','), updated_at: at });
        return { id: existing.id, url, events: names, secret: null };
      }
      const secret = newSecret();
      const row: EndpointRow = {
        id: newId('whk', at),
        site_id: siteId,
        url,
        events: names.join(','),
        secret_encrypted: encrypt(deps.secretKey, secret),
        created_at: at,
        updated_at: at,
      };
      await store.insertEndpoint(row);
      return { id: row.id, url, events: names, secret };
    },

    /** A new secret replaces the old one at once: the next attempt is signed with it. */
    async rotateSecret(siteId: string): Promise<{ id: string; secret: string }> {
      const row = await store.findEndpoint(siteId);
      if (!row) throw notFound('Event address of this site');
      const secret = newSecret();
      await store.updateEndpoint(row.id, { secret_encrypted: encrypt(deps.secretKey, secret), updated_at: now() });
      return { id: row.id, secret };
    },

    /** The delivery log, one row per attempt, newest first. `event` is an event id or an event name. */
    async deliveries(siteId: string, filter: { event?: string; failed?: boolean; limit?: number } = {}) {
      await requireSite(siteId);
      const isName = filter.event !== undefined && EVENT_NAMES.includes(filter.event as EventName);
      const limit = filter.limit ?? 100;
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalid('limit must be 1 to 1000.');
      const rows = await store.listAttempts(siteId, {
        eventId: isName ? undefined : filter.event,
        eventName: isName ? filter.event : undefined,
        failedOnly: filter.failed,
        limit,
      });
      return rows.map(attemptToDto);
    },

    /** Sends one event again: same id, same body, attempt numbers continue, a fresh budget of attempts. */
    async redeliverEvent(eventId: string): Promise<string[]> {
      const event = await store.findEvent(eventId);
      if (!event) throw notFound('Event');
      const endpoint = await store.findEndpoint(event.site_id);
      if (!endpoint) throw new ApiError('invalid_request', 'The site of this event has no event address.');
      return (await store.resetForRedelivery(event, endpoint.id, now())) ? [event.id] : [];
    },

    /** Sends again every event of the site created since `since` whose delivery ended failed. */
    async redeliverFailedSince(siteId: string, since: number): Promise<string[]> {
      await requireSite(siteId);
      const endpoint = await store.findEndpoint(siteId);
      if (!endpoint) throw new ApiError('invalid_request', 'This site has no event address.');
      const out: string[] = [];
      for (const event of await store.failedEventsSince(siteId, since)) {
        if (await store.resetForRedelivery(event, endpoint.id, now())) out.push(event.id);
      }
      return out;
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;

