/**
 * The dashboard's one way to the server: the openapi-fetch client typed from openapi/manage.yaml
 * (client.ts), and `call`, which every page uses. `call` unwraps the answer's `data` or throws an
 * ApiFailure carrying the envelope's `error.code` and `message`. A 401 does not reach the page as
 * such: session.ts judges it by the sign-ins and sign-outs since the call was sent. The session
 * ended: the app's sign-in dialog opens over the page, which keeps whatever it holds, and the call
 * is sent again once signed in (here or in another tab). A sign-in since the call was sent: it is
 * sent again at once. Signed out on purpose: it fails quietly, and the page is the sign-in page.
 * A 403 `reauthentication_required` (an `x-sudo` operation outside the session's 10-minute window)
 * asks for the password (reauth.ts, components/ReauthDialog.tsx) and sends the call again once.
 */
import type { components } from '../../manage/generated/api';
import { client } from './client';
import { afterUnauthorized, currentGeneration } from './session';
import { confirmPassword } from './reauth';

export { client };
export type Schemas = components['schemas'];
export type ErrorCode = Schemas['Error']['code'];
export type Me = Schemas['MeResponse']['data'];
export type MySite = Schemas['MySite'];
export type Role = Schemas['Role'];

/** A call that failed, with the envelope's code and message (or ours for a network failure). */
/** One problem the service named in a request (the envelope's `details`): where, and what. */
export interface FailureDetail {
  /** A JSON pointer into the request, e.g. `/body/week/tue/0`. */
  path: string;
  message: string;
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode | 'network_error' | 'unexpected_answer',
    message: string,
    readonly requestId: string | null = null,
    readonly details: readonly FailureDetail[] = [],
  ) {
    super(message);
    this.name = 'ApiFailure';
  }
}

/** What an openapi-fetch call answers (its typed data and error, and the Response). */
interface Answer<D> {
  data?: D;
  error?: unknown;
  response: Response;
}

export interface CallOptions {
  /**
   * A 401 is judged by session.ts and may open the sign-in dialog (true, the default). False for
   * the calls whose 401 means something else: signing in itself (a wrong password), signing out.
   */
  signIn?: boolean;
}

function failureOf(answer: Answer<unknown>): ApiFailure {
  const envelope = answer.error as { error?: { code?: ErrorCode; message?: string; details?: FailureDetail[] } } | undefined;
  const { status } = answer.response;
  const requestId = answer.response.headers.get('X-Request-Id');
  if (envelope?.error?.code) {
    const details = (envelope.error.details ?? []).filter((d) => typeof d?.path === 'string' && typeof d?.message === 'string');
    return new ApiFailure(status, envelope.error.code, envelope.error.message ?? '', requestId, details);
  }
  return new ApiFailure(status, 'unexpected_answer', `The service answered ${status} without an explanation.`, requestId);
}

/** Sends `request` (a function, so it can be sent again after a sign-in) and answers the whole body. */
export async function send<D>(request: () => Promise<Answer<D>>, opts: CallOptions = {}): Promise<D> {
  let found = 0;
  let reauthenticated = false;
  for (;;) {
    const sentAt = currentGeneration();
    let answer: Answer<D>;
    try {
      answer = await request();
    } catch {
      throw new ApiFailure(0, 'network_error', 'The service could not be reached. Check the connection and try again.');
    }
    if (answer.response.ok) return answer.data as D;
    if (answer.response.status === 401 && opts.signIn !== false) {
      const verdict = await afterUnauthorized(sentAt, answer.response.url);
      // A session the server shows though none was heard of is trusted once per call: a second 401 is real.
      if (verdict === 'sent-again' || (verdict === 'found-session' && found++ === 0)) continue;
      const requestId = answer.response.headers.get('X-Request-Id');
      throw new ApiFailure(401, 'unauthorized', 'You are signed out: sign in to continue.', requestId);
    }
    const failure = failureOf(answer);
    // Once only: a second refusal after a confirmed password is the answer (e.g. a token's session).
    if (failure.code === 'reauthentication_required' && !reauthenticated && (await confirmPassword())) {
      reauthenticated = true;
      continue;
    }
    throw failure;
  }
}

/** The call path of every page: `data` of the answer (undefined for a 204). */
export async function call<D>(request: () => Promise<Answer<D>>, opts?: CallOptions): Promise<D extends { data: infer T } ? T : undefined> {
  const body = await send(request, opts);
  return (body as { data?: unknown } | undefined)?.data as D extends { data: infer T } ? T : undefined;
}

/** A page of a keyset-paged list: its items and where the next page starts. */
export async function callPage<D extends { data: unknown[]; page: { nextCursor: string | null; hasMore: boolean } }>(
  request: () => Promise<Answer<D>>,
  opts?: CallOptions,
): Promise<{ items: D['data']; nextCursor: string | null }> {
  const body = await send(request, opts);
  return { items: body.data, nextCursor: body.page.hasMore ? body.page.nextCursor : null };
}

/**
 * The sentence to show for a failure: the server's message, or ours for codes a person should read
 * differently. `forbidden` keeps the server's: it says why (a role, the last owner, a wrong password).
 */
export function describeFailure(err: unknown): string {
  if (!(err instanceof ApiFailure)) return 'Something went wrong in the page. Reload it and try again.';
  switch (err.code) {
    case 'cross_site_request':
      return 'The service refused this change as coming from another site. Open the dashboard from the service’s own address and try again.';
    case 'reauthentication_required':
      return 'This needs your password confirmed, which was cancelled. Try again and enter your password.';
    case 'rate_limit_exceeded':
      return `Too many attempts: ${err.message} Wait a moment and try again.`;
    default:
      return err.message || `The service answered ${err.status}.`;
  }
}
