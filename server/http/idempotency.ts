import type { RequestHandler } from 'express';
import fs from 'node:fs';
import { createHash } from 'node:crypto';
import { ApiError } from '../platform/errors';
import type { IdempotencyService, ReplayScope } from '../idempotency/service';
import type { UploadedFile } from './bodies';
import { sendError } from './error-handler';
import './request-context';

async function fileDigest(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Each file's name, declared type and content, in order: the same bytes under another name or type
 * are another request (the message would show another attachment). Empty without files, so a JSON
 * request's fingerprint is what it was before files counted by name (keys recorded then still match).
 */
async function filesFingerprint(files: UploadedFile[]): Promise<string> {
  if (files.length === 0) return '';
  const described = await Promise.all(files.map(async (f) => ({ name: f.originalname, type: f.mimetype, sha256: await fileDigest(f.path) })));
  return canonical(described);
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

type Req = Parameters<RequestHandler>[0];

/** A path's conversation id as it may be stored: ids are short words (a longer or odd one names no conversation). */
const STORABLE_ID = /^[A-Za-z0-9_]{1,40}$/;

/**
 * Where the public reply's replays show: the conversation of the path on the key's site (the site
 * comes from the credential, so even a replayed error names the caller's own site).
 */
export const publicReplayScope = (req: Req): ReplayScope | undefined =>
  req.principal && STORABLE_ID.test(String(req.params.id))
    ? { siteId: req.principal.siteId, conversationId: String(req.params.id), apiKeyId: req.principal.keyId, accountId: null }
    : undefined;

/**
 * The inbox reply's replays: the site in the path is the caller's claim, checked by the handler
 * after this middleware, so only a replayed success (a message the member wrote there) is noted.
 */
export const inboxReplayScope = (req: Req, status: number): ReplayScope | undefined =>
  req.manager && status >= 200 && status < 300 && STORABLE_ID.test(String(req.params.siteId)) && STORABLE_ID.test(String(req.params.conversationId))
    ? { siteId: String(req.params.siteId), conversationId: String(req.params.conversationId), apiKeyId: null, accountId: req.manager.accountId }
    : undefined;

/**
 * Idempotency-Key on the reply: a repeat answers the recorded answer with Idempotent-Replayed,
 * a concurrent repeat is 409, another request under the same key is 422. The handler records a
 * success in its own transaction (req.idempotency.completeIn); other answers are recorded here.
 * `normalise` fills in the document's defaults, so `{content}` and `{content, format: 'plain'}`
 * count as the same request. Each replay is noted for the conversation's timeline (a 409 for a
 * repeat while the first runs is not a replay and is not noted).
 */
export function idempotency(
  service: IdempotencyService,
  normalise: (body: unknown) => unknown = (b) => b,
  /** Whose keys these are: the API key by default; the management API's inbox passes the account. */
  ownerOf: (req: Req) => string | undefined = (req) => req.principal?.keyId,
  /** Where a replay is noted for the conversation's timeline (undefined: nowhere). */
  replayScope: (req: Req, status: number) => ReplayScope | undefined = publicReplayScope,
): RequestHandler {
  return async (req, res, next) => {
    const key = req.headers['idempotency-key'];
    const owner = ownerOf(req);
    if (typeof key !== 'string' || !owner) return next();
    try {
      const fingerprint = createHash('sha256')
        .update(`${req.method} ${req.baseUrl}${req.path}\n${canonical(normalise(req.body ?? null))}\n`)
        .update(await filesFingerprint(req.uploadedFiles ?? []))
        .digest('hex');
      const begun = await service.begin(owner, key, fingerprint);
      if (begun.kind === 'replay') {
        res.setHeader('Idempotent-Replayed', 'true');
        res.status(begun.status).type('application/json').send(begun.body);
        // Noted for the timeline, written with other notes shortly after (the replay waits for no write).
        const scope = replayScope(req, begun.status);
        if (scope) service.noteReplay(scope, begun);
        return;
      }
      const handle = begun.handle;
      req.idempotency = handle;
      const json = res.json.bind(res);
      res.json = (body: unknown) => {
        handle.finish(res.statusCode, body).then(
          () => json(body),
          (err) => {
            req.log?.error({ err }, 'could not record the idempotent answer');
            json(body);
          },
        );
        return res;
      };
      next();
    } catch (err) {
      if (err instanceof ApiError) return sendError(res, err);
      next(err);
    }
  };
}
