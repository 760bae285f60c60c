import { ChatError } from './errors.js';

/** One page of a list, as the service answered it. */
export interface Page<T> {
  data: T[];
  /** Pass as `cursor` to get the next page; null on the last page. */
  nextCursor: string | null;
  hasMore: boolean;
  /** `X-Request-Id` of the answer. */
  requestId: string | null;
}

/**
 * A list that follows the cursor for you. Iterate the items with `for await`, or the pages with
 * `pages()`. Nothing is fetched until you start; every page is one request (with the client's
 * retries), and the cursor keeps the filters the list was made with.
 *
 * ```ts
 * for await (const conversation of chat.conversations.list({ state: 'open' })) { ... }
 * ```
 */
export class Paginator<T> implements AsyncIterable<T> {
  constructor(
    private readonly fetchPage: (cursor: string | undefined) => Promise<Page<T>>,
    private readonly startCursor?: string,
  ) {}

  /** Only the first page (or the page at the `cursor` the list was made with). */
  firstPage(): Promise<Page<T>> {
    return this.fetchPage(this.startCursor);
  }

  /** Every page, one request each, until `hasMore` is false. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let cursor = this.startCursor;
    for (;;) {
      const page = await this.fetchPage(cursor);
      yield page;
      if (!page.hasMore || !page.nextCursor) return;
      if (page.nextCursor === cursor) throw new ChatError('The service answered the same cursor again; stopped to avoid an endless loop.');
      cursor = page.nextCursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.data;
  }

  /** Collects the items into an array; `max` stops early (and fetches no page beyond it). */
  async toArray(options: { max?: number } = {}): Promise<T[]> {
    const max = options.max ?? Infinity;
    const out: T[] = [];
    if (max <= 0) return out;
    for await (const item of this) {
      out.push(item);
      if (out.length >= max) break;
    }
    return out;
  }
}
