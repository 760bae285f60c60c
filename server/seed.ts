import type { Services } from './services';

/**
 * First start on an empty SQLite DATA_DIR (not in production): a demo site with a few
 * conversations, one with an attachment and one closed, and a demo key printed once.
 */
export async function seedDemo(services: Services): Promise<{ siteId: string; key: string } | null> {
  if (await services.access.hasSites()) return null;
  const site = await services.access.createSite('Demo site');
  const key = await services.access.createKey(site.id, ['conversations:read', 'conversations:write', 'media:read'], 'demo');
  const w = services.window.chat;

  const a = await w.visitorSay(site.id, 'visitor-ada', 'Hi! Do you ship to Norway?');
  await w.agentSay(a.conversation.id, 'Hello Ada, yes: 3 to 5 working days.');
  await w.visitorSay(site.id, 'visitor-ada', 'Great, thanks.');

  const pixel = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
  await w.visitorSay(site.id, 'visitor-bob', 'My order arrived damaged, photo attached.', {
    files: [{ buffer: pixel, originalName: 'damage.png', mimeType: 'image/png' }],
  });

  const c = await w.visitorSay(site.id, 'visitor-cy', 'How do I reset my password?');
  await w.agentSay(c.conversation.id, 'Use "Forgot password" on the sign-in page.');
  await services.conversations.close(site.id, c.conversation.id);
  return { siteId: site.id, key: key.key };
}
