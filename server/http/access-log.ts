import type { Express, Request, RequestHandler, Response } from 'express';
import type { Logger } from '../platform/logger';
import { requestId } from './headers';
import './request-context';

/** Link signatures never reach the log (the Authorization header is not logged at all). */
export function redactUrl(url: string): string {
  return url.includes('signature=') ? url.replace(/signature=[^&]*/g, 'signature=[redacted]') : url;
}

/**
 * The request id and one access-log line per request, written when the answer is finished (or the
 * connection went away first): `{ req: { id, method, url, remoteAddress }, res: { statusCode },
 * responseTime }`, at info, or at error for a 5xx. Nothing else happens per request: `req.log` (a
 * child logger bound to the request id) is made only when a handler asks for it, and with the level
 * above info (LOG_LEVEL=warn, error or silent) no listener is attached for a line that would not be
 * written. pino-http did all of that on every request, written or not.
 */
export function accessLog(app: Express, logger: Logger): RequestHandler {
  // On this app's request prototype, so a request that never logs pays nothing for it.
  Object.defineProperty(app.request, 'log', {
    configurable: true,
    get(this: Request & { _childLog?: Logger }) {
      return (this._childLog ??= logger.child({ reqId: this.id }));
    },
    set(this: Request & { _childLog?: Logger }, value: Logger) {
      this._childLog = value;
    },
  });
  return (req, res, next) => {
    req.id = requestId(req);
    // 5xx lines are written at error, so anything up to error needs the listener.
    if (logger.isLevelEnabled('error')) {
      const started = Date.now();
      res.once('close', () => writeLine(logger, req, res, started));
    }
    next();
  };
}

function writeLine(logger: Logger, req: Request, res: Response, started: number) {
  const status = res.statusCode;
  const level = status >= 500 ? 'error' : 'info';
  if (!logger.isLevelEnabled(level)) return;
  const completed = res.writableFinished;
  logger[level](
    {
      req: { id: req.id, method: req.method, url: redactUrl(String(req.originalUrl ?? req.url)), remoteAddress: req.socket?.remoteAddress },
      res: { statusCode: status },
      responseTime: Date.now() - started,
    },
    completed ? (level === 'error' ? 'request errored' : 'request completed') : 'request aborted',
  );
}
