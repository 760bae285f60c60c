import type { FuzzCase } from './requests';
import type { WireAnswer, WireOutcome } from './wire';
import type { World } from './world';

/**
 * The decided error codes (docs/api.md, Errors) with the status each maps to, written out here rather than
 * imported from the server, so a change on the server side cannot quietly widen what passes.
 */
export const DECIDED_ERRORS: Record<string, number> = {
  invalid_request: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  not_found: 404,
  method_not_allowed: 405,
  conversation_closed: 409,
  idempotency_key_in_use: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limit_exceeded: 429,
  internal_error: 500,
  service_unavailable: 503,
};

const LEAKY_TEXT = /<html|<!DOCTYPE|\bat [\w.<>]+ \(|node_modules|\.ts:\d+:\d+|ER_[A-Z_]{4,}|SQLITE_[A-Z]+|ECONNREFUSED/;

export function header(answer: WireAnswer, name: string): string | undefined {
  const v = answer.headers[name.toLowerCase()];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** What one document promises of its answers beyond "no 5xx and a well-formed envelope". */
export interface Expectations {
  /** The decided error codes with their statuses. */
  errors: Record<string, number>;
  /** Another site's data in the answer, or an effect on it. */
  leaks(c: FuzzCase, answer: WireAnswer): string[];
  /** The document's further rules (its statuses and schemas, roles, cross-site requests). */
  rules?(c: FuzzCase, answer: WireAnswer): string[];
}

export const publicExpectations = (world: World): Expectations => ({ errors: DECIDED_ERRORS, leaks: (c, answer) => leakProblems(c, answer, world) });

/** Everything that is wrong with one answer; empty when the answer is acceptable. */
export function problemsWith(c: FuzzCase, outcome: WireOutcome, expect: Expectations): string[] {
  if (outcome.kind === 'dropped') return [`no answer: ${outcome.error} after ${outcome.ms} ms`];
  if (outcome.kind === 'aborted') {
    return outcome.serverSocketClosed ? [] : ['the server kept the aborted connection open for 5 s'];
  }
  const { answer } = outcome;
  const problems: string[] = [];
  const text = answer.body.toString('utf8');
  const isHead = c.method === 'HEAD';

  if (answer.status >= 500) problems.push(`status ${answer.status}`);
  if (answer.status < 100 || answer.status > 599) problems.push(`status ${answer.status} is not HTTP`);
  for (const name of Object.keys(answer.headers)) {
    if (name.startsWith('access-control-')) problems.push(`CORS header ${name} (the API sends none)`);
  }
  if (LEAKY_TEXT.test(text)) problems.push('the body shows internals (HTML, a stack trace or a driver error)');

  if (answer.status >= 400) {
    const type = header(answer, 'content-type') ?? '';
    if (!/^application\/json\b/.test(type)) problems.push(`error answer with Content-Type ${JSON.stringify(type)}`);
    if (!isHead) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        problems.push('error body is not JSON');
      }
      if (parsed !== undefined) problems.push(...envelopeProblems(parsed, answer.status, expect.errors));
    }
    if (answer.status === 405 && !header(answer, 'allow')) problems.push('405 without an Allow header');
    if (answer.status === 429 && !(Number(header(answer, 'retry-after')) >= 1)) problems.push('429 without Retry-After >= 1');
  } else if (!isHead && /^application\/json\b/.test(header(answer, 'content-type') ?? '')) {
    try {
      JSON.parse(text);
    } catch {
      problems.push('a JSON success body that does not parse');
    }
  }

  problems.push(...expect.leaks(c, answer), ...(expect.rules?.(c, answer) ?? []));
  return problems;
}

function envelopeProblems(parsed: unknown, status: number, decided: Record<string, number>): string[] {
  const problems: string[] = [];
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isObject(parsed) || Object.keys(parsed).join() !== 'error' || !isObject(parsed.error)) return ['error body is not {error: {...}}'];
  const error = parsed.error;
  const extra = Object.keys(error).filter((k) => !['code', 'message', 'details'].includes(k));
  if (extra.length) problems.push(`error has fields beyond code, message, details: ${extra.join(', ')}`);
  if (typeof error.code !== 'string' || !Object.hasOwn(decided, error.code))
    problems.push(`error.code ${JSON.stringify(error.code)} is not one of the decided codes`);
  else if (decided[error.code] !== status) problems.push(`error.code ${error.code} maps to ${decided[error.code]}, answered ${status}`);
  if (typeof error.message !== 'string' || error.message === '') problems.push('error.message is not a non-empty string');
  if ('details' in error) {
    const ok = Array.isArray(error.details) && error.details.every((d) => isObject(d) && typeof d.path === 'string' && typeof d.message === 'string');
    if (!ok) problems.push('error.details is not a list of {path, message}');
  }
  return problems;
}

/**
 * Site B's data in an answer to a request made with site A's credentials (or none): a B marker in
 * the answer that the request did not carry itself. A request with a key that names one of B's ids
 * must not succeed either (that would be acting on B's conversation). The only way to B's bytes
 * without B's key is B's own signed link, checked to be exactly the one issued.
 */
function leakProblems(c: FuzzCase, answer: WireAnswer, world: World): string[] {
  const sent = [c.target, ...c.headers.map(([, v]) => v), c.body?.toString('latin1') ?? ''].join('\n');
  const hasKey = c.headers.some(([n]) => n.toLowerCase() === 'authorization');
  const bIds = [...world.b.replyConversations, ...world.b.closableConversations, ...world.b.closedConversations, ...world.b.media.map((m) => m.id)];
  const problems: string[] = [];
  const success = answer.status >= 200 && answer.status < 400;
  if (hasKey && success && bIds.some((id) => sent.includes(id))) problems.push(`site A's key acted on site B's id (status ${answer.status})`);
  if (!hasKey && success && c.target.includes('/media/')) {
    const issued = [...world.a.media, ...world.b.media].find(
      (m) => c.target.includes(m.id) && c.target.includes(new URL(m.url).searchParams.get('signature')!),
    );
    if (!issued) problems.push(`a media download without a key and without the issued signature answered ${answer.status}`);
    return problems; // a link is a capability for exactly that file, whichever site it is
  }
  const seen = answer.body.toString('latin1') + '\n' + Object.values(answer.headers).join('\n');
  const leaked = world.bMarkers.filter((m) => seen.includes(m) && !sent.includes(m));
  if (leaked.length) problems.push(`site B's data in the answer: ${leaked.join(', ')}`);
  return problems;
}

export function describeOutcome(outcome: WireOutcome): string {
  if (outcome.kind !== 'answer') return JSON.stringify(outcome);
  const { answer } = outcome;
  const headers = Object.entries(answer.headers)
    .filter(([n]) => /^(content-type|content-length|allow|retry-after|connection|x-request-id|transfer-encoding)$/.test(n))
    .map(([n, v]) => `${n}: ${String(v)}`)
    .join('; ');
  const body = answer.body.subarray(0, 600).toString('utf8');
  return `${answer.status} (${outcome.ms} ms) [${headers}] ${JSON.stringify(body)}${answer.body.length > 600 ? ' ...' : ''}`;
}
