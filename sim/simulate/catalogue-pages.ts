import { clobMarket, gammaEvent, gammaMarket, type CatalogueEntry } from './catalogue-records.js';

/**
 * The catalogue's pages as the venue answers them, over the listed markets in id (creation) order: Gamma's keyset
 * listing (`/markets/keyset`, `/events/keyset`), its legacy offset listing (`/markets`, `/events`) and CLOB's
 * cursor listing (`/markets`).
 */
export type Answer = { status: number; index: number; body: string; type?: string; headers?: Record<string, string> };

export type PageLimits = {
  /** Legacy Gamma listing: `limit` silently capped at this; an `offset` beyond `gammaMaxOffset` refused with 422. */
  gammaMaxLimit: number;
  gammaMaxOffset: number;
  /** Keyset listing: a larger `limit` is refused with 422. */
  keysetMaxMarkets: number;
  keysetMaxEvents: number;
  clobPageSize: number;
};

type GammaKind = 'markets' | 'events';
const render = (kind: GammaKind, e: CatalogueEntry): Record<string, unknown> => (kind === 'markets' ? gammaMarket(e) : gammaEvent(e));
const refuse = (status: number, error: string): Answer => ({ status, index: -1, body: JSON.stringify({ error }) });
const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string): string => Buffer.from(s, 'base64').toString('utf8');

/** Without `order`, by volume (which moves as markets trade); `order=id` by id; descending unless `ascending=true`. */
export function gammaOffsetPage(list: readonly CatalogueEntry[], kind: GammaKind, q: URLSearchParams, limits: PageLimits): Answer {
  const limit = Math.min(limits.gammaMaxLimit, Math.max(1, Number(q.get('limit') ?? 20) || 20));
  const offset = Math.max(0, Number(q.get('offset') ?? 0) || 0);
  if (offset > limits.gammaMaxOffset) return refuse(422, `offset must be at most ${limits.gammaMaxOffset}`);
  const sign = q.get('ascending') === 'true' ? 1 : -1;
  const rows = [...list].sort(q.get('order') === 'id' ? (a, b) => (a.id - b.id) * sign : (a, b) => (a.volume - b.volume) * sign);
  const body = JSON.stringify(rows.slice(offset, offset + limit).map((e) => render(kind, e)));
  return { status: 200, index: Math.floor(offset / limit), body };
}

/** Rows after the cursor's id, by id; `next_cursor` only when rows remain after this page. */
export function gammaKeysetPage(list: readonly CatalogueEntry[], kind: GammaKind, q: URLSearchParams, limits: PageLimits): Answer {
  if (q.has('offset')) return refuse(422, 'offset is not supported on keyset endpoints; use after_cursor');
  const max = kind === 'markets' ? limits.keysetMaxMarkets : limits.keysetMaxEvents;
  const limit = Number(q.get('limit') ?? 20);
  if (!Number.isInteger(limit) || limit < 1 || limit > max) return refuse(422, `limit must be between 1 and ${max}`);
  const cursor = q.get('after_cursor');
  let after = -1;
  if (cursor !== null) {
    const m = /^id:(\d+)$/.exec(unb64(cursor));
    if (!m) return refuse(400, 'invalid after_cursor');
    after = Number(m[1]);
  }
  const from = list.findIndex((e) => e.id > after);
  const rows = from < 0 ? [] : list.slice(from, from + limit);
  const more = from >= 0 && from + limit < list.length;
  const page: Record<string, unknown> = { [kind]: rows.map((e) => render(kind, e)) };
  if (more) page.next_cursor = b64(`id:${rows.at(-1)!.id}`);
  return { status: 200, index: Math.floor((from < 0 ? list.length : from) / limit), body: JSON.stringify(page) };
}

/** `{data, next_cursor, limit, count}`; the cursor is base64 of the offset, `LTE=` (base64 of -1) after the last. */
export function clobPage(list: readonly CatalogueEntry[], q: URLSearchParams, limits: PageLimits): Answer {
  const offset = Number(unb64(q.get('next_cursor') ?? 'MA=='));
  if (!Number.isInteger(offset) || offset < 0) return refuse(400, 'invalid next_cursor');
  const size = limits.clobPageSize;
  const slice = list.slice(offset, offset + size);
  const next = offset + slice.length >= list.length ? 'LTE=' : b64(String(offset + slice.length));
  const body = JSON.stringify({ data: slice.map(clobMarket), next_cursor: next, limit: size, count: slice.length });
  return { status: 200, index: Math.floor(offset / size), body };
}
