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
  /** Gamma's `limit` (the real venue: 500; it may answer fewer). */
  gammaLimit: number;
  /** A paging that has not ended after this many pages stops with an error (a server repeating itself). */
  maxPages: number;
};

export function newPagings(opts: EndpointsOptions): Paging[] {
  return [
    new GammaOffsetPaging('gamma_markets', `${opts.gammaUrl}/markets`, opts.gammaLimit, opts.maxPages),
    new GammaOffsetPaging('gamma_events', `${opts.gammaUrl}/events`, opts.gammaLimit, opts.maxPages),
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

/**
 * Gamma `/markets` and `/events`: `limit` + `offset`, ordered by id ascending. Ids only grow, so a row created
 * while we page is appended after the pages already read instead of shifting rows into them (the default order,
 * by volume, moves rows between pages as they trade: rows repeat and others are skipped). The offset moves by the
 * rows received, not by `limit`, because the venue silently caps `limit` (at 100); for the same reason a page ends
 * the paging only when it is empty or shorter than the longest page seen so far, never merely shorter than `limit`.
 */
export class GammaOffsetPaging implements Paging {
  private offset = 0;
  private longest = 0;
  private pages = 0;

  constructor(
    readonly name: EndpointName,
    private readonly base: string,
    private readonly limit: number,
    private readonly maxPages: number,
  ) {}

  url(): string {
    return `${this.base}?limit=${this.limit}&offset=${this.offset}&order=id&ascending=true`;
  }

  read(body: string): PageRead {
    const parsed = parse(body);
    if (!parsed.ok) return parsed;
    if (!Array.isArray(parsed.value)) return { ok: false, message: 'shape changed: the page is not a JSON array' };
    const n = parsed.value.length;
    this.pages++;
    const done = n === 0 || n < this.longest;
    this.longest = Math.max(this.longest, n);
    this.offset += n;
    if (!done && this.pages >= this.maxPages) return { ok: false, message: `no end after ${this.pages} pages` };
    return { ok: true, records: n, done };
  }
}

/** CLOB `/markets`: `{data: [...], next_cursor}`, followed by `next_cursor` until `LTE=`. */
export class ClobCursorPaging implements Paging {
  readonly name = 'clob_markets' as const;
  private cursor: string | null = null;
  private readonly seen = new Set<string>();
  private pages = 0;

  constructor(
    private readonly base: string,
    private readonly maxPages: number,
  ) {}

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
    const next = 'next_cursor' in v && typeof v.next_cursor === 'string' ? v.next_cursor : '';
    this.pages++;
    const records = v.data.length;
    if (next === '' || next === CLOB_END_CURSOR) return { ok: true, records, done: true };
    // A cursor seen before would page in a circle.
    if (this.seen.has(next)) return { ok: false, message: `the server repeated cursor ${next}` };
    if (this.pages >= this.maxPages) return { ok: false, message: `no end after ${this.pages} pages` };
    this.seen.add(next);
    this.cursor = next;
    return { ok: true, records, done: false };
  }
}
