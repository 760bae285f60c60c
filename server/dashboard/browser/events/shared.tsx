/**
 * Small pieces the event address, the delivery log and the timeline share: an outcome tag, a
 * duration, and the envelope's validation details, which `call` (api.ts) does not keep.
 */
import type { Schemas } from '../api';

type Detail = Schemas['ErrorDetail'];

/**
 * Wraps a request so that, when it fails, the envelope's `details` (each problem with its path,
 * `/body/url`) stay readable for the form: `call(w.request)`, then `w.details()` in the catch.
 */
export function keepDetails<A extends { error?: unknown; response: Response }>(request: () => Promise<A>) {
  let details: Detail[] = [];
  return {
    request: async () => {
      const answer = await request();
      details = answer.response.ok ? [] : ((answer.error as { error?: { details?: Detail[] } } | undefined)?.error?.details ?? []);
      return answer;
    },
    /** Problems by field: the last part of each path under /body or /query (`url`, `events`, `since`). */
    byField: () => {
      const out: Record<string, string> = {};
      for (const d of details) {
        const field = /^\/(?:body|query)\/([A-Za-z]+)/.exec(d.path)?.[1] ?? '';
        out[field] = out[field] ? `${out[field]}; ${d.message}` : d.message;
      }
      return out;
    },
  };
}

const OUTCOME: Record<string, string> = { delivered: 'Delivered', failed: 'Failed', pending: 'Pending' };

export const Outcome = ({ outcome }: { outcome: string | null }) => (
  <span class={`tag outcome-${outcome ?? 'none'}`}>{outcome ? (OUTCOME[outcome] ?? outcome) : 'Not sent'}</span>
);

export const duration = (ms: number) => (ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`);

/** A datetime-local value (the person's local time) as an ISO time, or undefined when empty or invalid. */
export function isoOf(local: string): string | undefined {
  const ms = local ? Date.parse(local) : NaN;
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}

export const EVENT_NAMES: Schemas['EventName'][] = ['conversation.started', 'message.created', 'conversation.closed'];

/** Text from the wire (a body, an answer, headers), in a box that scrolls; focusable so a keyboard can scroll it. */
export const Excerpt = ({ text }: { text: string }) => (
  <pre class="excerpt" tabIndex={0}>
    {text}
  </pre>
);
