import { createLogger } from './platform/logger';
import type { Knex } from 'knex';
import type { Config } from './config';
import { deriveKeys, Keys } from './platform/master-key';
import { createCursorCodec, type CursorCodec } from './platform/cursor';
import { createAccessStore, type AccessStore } from './access/store';
import { createAccessService } from './access/service';
import { createConversationStore } from './conversations/store';
import { createConversationService } from './conversations/service';
import { createMessageStore } from './messages/store';
import { createMessageService } from './messages/service';
import { createMediaStore } from './media/store';
import { createMediaService } from './media/service';
import { createLocalBlobStore } from './media/blob-store';
import { createVisitorFiles } from './media/visitor-files';
import { createWindowChat } from './window/service';
import { createIdempotencyStore } from './idempotency/store';
import { createIdempotencyService } from './idempotency/service';
import { deriveKey } from './platform/crypto';
import { createWindowStore } from './window/store';
import { createWindowTokens } from './window/tokens';
import { createWindowGateway } from './window/gateway';
import { createFeed } from './window/feed';
import { createLiveHub } from './window/live';
import { createStreamRegistry } from './window/streams';
import type { StreamLeases } from './window/stream-leases';
import { createEventStore } from './webhooks/store';
import { createWebhookService } from './webhooks/service';
import { createDeliveryWorker, DeliveryWorker, WorkerOptions } from './webhooks/worker';
import { withDeliveryLogRetention } from './webhooks/retention';
import { createEventChannel, DELIVERY_KINDS, EventChannel } from './delivery/channel';
import { createOutbox } from './webhooks/outbox';
import { createAccountStore, type AccountStore } from './accounts/store';
import { createPasswordHasher } from './accounts/passwords';
import { createAuditLog } from './accounts/audit';
import { createSecurityLog } from './accounts/security-log';
import { createAccountRegistry } from './accounts/registry';
import { createSignIn } from './accounts/sign-in';
import { createTokens } from './accounts/tokens';
import { createMembers } from './accounts/members';
import { createInvitations } from './accounts/invitations';
import { createSetup } from './accounts/setup';
import { createSiteAdmin } from './sites/service';
import { createEmbedCheck } from './sites/embed-check';
import type { PasswordHasher } from './accounts/passwords';
import { createTimeline } from './webhooks/timeline';
import { createDeliveryTransport } from './webhooks/transport';
import fs from 'node:fs';
import { createInboxStore } from './inbox/store';
import { withInboxActivity } from './inbox/activity';
import { createInboxHub } from './inbox/live';
import { createInboxService } from './inbox/service';
import { createLocalPresence, type Presence } from './inbox/presence';
import { createSearchIndex } from './search/service';
import { createSearchStore } from './search/store';
import { createVisitorStore } from './visitors/store';
import { createReplyNoticeStore } from './visitors/reply-notice-store';
import { createReplyEmails, withReplyNotices } from './visitors/reply-emails';
import { createBusinessHoursStore } from './sites/business-hours-store';
import { createReplyAuthors } from './window/authors';
import { createSharedReplyStore } from './replies/store';
import { createSharedReplies } from './replies/service';
import { createProfile } from './accounts/profile';
import { createNoteStore } from './notes/store';
import { createNotesService } from './notes/service';
import { createInboxRecorder } from './inbox/activity';
import { createVisitorContextStore } from './visitors/context-store';
import { createVisitorContext } from './visitors/context';
import { createVisitorDeletion } from './visitors/deletion';
import { createSeenStore } from './window/seen-store';
import { createLiveSignals } from './window/live-signals';
import { createTagStore } from './tags/store';
import { createTags } from './tags/service';
import { createMailStore } from './mail/store';
import { createMailQueue } from './mail/queue';
import { createMailWorker, mailDir, MailWorkerOptions } from './mail/worker';
import { createMailLog } from './mail/log';
import { createUnsubscribe } from './mail/unsubscribe';
import { createAlertStore } from './agent-alerts/store';
import { createAgentAlerts } from './agent-alerts/service';
import { createAlertCheckWorker } from './agent-alerts/checks';
import { createPasswordReset } from './accounts/password-reset';
import { createPasswordResetStore } from './accounts/reset-store';
import { createEmailVerification, createEmailLinkSender } from './accounts/email-verification';
import { createEmailLinkStore } from './accounts/email-link-store';

