import { Agent, fetch as undiciFetch } from 'undici';
import { createHarness, listenHttps, Harness, HarnessOptions } from '../helpers/harness';
import { createClient, ChatClient, ClientOptions, FetchLike } from '../../sdk/src';

/** One request as the SDK sent it and what came back (or the error). */
export interface Exchange {
  method: string;
  url: string;
  headers: Record<string, string>;
  status: number | null;
  /** The answer's Retry-After header, if any. */
  retryAfter?: string | null;
  error?: unknown;
}

export interface SdkServer {
  h: Harness;
  /** `https://localhost:<port>/api/v1` of the real app on a real HTTPS port. */
  baseUrl: string;
  origin: string;
  ca: string;
  /** A fetch that trusts the test certificate (undici Agent with the CA). */
  fetch: FetchLike;
  /** Every request any `client()` sent, in order. */
  exchanges: Exchange[];
  /** Called with each exchange once answered, before the client sees the answer (a test's clock may move then). */
  onAnswer: ((exchange: Exchange) => void) | null;
  /** A client on the site's all-rights key, with fast back-off; options override. */
  client(options?: Partial<ClientOptions>): ChatClient;
  close(): Promise<void>;
}

/** Fast back-off for tests; Retry-After is still honoured as the service says. */
export const FAST_RETRY = { initialRetryDelayMs: 20, maxRetryDelayMs: 100 };

/** The real app on a fresh database behind a real HTTPS listener, and SDK clients for it. */
export async function startSdkServer(options: HarnessOptions = {}): Promise<SdkServer> {
  const h = await createHarness(options);
  const srv = await listenHttps(h.app);
  const agent = new Agent({ connect: { ca: srv.ca } });
  const tlsFetch: FetchLike = (url, init) => undiciFetch(url, { ...(init as object), dispatcher: agent } as never) as unknown as Promise<Response>;
  const exchanges: Exchange[] = [];
  const recording: FetchLike = async (url, init) => {
    const exchange: Exchange = { method: init.method ?? 'GET', url, headers: { ...(init.headers as Record<string, string>) }, status: null };
    exchanges.push(exchange);
    try {
      const res = await tlsFetch(url, init);
      exchange.status = res.status;
      exchange.retryAfter = res.headers.get('retry-after');
      server.onAnswer?.(exchange);
      return res;
    } catch (err) {
      exchange.error = err;
      throw err;
    }
  };
  const baseUrl = `${srv.url}/api/v1`;
  const server: SdkServer = {
    h,
    onAnswer: null,
    baseUrl,
    origin: srv.url,
    ca: srv.ca,
    fetch: tlsFetch,
    exchanges,
    client: (o = {}) => createClient({ apiKey: h.site.key, baseUrl, fetch: recording, retry: FAST_RETRY, ...o }),
    close: async () => {
      await srv.close();
      await agent.close();
      await h.close();
    },
  };
  return server;
}

export { waitFor } from '../helpers/wait';

/** Rows of the outbox, oldest first: `body` is exactly what the sender POSTs. */
export async function outboxEvents(h: Harness, siteId: string): Promise<{ id: string; name: string; body: string }[]> {
  return h.runtime
    .db('events')
    .where({ site_id: siteId })
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .select('id', 'name', 'body');
}
