/**
 * The panel's window tokens: from the gateway (anonymous with the visitor's credential, or the
 * signed-in user the host page vouches for), refreshed before they expire, renewed when refused.
 */
import { errorOf, HttpError } from './http';
import type { Panel } from './state';
import type { TokenAnswer, TokenRequest } from './types';

export interface TokenHooks {
  /** A new token names another visitor than the session shown (a revoked anonymous visitor came back as a new one). */
  visitorChanged(): void;
  /** The gateway refused for good while a session was shown. */
  refusedForGood(): void;
}

export function createTokenClient(p: Panel, hooks: TokenHooks) {
  const { state: s, storage } = p;

  function keepCredential(value: string | null) {
    s.credential = value;
    if (value && s.interacted && !s.identity) storage.set(p.credentialKey, value);
  }

  function scheduleRefresh(afterSeconds: number) {
    clearTimeout(s.refreshTimer);
    s.refreshTimer = setTimeout(refreshToken, Math.max(5, afterSeconds) * 1000);
  }

  const askGateway = (body: TokenRequest) =>
    fetch(`${p.base}/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

  async function issue(): Promise<void> {
    const body: TokenRequest = { hostOrigin: s.hostOrigin! };
    if (s.identity) Object.assign(body, s.identity);
    else {
      // Another tab may have started over as a new visitor: its credential first, so tabs stay one visitor.
      const known = storage.get(p.credentialKey) ?? s.credential;
      if (known) body.visitorCredential = known;
    }
    let res = await askGateway(body);
    if (res.status === 401 && body.visitorCredential) {
      // An expired or foreign credential: start over as a new visitor rather than not at all.
      storage.remove(p.credentialKey);
      s.credential = null;
      delete body.visitorCredential;
      res = await askGateway(body);
    }
    // Identity off, a rotated secret, a refused origin, or anonymous visitors refused: no retry helps.
    if (!res.ok) throw await errorOf(res, [400, 401, 403, 404].includes(res.status));
    take((await res.json()).data);
  }

  function take(t: TokenAnswer) {
    s.token = t.token;
    s.visitorId = t.visitorId;
    keepCredential(t.visitorCredential);
    scheduleRefresh(t.refreshAfter);
  }

  /** A longer-lived token for the same session, or else one from the gateway. */
  async function obtain(refresh: boolean): Promise<void> {
    if (refresh && s.token) {
      try {
        const res = await fetch(`${p.base}/token/refresh`, { method: 'POST', headers: { Authorization: `Bearer ${s.token}` } });
        if (res.ok) return take((await res.json()).data);
      } catch {
        // offline: the gateway answers below
      }
    }
    await issue();
  }

  /**
   * A new token, one request at a time for every caller (the stream, sends, the timer). A revoked
   * anonymous visitor comes back as a new visitor: the window then shows that visitor's session,
   * never the old one's history. A refusal for good ends the session instead of retrying for ever.
   */
  function renew(refresh = false): Promise<void> {
    s.renewing ??= obtain(refresh).then(
      () => {
        s.renewing = null;
        if (s.session && s.visitorId !== s.sessionVisitor) hooks.visitorChanged();
      },
      (err) => {
        s.renewing = null;
        if (err instanceof HttpError && err.final && s.session) hooks.refusedForGood();
        throw err;
      },
    );
    return s.renewing;
  }

  function refreshToken() {
    renew(true).catch((err) => {
      if (!(err instanceof HttpError && err.final)) scheduleRefresh(10);
    });
  }

  /** A call with the window token; a refused token is renewed once. */
  async function api(path: string, init: RequestInit = {}, signal?: AbortSignal): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      const headers = new Headers(init.headers);
      headers.set('Authorization', `Bearer ${s.token}`);
      const res = await fetch(`${p.base}${path}`, { ...init, headers, signal, cache: 'no-store' });
      if (res.status !== 401 || attempt > 0) return res;
      await renew();
    }
  }

  return { issue, renew, api, keepCredential };
}

export type TokenClient = ReturnType<typeof createTokenClient>;