/**
 * The composition root: every store and service, wired once. The HTTP app, the CLI and the
 * worker all build on this, so they share the same rules.
 */
export function createServices(
  db: Knex,
  config: Config,
  master: Buffer,
  opts: {
    now?: () => number;
    /** Called whenever the channel hears of committed outbox events, as a delivery worker is (tests wake their worker with it). */
    onEvents?: () => void;
    /**
     * How committed events reach delivery workers and live streams, in this process and (with
     * Redis) the others; runtime.ts makes it from REDIS_URL. Unset: one of this process alone.
     */
    channel?: EventChannel;
    /** Password hashing (tests pass cheaper scrypt parameters; the default is OWASP's). */
    passwordHasher?: PasswordHasher;
    /** Live streams counted across instances (runtime.ts makes it from REDIS_URL). Unset: each process counts its own. */
    streamLeases?: StreamLeases;
    /** Who has a live inbox stream open, across instances (runtime.ts makes it from REDIS_URL). Unset: this process's streams. */
    presence?: Presence;
  } = {},
) {
  const now = opts.now ?? Date.now;
  const channel = opts.channel ?? createEventChannel();
  const onEvents = opts.onEvents;
  if (onEvents) channel.subscribe(() => onEvents(), DELIVERY_KINDS);
  const inboxStore = createInboxStore(db);
  // Every public event is also a row of its site's inbox feed (the dashboard's live streams).
  const visitorStore = createVisitorStore(db);
  const replyNoticeStore = createReplyNoticeStore(db);
  // An agent's reply to a visitor who left an email for replies also starts its reply notice.
  const outbox = withReplyNotices(withInboxActivity(createOutbox(channel), inboxStore), {
    visitors: visitorStore,
    notices: replyNoticeStore,
    delayMs: config.replyEmailDelaySeconds * 1000,
  });
  // Private changes (assignments, read marks, notes, tags, context, seen) to the same feed, one writer for every feature.
  const recordInboxChange = createInboxRecorder({ store: inboxStore, channel, now });
  const keys: Keys = deriveKeys(master);
  const presence = opts.presence ?? createLocalPresence();
  const cursors = createCursorCodec(keys.cursors);
  const conversationStore = createConversationStore(db);
  // The inbox's search: a read model each writer keeps in step in its own transaction.
  const search = createSearchIndex({ store: createSearchStore(db), visitors: visitorStore, conversations: conversationStore });
  const accessStore = createAccessStore(db);
  const eventStore = createEventStore(db);
  const mailStore = createMailStore(db);
  // Queued emails' values are sealed with a key of their own: a link in them may open an account.
  const mailSealKey = deriveKey(master, 'mail-values');
  // Notifications' one-click unsubscribe links: signed, so verifying one needs no stored row.
  const unsubscribe = createUnsubscribe({ key: deriveKey(master, 'unsubscribe-links'), publicUrl: config.publicUrl });
  const mailQueue = createMailQueue({ channel, sealKey: mailSealKey, publicUrl: config.publicUrl });
  const mediaStore = createMediaStore(db);
  const messageStore = createMessageStore(db);
  const idempotencyStore = createIdempotencyStore(db);
  // MEDIA_STORE: this machine's DATA_DIR/media, or a bucket every instance shares. The AWS SDK is
  // loaded only for a bucket: it adds about 0.3 s and 20 MiB to the start of every process.
  const blobs =
    config.media.store === 's3'
      ? (require('./media/s3-store') as typeof import('./media/s3-store')).createS3BlobStore(config.media.s3)
      : createLocalBlobStore(config.dataDir);
  const mediaOptions = {
    blobs,
    maxFileBytes: config.maxAttachmentBytes,
    download: config.media.download,
    publicUrl: config.publicUrl,
    linkKey: keys.mediaLinks,
    linkTtlSeconds: config.mediaLinkTtlSeconds,
    now,
  };
  const media = createMediaService(mediaStore, mediaOptions);
  // On an origin of its own (WINDOW_PUBLIC_URL), the chat window's file links point there and are
  // signed with a key of their own, so they open on that host only (app.ts), never on the API's.
  const windowMedia = config.windowPublicUrl
    ? createMediaService(mediaStore, { ...mediaOptions, publicUrl: config.windowPublicUrl, linkKey: deriveKey(master, 'window-media-links') })
    : media;
  const visitorFiles = createVisitorFiles({ db, limits: config.visitorFiles, now });
  const windowStore = createWindowStore();
  const access = createAccessService(accessStore, now, deriveKey(master, 'identity-secrets'));
  const windowTokens = createWindowTokens(
    { windowTokens: deriveKey(master, 'window-tokens'), visitorCredentials: deriveKey(master, 'window-visitor-credentials') },
    now,
  );
  // The chat window's live streams hear of every committed event on the channel, each event only
  // by the streams of its own visitor; the event store's poll covers what the channel does not carry.
  const live = createLiveHub(eventStore, { now, channel });
  const messageDeps = {
    db,
    conversations: conversationStore,
    messages: messageStore,
    media,
    mediaStore,
    cursors,
    now,
    outbox,
    search,
  };
  const messages = createMessageService(messageDeps);
  /** What the chat window reads and writes through: the same rules, its own file links. */
  const windowMessages = windowMedia === media ? messages : createMessageService({ ...messageDeps, media: windowMedia });
  const conversations = createConversationService({ db, store: conversationStore, cursors, now, outbox });
  const accountStore = createAccountStore(db);
  const emailLinks = createEmailLinkStore(db);
  const resetStore = createPasswordResetStore(db);
  const sendEmailLink = createEmailLinkSender({ links: emailLinks, mail: mailQueue, publicUrl: config.publicUrl, now });
  const accounts = accountServices(accountStore, {
    sites: accessStore,
    cursors,
    publicUrl: config.publicUrl,
    now,
    hasher: opts.passwordHasher,
    // An invitation is emailed to the invited address in the transaction that creates it.
    sendInvitation: async (trx, invitation) => {
      const site = await accessStore.findSite(invitation.siteId, trx);
      const inviter = await accountStore.findAccount(invitation.invitedBy, trx);
      const values = { siteName: site?.name ?? invitation.siteId, role: invitation.role, invitedBy: inviter?.email ?? 'an owner', url: invitation.url };
      return mailQueue.enqueue(trx, { siteId: invitation.siteId, to: invitation.email, template: 'invitation', values }, now());
    },
    // An account made by an invitation or the setup link is emailed the link that verifies its address.
    sendVerification: (trx, accountId, email) => sendEmailLink(trx, accountId, email),
  });
  // Who the chat window says wrote a reply: the agent's name or the site's, by the site's setting.
  const replyAuthors = createReplyAuthors({ sites: accessStore, accounts: accountStore });
  const noteStore = createNoteStore(db);
  const tagStore = createTagStore(db);
  // A site's tags: owners keep the list, members tag conversations; both kinds of change go to the inbox's live streams.
  const tags = createTags({
    store: tagStore,
    audit: accounts.audit.record,
    conversations: conversationStore,
    record: recordInboxChange,
    now,
  });
  // Internal notes: a table of their own, shown to members on the inbox's stream, never to the window or /api/v1.
  const notes = createNotesService({
    db,
    store: noteStore,
    conversations: conversationStore,
    members: accounts.members,
    accounts: accountStore,
    record: recordInboxChange,
    search,
    audit: accounts.audit.record,
    cursors,
    now,
  });
  const alertStore = createAlertStore(db);
  // Agents told of waiting visitors: emails in the visitor message's transaction, and scheduled checks.
  const agentAlerts = createAgentAlerts({
    db,
    store: alertStore,
    presence,
    mail: mailQueue,
    unsubscribe,
    conversations: conversationStore,
    sites: accessStore,
    audit: accounts.audit.record,
    publicUrl: config.publicUrl,
    now,
  });
  const seenStore = createSeenStore(db);
  const visitorContextStore = createVisitorContextStore(db);
  const visitorContext = createVisitorContext({
    db,
    store: visitorContextStore,
    visitors: visitorStore,
    conversations: conversationStore,
    // A stored change of a visitor's context is a row of its site's inbox feed, so agents' side panels follow it live.
    record: recordInboxChange,
    search,
    audit: accounts.audit.record,
    now,
  });
  // Business hours, the window's away state and the visitor's replies by email (docs/window.md, "Away").
  const replyEmails = createReplyEmails({
    db,
    hours: createBusinessHoursStore(db),
    presence,
    visitors: visitorStore,
    context: visitorContext,
    contextStore: visitorContextStore,
    notices: replyNoticeStore,
    conversations: conversationStore,
    messages: messageStore,
    seen: seenStore,
    authors: replyAuthors,
    sites: accessStore,
    mail: mailQueue,
    audit: accounts.audit.record,
    unsubscribeUrl: (siteId, visitorId) => unsubscribe.url({ kind: 'visitor', siteId, visitorId }),
    now,
  });
  // A visitor's one click on a reply email's unsubscribe: no more reply emails (the email stays shown to agents).
  unsubscribe.handle('visitor', async ({ siteId, visitorId }) => {
    await replyEmails.unsubscribe(siteId, visitorId);
  });
  return {
    db,
    config,
    keys,
    /** Where committed events are heard of: delivery workers and the live hub subscribe. */
    channel,
    /**
     * Stores for what runs beside the services: the delivery worker (events), maintenance (media),
     * and a webhook service with an address policy of its own (tests: a fake DNS).
     */
    stores: { access: accessStore, events: eventStore, media: mediaStore, mail: mailStore },
    /** Where media bytes live (MEDIA_STORE): maintenance's retention and orphan sweep, /readyz. */
    blobs,
    /** Outgoing email: `queue.enqueue` in the transaction of the change that sends one (docs/email.md). */
    mail: {
      queue: mailQueue,
      sealKey: mailSealKey,
      /** A site's mail log and its test email (owners, /manage/v1). */
      log: createMailLog({
        db,
        store: mailStore,
        queue: mailQueue,
        sites: accessStore,
        accounts: accountStore,
        audit: accounts.audit.record,
        cursors,
        destination: config.mail.smtpUrl ? new URL(config.mail.smtpUrl).host : mailDir(config.dataDir),
        now,
      }),
    },
    /** Notifications' unsubscribe URLs; the feature owning each kind of subject registers what unsubscribing does. */
    unsubscribe,
    visitors: {
      /** What the site knows of its visitors beyond their ids (names, emails, first and last seen). */
      store: visitorStore,
      /** What the chat window reports of where its visitor is, the identity's attributes, the site's tracking setting, the inbox's side panel. */
      context: visitorContext,
      /** Business hours, the window's away state, the visitor's email for replies and the reply notices' worker. */
      replyEmails,
      /** Deleting a visitor's data (owners, the CLI's `visitor delete`). */
      deletion: createVisitorDeletion({
        db,
        conversations: conversationStore,
        messages: messageStore,
        media: mediaStore,
        discardFiles: (rows) => media.discard(rows),
        visitorFiles,
        window: windowStore,
        visitors: visitorStore,
        context: visitorContextStore,
        // Everything kept per conversation besides its messages, each removed by its owning store.
        parts: [
          { name: 'notes', removeForConversations: (trx, siteId, ids) => noteStore.removeForConversations(trx, siteId, ids) },
          { name: 'tags', removeForConversations: (trx, siteId, ids) => tagStore.removeForConversations(trx, siteId, ids) },
          { name: 'context', removeForConversations: (trx, siteId, ids) => visitorContextStore.removeForConversations(trx, siteId, ids) },
          { name: 'seen', removeForConversations: (trx, siteId, ids) => seenStore.removeForConversations(trx, siteId, ids) },
          { name: 'replyNotices', removeForConversations: (trx, siteId, ids) => replyNoticeStore.removeForConversations(trx, siteId, ids) },
          { name: 'alerts', removeForConversations: (trx, siteId, ids) => alertStore.removeForConversations(trx, siteId, ids) },
          { name: 'events', removeForConversations: (trx, siteId, ids, limit) => eventStore.removeForConversations(trx, siteId, ids, limit) },
          { name: 'inbox', removeForConversations: (trx, siteId, ids) => inboxStore.removeForConversations(trx, siteId, ids) },
          { name: 'search', removeForConversations: async (trx, siteId, ids, limit) => search.removeForConversations(trx, siteId, ids, limit) },
          { name: 'replays', removeForConversations: (trx, siteId, ids) => idempotencyStore.removeForConversations(trx, siteId, ids) },
        ],
        audit: accounts.audit.record,
      }),
    },
    access,
    conversations,
    messages,
    media,
    /** Per site: visitor files on or off, their allowed types, and the site's quotas. */
    visitorFiles,
    /** The chat window's entry: tokens, the visitor's feed and its live wake-ups. */
    window: {
      tokens: windowTokens,
      /** The gateway's rules: the tokens it issues, and whether one may still be used. Its panel is served on WINDOW_PUBLIC_URL when set. */
      gateway: createWindowGateway({
        access,
        tokens: windowTokens,
        now,
        serviceOrigin: new URL(config.windowPublicUrl ?? config.publicUrl).origin,
        recordIdentity: visitorContext.recordIdentity,
      }),
      store: windowStore,
      /** A visitor's and a messenger agent's messages: the window's routes and the CLI's `visitor say` and `agent say`. */
      chat: createWindowChat({
        db,
        conversations: conversationStore,
        messages,
        messageStore,
        media: windowMedia,
        mediaStore,
        visitorFiles,
        window: windowStore,
        now,
        outbox,
        alerts: agentAlerts,
      }),
      feed: createFeed({ conversations: conversationStore, messageStore, messages: windowMessages, mediaStore, authors: replyAuthors }),
      /** The names the window shows on replies (the agent's or the site's). */
      authors: replyAuthors,
      /** The window's messages and files: links on WINDOW_PUBLIC_URL when set (app.ts serves them there). */
      messages: windowMessages,
      media: windowMedia,
      live,
      /** Typing (signals on the channel, never stored) and "seen" (stored, forward only) between the window and the inbox. */
      signals: createLiveSignals({
        db,
        conversations: conversationStore,
        messages: messageStore,
        store: seenStore,
        record: recordInboxChange,
        channel,
        now,
      }),
      /** The open live streams; `streams.closeAll()` on shutdown, or server.close() waits for them. */
      streams: createStreamRegistry({ total: Math.max(1, Math.floor(config.http.maxConnections / 2)), shared: opts.streamLeases?.kind('window') }),
      now,
    },
    idempotency: createIdempotencyService(idempotencyStore, now, {
      onNoteError: (err, dropped) => createLogger(config.logLevel).child({ component: 'idempotency' }).warn({ err, dropped }, 'could not write replay notes'),
    }),
    /** Accounts, roles on sites, sessions, management tokens, invitations, the audit log (/manage/v1 and the CLI), one service a concern. */
    accounts: {
      ...accounts,
      /** Forgot password: a single-use link by email (docs/manage.md). */
      passwordReset: createPasswordReset({
        store: accountStore,
        resets: resetStore,
        hasher: accounts.signIn.hasher,
        securityLog: accounts.securityLog,
        mail: mailQueue,
        publicUrl: config.publicUrl,
        now,
      }),
      /** Verified email and changing it: single-use links to the address (docs/manage.md). */
      emailVerification: createEmailVerification({
        store: accountStore,
        links: emailLinks,
        resets: resetStore,
        send: sendEmailLink,
        hasher: accounts.signIn.hasher,
        securityLog: accounts.securityLog,
        mail: mailQueue,
        now,
      }),
    },
    /** An owner's sites and access keys in /manage/v1: the access service's operations, role-checked and audited. */
    siteAdmin: createSiteAdmin({
      access,
      members: accounts.members,
      audit: accounts.audit.record,
      visitorFiles,
      cursors,
      windowUrl: config.windowPublicUrl ?? config.publicUrl,
    }),
    /** Whether a page of a site carries its snippet and could show the window (owners, /manage/v1); fetched under the event addresses' SSRF rules and CAs. */
    embedCheck: createEmbedCheck({
      access,
      windowUrl: config.windowPublicUrl ?? config.publicUrl,
      publicUrl: config.publicUrl,
      allowPrivateNetworks: config.webhookAllowPrivateNetworks,
      ca: config.webhookCaFile ? [fs.readFileSync(config.webhookCaFile, 'utf8')] : undefined,
    }),
    /** Which members have a live inbox stream open on a site, on any instance. */
    presence,
    /** Members' emails of waiting visitors: their settings (/manage/v1) and the scheduled checks' store. */
    agentAlerts: { service: agentAlerts, store: alertStore },
    /** The dashboard's inbox (/manage/v1): lists, replies, closes, assignments, read marks, and its live streams. */
    inbox: {
      service: createInboxService({
        db,
        store: inboxStore,
        members: accounts.members,
        audit: accounts.audit.record,
        conversations,
        conversationStore,
        messages,
        record: recordInboxChange,
        hub: createInboxHub(inboxStore, { channel }),
        presence,
        rows: { accounts: accountStore, tags },
        now,
      }),
      /** Open inbox streams: 5 per account, a quarter of the connections in all; `closeAll()` on shutdown. */
      streams: createStreamRegistry({ total: Math.max(1, Math.floor(config.http.maxConnections / 4)), shared: opts.streamLeases?.kind('inbox') }),
    },
    /** A site's shared replies: owners keep them, members insert them filled in for a conversation (/manage/v1). */
    replies: createSharedReplies({
      store: createSharedReplyStore(db),
      audit: accounts.audit.record,
      conversations: conversationStore,
      visitors: visitorStore,
      authors: replyAuthors,
      now,
    }),
    /** Event addresses, signing secrets, the delivery log and redelivery (the CLI's `webhook` commands). */
    webhooks: createWebhookService({
      store: eventStore,
      sites: accessStore,
      secretKey: keys.webhookSecrets,
      allowPrivateNetworks: config.webhookAllowPrivateNetworks,
      now,
      db,
      audit: accounts.audit.record,
      cursors,
      // Test deliveries go out like attempts: the same time-out, address policy and CAs.
      transport: () =>
        createDeliveryTransport({
          timeoutMs: config.webhookTimeoutMs,
          allowPrivate: config.webhookAllowPrivateNetworks,
          ca: config.webhookCaFile ? [fs.readFileSync(config.webhookCaFile, 'utf8')] : undefined,
          maxIdleSocketsPerAddress: 1,
        }),
    }),
    /** A conversation's messages, idempotent replays, events and delivery attempts in one list (the management API). */
    timeline: createTimeline({
      conversations: conversationStore,
      messages: messageStore,
      access: accessStore,
      events: eventStore,
      replays: idempotencyStore,
      notes: notes.between,
      cursors,
    }),
    /** A site's tags (owners keep them) and the tags on its conversations (members put them on) (/manage/v1, the CLI's `tag`). */
    tags,
    /** Members' internal notes in conversations (/manage/v1); `store.removeForConversations` for deleting a visitor's data. */
    notes: { service: notes, store: noteStore },
  };
}

