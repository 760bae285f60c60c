import type { Express, Response } from 'express';

/**
 * `res.json` for this app's responses in one write: the body is kept a string, so Node sends the
 * header block and the body together (Express turns bodies over 1,000 characters into a Buffer,
 * which goes out as a second chunk of a writev), with Content-Type and Content-Length set once.
 * Anything Express's own `res.json` would treat differently goes through it unchanged: a
 * conditional request (If-None-Match / If-Modified-Since: freshness, 304), an answer with an ETag
 * or Last-Modified, a Content-Type already chosen, a status without a body (204, 205, 304).
 * The response validator (outside production) wraps `res.json` per request and still sees every body.
 * Library patch 6 (docs/library-patches.md).
 */
export function fastJson(app: Express): void {
  if (app.get('json replacer') || app.get('json spaces') || app.get('json escape')) return; // settings only Express's stringify knows
  const expressJson = app.response.json;
  Object.defineProperty(app.response, 'json', {
    configurable: true,
    writable: true,
    value: function json(this: Response, obj: unknown) {
      const status = this.statusCode;
      const headers = this.req.headers;
      if (
        status === 204 ||
        status === 205 ||
        status === 304 ||
        headers['if-none-match'] !== undefined ||
        headers['if-modified-since'] !== undefined ||
        this.hasHeader('Content-Type') ||
        this.hasHeader('ETag') ||
        this.hasHeader('Last-Modified')
      ) {
        return expressJson.call(this, obj);
      }
      const body = JSON.stringify(obj);
      if (body === undefined) return expressJson.call(this, obj); // undefined, a function: Express's own answer
      this.setHeader('Content-Type', 'application/json; charset=utf-8');
      this.setHeader('Content-Length', Buffer.byteLength(body, 'utf8'));
      this.end(body, 'utf8');
      return this;
    },
  });
}
