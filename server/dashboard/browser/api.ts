/**
 * The dashboard's one way to the server: openapi-fetch typed from openapi/manage.yaml
 * (server/manage/generated/api.ts), and `call`, which every page uses. `call` unwraps the answer's
 * `data` or throws an ApiFailure carrying the envelope's `error.code` and `message`. A 401 (the
 * session ended: idle, expired, signed out elsewhere) does not reach the page: the app's sign-in
 * dialog opens over the page, which keeps whatever it holds, and the call is sent again once
 * signed in (see `whenSignedOut`). The live stream shares the dialog across tabs: when one tab's
 * stream meets the 401, the other tabs ask too, and a sign-in in any tab closes every tab's dialog
 * (`signInAgain`, `signedInElsewhere`, called by live/hub.ts).
 */
import createClient from 'openapi-fetch';
import type { components, paths } from '../../manage/generated/api';

export type Schemas = components['schemas'];
export type ErrorCode = Schemas['Error']['code'];
export type Me = Schemas['MeResponse']['data'];
export type MySite = Schemas['MySite'];
export type Role = Schemas['Role'];

/** Same-origin cookies (the session is `__Host-session`, HttpOnly); no Authorization header. */
export const client = createClient<paths>({ baseUrl: '/manage/v1', credentials: 'same-origin' });

/** A call that failed, with the envelope's code and message (or ours for a network failure). */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode | 'network_error' | 'unexpected_answer',
    message: string,
    readonly requestId: string | null = null,
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
   * A 401 opens the sign-in dialog and retries (true, the default). False for the calls whose 401
   * means something else: signing in itself (a wrong password), and the first /me (not signed in).
   */
  signIn?: boolean;
}

/** How a sign-in dialog ended well: signed in as `accountId` in this tab's dialog, or in another tab's. */
export interface SignedInAgain {
  accountId: string;
  here: boolean;
}

/** The app's sign-in dialog, registered by app.tsx. */
export interface SessionDialog {
  /** Opens it; resolves once signed in (here or in another tab), rejects when the person gave up. */
  open(): Promise<SignedInAgain>;
  /** Another tab of this browser signed in as `accountId` (the cookie is shared): the open dialog closes as if signed in here. */
  signedInElsewhere(accountId: string): void;
}

let dialog: SessionDialog | undefined;
/** One dialog for every call (and every tab's notice) that met the ended session meanwhile. */
let pending: Promise<SignedInAgain> | undefined;

/** The app's handler for an ended session (app.tsx registers its sign-in dialog). */
export function whenSignedOut(handler: SessionDialog): void {
  dialog = handler;
}

/**
 * The session ended: asks the person to sign in again, one dialog for every caller meanwhile.
 * `send` comes here on a 401; the live hub (live/hub.ts) comes here when another tab's stream met
 * the 401, so every tab asks without each making a failing call.
 */
export function signInAgain(): Promise<SignedInAgain> {
  if (!dialog) return Promise.reject(new ApiFailure(401, 'unauthorized', 'You are signed out: sign in to continue.'));
  pending ??= dialog.open().finally(() => (pending = undefined));
  return pending;
}

/** Another tab signed in: this tab's dialog, if open, closes and what waited on it goes on. */
export function signedInElsewhere(accountId: string): void {
  if (pending) dialog?.signedInElsewhere(accountId);
}

function failureOf(answer: Answer<unknown>): ApiFailure {
  const envelope = answer.error as { error?: { code?: ErrorCode; message?: string } } | undefined;
  const { status } = answer.response;
  const requestId = answer.response.headers.get('X-Request-Id');
  if (envelope?.error?.code) return new ApiFailure(status, envelope.error.code, envelope.error.message ?? '', requestId);
  return new ApiFailure(status, 'unexpected_answer', `The service answered ${status} without an explanation.`, requestId);
}

/** Sends `request` (a function, so it can be sent again after a sign-in) and answers the whole body. */
export async function send<D>(request: () => Promise<Answer<D>>, opts: CallOptions = {}): Promise<D> {
  for (;;) {
    let answer: Answer<D>;
    try {
      answer = await request();
    } catch {
      throw new ApiFailure(0, 'network_error', 'The service could not be reached. Check the connection and try again.');
    }
    if (answer.response.ok) return answer.data as D;
    if (answer.response.status === 401 && opts.signIn !== false && dialog) {
      await signInAgain(); // rejects (the person closed the dialog): the call fails like the 401 it met
      continue;
    }
    throw failureOf(answer);
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
    case 'rate_limit_exceeded':
      return `Too many attempts: ${err.message} Wait a moment and try again.`;
    default:
      return err.message || `The service answered ${err.status}.`;
  }
}