export type Services = ReturnType<typeof createServices>;

/**
 * The accounts' services over one store, each given the narrow part of it its concern needs:
 * the audit log, the account's security log, the accounts themselves, sign-in and sessions, management tokens, members and
 * roles, invitations, the first owner's setup link, and the account's display name.
 */
export function accountServices(
  store: AccountStore,
  opts: {
    sites: Pick<AccessStore, 'findSite'>;
    cursors: CursorCodec;
    publicUrl: string;
    now: () => number;
    hasher?: PasswordHasher;
    sendInvitation?: Parameters<typeof createInvitations>[0]['sendInvitation'];
    sendVerification?: Parameters<typeof createInvitations>[0]['sendVerification'];
  },
) {
  const { now, cursors, publicUrl } = opts;
  const hasher = opts.hasher ?? createPasswordHasher();
  const audit = createAuditLog({ store, cursors, now });
  const securityLog = createSecurityLog({ store, cursors, now });
  const registry = createAccountRegistry({ store, hasher, now });
  const signIn = createSignIn({ store, hasher, audit, securityLog, now });
  const members = createMembers({ store, sites: opts.sites, audit, securityLog, now });
  return {
    audit,
    securityLog,
    registry,
    signIn,
    tokens: createTokens({ store, audit, securityLog, now }),
    members,
    invitations: createInvitations({
      store,
      registry,
      signIn,
      hasher,
      audit,
      securityLog,
      cursors,
      publicUrl,
      now,
      sendInvitation: opts.sendInvitation,
      sendVerification: opts.sendVerification,
    }),
    /** The account's own display name. */
    profile: createProfile({ store }),
    setup: createSetup({ store, registry, signIn, audit, publicUrl, now, sendVerification: opts.sendVerification }),
  };
}

