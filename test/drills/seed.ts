import { loadConfig } from '../../server/config';
import { openRuntime } from '../../server/runtime';
import { ALL_SCOPES } from '../helpers/harness';

export interface Seeded {
  siteId: string;
  key: string;
  conversationIds: string[];
  webhookSecret?: string;
}

/**
 * A site, a key with every right and open conversations, written through the services on the
 * database the service will use (same DATA_DIR, so the same master key), then closed again.
 */
export async function seedSite(env: { DATA_DIR: string; DATABASE_URL: string }, opts: { conversations?: number; webhookUrl?: string } = {}): Promise<Seeded> {
  const config = loadConfig({ ...env, LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } as NodeJS.ProcessEnv);
  const runtime = await openRuntime(config);
  try {
    const { services } = runtime;
    const site = await services.access.createSite('Drill shop');
    const key = await services.access.createKey(site.id, ALL_SCOPES);
    let webhookSecret: string | undefined;
    if (opts.webhookUrl) {
      webhookSecret = (await services.webhooks.setEndpoint(site.id, opts.webhookUrl, 'message.created')).secret ?? undefined;
    }
    const conversationIds: string[] = [];
    for (let i = 0; i < (opts.conversations ?? 1); i++) {
      const said = await services.window.chat.visitorSay(site.id, `drill-visitor-${i}`, `Hello from visitor ${i}`);
      conversationIds.push(said.conversation.id);
    }
    return { siteId: site.id, key: key.key, conversationIds, webhookSecret };
  } finally {
    await runtime.close();
  }
}
