/**
 * A complete integration: receive verified events, reply once to each visitor message, never
 * answer its own replies, close idle conversations. In your project import from
 * '@chat-service/sdk' (this file imports the SDK's sources so the repository's tests can run it).
 *
 *   CHAT_API_KEY=wck_... CHAT_KEY_ID=key_... CHAT_BASE_URL=https://chat.example.com/api/v1 \
 *   CHAT_WEBHOOK_SECRET=whsec_... TLS_CERT=cert.pem TLS_KEY=key.pem  npx tsx integration.ts
 */
import fs from 'node:fs';
import https from 'node:https';
import { createClient, createNodeWebhookHandler, type FetchLike, type WebhookReplayStore } from '../src';

export interface IntegrationOptions {
  apiKey: string;
  baseUrl: string;
  webhookSecret: string;
  keyId?: string; // makes loop protection exact from the first event
  idleMinutes?: number;
  seen?: WebhookReplayStore; // share one across processes (Redis, database)
  fetch?: FetchLike;
}

export function createIntegration(options: IntegrationOptions) {
  const chat = createClient({ apiKey: options.apiKey, baseUrl: options.baseUrl, keyId: options.keyId, fetch: options.fetch });
  const stats = { events: 0, replies: 0, skippedOwn: 0 };

  // Verifies every delivery (signature, 5-minute window, id, replay) on the raw body, then runs
  // this listener; a listener that throws answers 500 and the service retries the delivery.
  const handler = createNodeWebhookHandler({ secret: options.webhookSecret, seen: options.seen }, async (event) => {
    stats.events++;
    if (event.event !== 'message.created') return;
    const { conversation, message } = event.data;
    if (chat.isOwnMessage(message)) {
      stats.skippedOwn++; // our own reply coming back as an event: answering it would loop
      return;
    }
    if (message.origin !== 'widget') return; // only visitors get the automatic answer
    await chat.messages.create(
      conversation.id,
      { content: `Thanks for your message! An agent will answer shortly.`, format: 'plain' },
      { idempotencyKey: `auto-reply:${message.id}` }, // once per visitor message, even if delivered twice
    );
    stats.replies++;
  });

  /** Closes the open conversations without a message or change for `idleMinutes`. */
  async function closeIdle(now = new Date()): Promise<number> {
    const updatedBefore = new Date(now.getTime() - (options.idleMinutes ?? 30) * 60_000);
    let closed = 0;
    for await (const conversation of chat.conversations.list({ state: 'open', updatedBefore })) {
      await chat.conversations.close(conversation.id);
      closed++;
    }
    return closed;
  }

  return { chat, handler, closeIdle, stats };
}

if (require.main === module) {
  const env = (name: string) => process.env[name] ?? (console.error(`set ${name}`), process.exit(1));
  const app = createIntegration({
    apiKey: env('CHAT_API_KEY'),
    keyId: process.env.CHAT_KEY_ID,
    baseUrl: env('CHAT_BASE_URL'),
    webhookSecret: env('CHAT_WEBHOOK_SECRET'),
  });
  const tls = { cert: fs.readFileSync(env('TLS_CERT')), key: fs.readFileSync(env('TLS_KEY')) };
  https.createServer(tls, app.handler).listen(Number(process.env.PORT ?? 8444));
  setInterval(() => app.closeIdle().catch((err) => console.error('closeIdle failed', err)), 60_000);
}