/**
 * The event delivery worker over these services' store, configuration and keys: `npm start`
 * (unless EMBEDDED_WORKER=false), `npm run worker` and the tests all make it here. `overrides` sets
 * worker options (a test's short lease, a fake DNS, a second pool's store) or configuration values
 * for this worker alone. The worker also runs the delivery-log retention unless `logRetention` is
 * false (the server passes false: its maintenance runs it).
 */
export function deliveryWorkerFor(
  services: Services,
  logger: WorkerOptions['logger'],
  overrides: Partial<Omit<WorkerOptions, 'config'>> & { config?: Partial<WorkerOptions['config']>; logRetention?: boolean } = {},
): DeliveryWorker {
  const { config, logRetention = true, ...options } = overrides;
  const store = options.store ?? services.stores.events;
  const worker = createDeliveryWorker({
    config: { ...services.config, ...config },
    channel: services.channel,
    secretKey: services.keys.webhookSecrets,
    logger,
    // Automatic disabling is the service's own change: audited with no account (actor `operator`), in its transaction.
    onAutoDisabled: (siteId, endpointId, trx) =>
      services.accounts.audit.record({ manager: null, clientIp: null }, [siteId], 'event_address.disabled.failing', endpointId, trx),
    ...options,
    store,
  });
  return logRetention ? withDeliveryLogRetention(worker, store, logger) : worker;
}

