import type { DeliveryStatus } from '../delivery/retry-schedule';
import { withNumericColumns } from '../db/knex';
import type { DeliveryState } from '../delivery/rows';

export type { DeliveryStatus };

/**
 * The row types of event delivery's four tables and their one mapping each (mysql2 may hand BIGINT
 * back as a string), apart from the store so that the store's parts (log-store.ts) share them.
 */

export interface EndpointRow {
  id: string;
  site_id: string;
  url: string;
  events: string; // comma-separated event names
  secret_encrypted: string;
  /** A planned roll's next secret, sealed like the current one, and when it starts signing (address-rules.ts). */
  secret_next_encrypted: string | null;
  secret_switch_at: number | null;
  /** Set while the address is disabled: deliveries then end failed without an attempt. */
  disabled_at: number | null;
  disabled_reason: 'owner' | 'failing' | null;
  /** The failure streak automatic disabling reads: failed deliveries since the last success. */
  failing_since: number | null;
  failure_streak: number;
  created_at: number;
  updated_at: number;
}

export interface DeliveryRow extends DeliveryState {
  event_id: string;
  site_id: string;
  endpoint_id: string;
  /** Why the delivery ended failed without sending in its last round (UNSENT); null otherwise. */
  unsent_reason?: string | null;
}

/**
 * The reasons a claim ends a delivery failed without sending it: no attempt is made, none is
 * counted and none is logged, so the delivery carries the reason itself.
 */
export const UNSENT = {
  disabled: 'event address disabled',
  addressRemoved: 'event address removed',
  eventRemoved: 'event removed',
} as const;

export interface EventRow {
  id: string;
  site_id: string;
  name: string;
  body: string;
  created_at: number;
  /** What the event is about (null for test deliveries and events written before these columns). */
  conversation_id?: string | null;
  message_id?: string | null;
}

/** One attempt in the delivery log (the table adds an auto-increment `id`, used only to sort). */
export interface AttemptRow {
  event_id: string;
  site_id: string;
  endpoint_id: string;
  event_name: string;
  attempt: number;
  url: string;
  started_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_excerpt: string | null;
  /** The request's headers as sent, JSON (the signature is there; the secret never is). */
  request_headers?: string | null;
}

/** The delivery log's columns, in one order: the writer's insert and the log's reads name them from here. */
export const ATTEMPT_COLUMNS = [
  'event_id',
  'site_id',
  'endpoint_id',
  'event_name',
  'attempt',
  'url',
  'started_at',
  'duration_ms',
  'status_code',
  'error',
  'response_excerpt',
  'request_headers',
] as const satisfies readonly (keyof AttemptRow)[];

/** A log row as the log lists it: with the state of its delivery (null once the delivery was removed). */
export interface ListedAttempt extends AttemptRow {
  delivery_status: DeliveryStatus | null;
}

export const mapEndpointRow = (r: Record<string, unknown>) =>
  withNumericColumns(r as unknown as EndpointRow, ['created_at', 'updated_at', 'secret_switch_at', 'disabled_at', 'failing_since', 'failure_streak']);
export const mapEventRow = (r: Record<string, unknown>) => withNumericColumns(r as unknown as EventRow, ['created_at']);
export const mapDeliveryRow = (r: Record<string, unknown>) =>
  withNumericColumns(r as unknown as DeliveryRow, ['attempts', 'round_base', 'next_attempt_at', 'lease_until', 'updated_at']);
export const mapAttemptRow = (r: Record<string, unknown>) =>
  withNumericColumns(r as unknown as AttemptRow, ['attempt', 'started_at', 'duration_ms', 'status_code']);
