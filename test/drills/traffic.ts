import https from 'node:https';
import { call, Service } from './process';

export interface Sample {
  kind: 'read' | 'write';
  start: number;
  end: number;
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
}

/**
 * A few clients reading and replying in a loop until stopped, each answer recorded. After a
 * failure a client pauses briefly, as a real client would, so fast 503s do not spin the CPU.
 */
export function startTraffic(service: Service, key: string, conversationId: string, clients = 4, requestTimeoutMs = 15_000) {
  const agent = new https.Agent({ keepAlive: true, maxSockets: clients });
  const samples: Sample[] = [];
  let running = true;
  const loops = Array.from({ length: clients }, (_, client) =>
    (async () => {
      for (let n = 0; running; n++) {
        const kind: Sample['kind'] = (n + client) % 2 ? 'read' : 'write';
        const start = Date.now();
        const answer =
          kind === 'read'
            ? await call(service, 'GET', `/api/v1/conversations/${conversationId}/messages?limit=5`, { key, agent, timeoutMs: requestTimeoutMs })
            : await call(service, 'POST', `/api/v1/conversations/${conversationId}/messages`, {
                key,
                agent,
                timeoutMs: requestTimeoutMs,
                body: { content: `traffic ${client}-${n}` },
              });
        samples.push({
          kind,
          start,
          end: Date.now(),
          status: answer.status,
          code: answer.json?.error?.code,
          retryAfter: answer.headers['retry-after'] as string | undefined,
        });
        await new Promise((r) => setTimeout(r, answer.status >= 200 && answer.status < 300 ? 20 : 100));
      }
    })(),
  );
  return {
    samples,
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}