/** The worker of due reply notices (visitors told of late replies), made beside the mail worker. */
export function replyNoticeWorkerFor(
  services: Services,
  logger: MailWorkerOptions['logger'],
  overrides: { pollMs?: number; owner?: string } = {},
): DeliveryWorker {
  return services.visitors.replyEmails.worker({ logger, ...overrides });
}

/**
 * The mail worker over these services' queue, settings and key: made beside the event delivery
 * worker wherever that one runs (`npm start` unless EMBEDDED_WORKER=false, `npm run worker`).
 * `overrides` sets worker options (tests: their relay, short retry pauses).
 */
export function mailWorkerFor(services: Services, logger: MailWorkerOptions['logger'], overrides: Partial<MailWorkerOptions> = {}): DeliveryWorker {
  return createMailWorker({
    store: services.stores.mail,
    mail: services.config.mail,
    dataDir: services.config.dataDir,
    sealKey: services.mail.sealKey,
    channel: services.channel,
    logger,
    ...overrides,
  });
}

/**
 * The scheduled checks of waiting visitors (agents' emails), on the delivery engine: made beside the
 * mail worker wherever it runs. `overrides`: tests' short polls and leases.
 */
export function alertCheckWorkerFor(
  services: Services,
  logger: MailWorkerOptions['logger'],
  overrides: Partial<Omit<Parameters<typeof createAlertCheckWorker>[0], 'store' | 'alerts'>> = {},
): DeliveryWorker {
  return createAlertCheckWorker({ store: services.agentAlerts.store, alerts: services.agentAlerts.service, logger, ...overrides });
}
