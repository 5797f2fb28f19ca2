/**
 * The three catalogue endpoints the poller pages (docs/catalogue-format.md): how each page's URL is built, how a
 * page's records and the next page are read from its body, and when the paging ends.
 */
export const ENDPOINTS = ['gamma_markets', 'gamma_events', 'clob_markets'] as const;
export type EndpointName = (typeof ENDPOINTS)[number];

/** CLOB's last-page cursor: base64 of "-1". */
export const CLOB_END_CURSOR = 'LTE=';

/** What one page's body says: its records and whether another page follows, or why it cannot be used. */
export type PageRead = { ok: true; records: number; done: boolean } | { ok: false; message: string };

/** One endpoint's paging through one poll: `url()` is the page to ask next, `read(body)` moves past it. */
export interface Paging {
  readonly name: EndpointName;
  url(): string;
  read(body: string): PageRead;
}

export type EndpointsOptions = {
  gammaUrl: string;
  clobUrl: string;
  /** Gamma's `limit` per page (the venue takes at most 100 on `/markets/keyset`). */
  gammaLimit: number;
  /** A paging that has not ended after this many pages stops with an error (a server repeating itself). */
  maxPages: number;
};

export function newPagings(opts: EndpointsOptions): Paging[] {
  return [
    new GammaKeysetPaging('gamma_markets', `${opts.gammaUrl}/markets/keyset`, 'markets', opts.gammaLimit, opts.maxPages),
    new GammaKeysetPaging('gamma_events', `${opts.gammaUrl}/events/keyset`, 'events', opts.gammaLimit, opts.maxPages),
    new ClobCursorPaging(`${opts.clobUrl}/markets`, opts.maxPages),
  ];
}

/** The first page's URL of each endpoint, for the poll file's first line. */
export function endpointUrls(opts: EndpointsOptions): Record<EndpointName, string> {
  const out = {} as Record<EndpointName, string>;
  for (const p of newPagings(opts)) out[p.name] = p.url();
  return out;
}

function parse(body: string): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(body) as unknown };
  } catch (err) {
    return { ok: false, message: `not JSON: ${(err as Error).message}` };
  }
}

/** Follows a server's cursors, refusing one it has already given (paging in a circle) and an endless paging. */
class Cursors {
  private readonly seen = new Set<string>();
  pages = 0;
  constructor(private readonly maxPages: number) {}

  /** The page's outcome given its records and next cursor ('' or null: the last page). */
  next(records: number, cursor: string | null): PageRead & { cursor?: string } {
    this.pages++;
    if (cursor === null || cursor === '') return { ok: true, records, done: true };
    if (this.seen.has(cursor)) return { ok: false, message: `the server repeated cursor ${cursor}` };
    if (this.pages >= this.maxPages) return { ok: false, message: `no end after ${this.pages} pages` };
    this.seen.add(cursor);
    return { ok: true, records, done: false, cursor };
  }
}

/**
 * Gamma `/markets/keyset` and `/events/keyset`: `{markets|events: [...], next_cursor}`, the cursor given back as
 * `after_cursor`, no `next_cursor` on the last page. Keyset paging walks a stable key, so a market created while we
 * page comes after the rows already read instead of shifting rows between pages. The venue's offset listing
 * (`/markets?offset=`) is no way to the whole catalogue: it repeats and skips rows while the catalogue changes,
 * caps `limit` at 100 and refuses offsets beyond 10 000.
 */
export class GammaKeysetPaging implements Paging {
  private cursor: string | null = null;
  private readonly cursors: Cursors;

  constructor(
    readonly name: EndpointName,
    private readonly base: string,
    private readonly key: 'markets' | 'events',
    private readonly limit: number,
    maxPages: number,
  ) {
    this.cursors = new Cursors(maxPages);
  }

  url(): string {
    const after = this.cursor === null ? '' : `&after_cursor=${encodeURIComponent(this.cursor)}`;
    return `${this.base}?limit=${this.limit}${after}`;
  }

  read(body: string): PageRead {
    const parsed = parse(body);
    if (!parsed.ok) return parsed;
    const v = parsed.value;
    if (v === null || typeof v !== 'object' || !(this.key in v) || !Array.isArray((v as Record<string, unknown>)[this.key])) {
      return { ok: false, message: `shape changed: the page has no "${this.key}" array` };
    }
    const o = v as Record<string, unknown>;
    const read = this.cursors.next((o[this.key] as unknown[]).length, typeof o.next_cursor === 'string' ? o.next_cursor : null);
    if (read.ok && read.cursor !== undefined) this.cursor = read.cursor;
    return read.ok ? { ok: true, records: read.records, done: read.done } : read;
  }
}

/** CLOB `/markets`: `{data: [...], next_cursor}`, followed by `next_cursor` until `LTE=`. */
export class ClobCursorPaging implements Paging {
  readonly name = 'clob_markets' as const;
  private cursor: string | null = null;
  private readonly cursors: Cursors;

  constructor(
    private readonly base: string,
    maxPages: number,
  ) {
    this.cursors = new Cursors(maxPages);
  }

  url(): string {
    return this.cursor === null ? this.base : `${this.base}?next_cursor=${encodeURIComponent(this.cursor)}`;
  }

  read(body: string): PageRead {
    const parsed = parse(body);
    if (!parsed.ok) return parsed;
    const v = parsed.value;
    if (v === null || typeof v !== 'object' || !('data' in v) || !Array.isArray(v.data)) {
      return { ok: false, message: 'shape changed: the page has no "data" array' };
    }
    const next = 'next_cursor' in v && typeof v.next_cursor === 'string' && v.next_cursor !== CLOB_END_CURSOR ? v.next_cursor : null;
    const read = this.cursors.next(v.data.length, next);
    if (read.ok && read.cursor !== undefined) this.cursor = read.cursor;
    return read.ok ? { ok: true, records: read.records, done: read.done } : read;
  }
}
