import type { Knex } from 'knex';
import type { Config } from './config';
import { deriveKeys, Keys } from './platform/master-key';
import { createCursorCodec } from './platform/cursor';
import { createAccessStore } from './access/store';
import { createAccessService } from './access/service';
import { createConversationStore } from './conversations/store';
import { createConversationService } from './conversations/service';
import { createMessageStore } from './messages/store';
import { createMessageService } from './messages/service';
import { createMediaStore } from './media/store';
import { createMediaService } from './media/service';
import { createWidgetService } from './widget/service';
import { createIdempotencyStore } from './idempotency/store';
import { createIdempotencyService } from './idempotency/service';

/**
 * The composition root: every store and service, wired once. The HTTP app, the CLI and the
 * worker all build on this, so they share the same rules.
 */
export function createServices(db: Knex, config: Config, master: Buffer, opts: { now?: () => number; onEvents?: () => void } = {}) {
  const now = opts.now ?? Date.now;
  const keys: Keys = deriveKeys(master);
  const cursors = createCursorCodec(keys.cursors);
  const conversationStore = createConversationStore(db);
  const mediaStore = createMediaStore(db);
  const media = createMediaService(mediaStore, {
    dataDir: config.dataDir,
    publicUrl: config.publicUrl,
    linkKey: keys.mediaLinks,
    linkTtlSeconds: config.mediaLinkTtlSeconds,
    now,
  });
  const hooks = { onEvents: () => opts.onEvents?.() };
  const messages = createMessageService({
    db,
    conversations: conversationStore,
    messages: createMessageStore(db),
    media,
    mediaStore,
    cursors,
    now,
    ...hooks,
  });
  return {
    db,
    config,
    keys,
    access: createAccessService(createAccessStore(db), now),
    conversations: createConversationService({ db, store: conversationStore, cursors, now, ...hooks }),
    messages,
    media,
    widget: createWidgetService({ db, conversations: conversationStore, messages, media, now, ...hooks }),
    idempotency: createIdempotencyService(createIdempotencyStore(db), now),
  };
}

export type Services = ReturnType<typeof createServices>;
