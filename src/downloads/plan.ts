import type { Principal } from '../accounts/principal.js';
import { BadRequest, NotFound, Unprocessable } from '../errors.js';
import type { Query } from '../lake/duckdb.js';
import type { CopyFormat } from '../lake/stream.js';
import { planOf } from '../accounts/plans.js';
import { planKeyOf } from '../catalogue/kinds.js';
import type { MarketResolver } from '../markets/resolver.js';
import type { Window } from '../query/common.js';
import type { CoverageScope } from '../query/coverage.js';
import type { LakeSession } from '../lake/session.js';
import type { Lake } from '../lake/sources.js';
import { catalogueSeries, resolveSeriesId, type CatalogueSeries } from '../markets/series-ids.js';
import {
  l2LevelsDownload,
  ohlcvDownload,
  optionsGreeksDownload,
  optionsTradesDownload,
  orderbookDownload,
  rawFramesDownload,
  tapeTradesDownload,
  topOfBookDownload,
  tradesDownload,
} from '../query/downloads.js';
import { boundaries, intervalBookDownload, tbboDownload } from '../query/computed.js';
import { timeframeOf } from '../timeframe.js';
import { findRawDataset, parseOptionsSeries } from './catalog.js';
import type { PullSpec } from './spec.js';

/**
 * One file pull, whatever asked for it (a GET /v1/download/* call, a bulk line item or an export job): its
 * spec in (./spec.ts), the SELECT to COPY and the names for the file and the history record out.
 */

/** What planning reads: the lake session (market resolution, the series check) and nothing else. */
export type PlanDeps = { lake: LakeSession; markets: MarketResolver };

export type DownloadPlan = {
  query: Query;
  format: CopyFormat;
  /** File name with extension, e.g. trades_1254468.csv. */
  fileName: string;
  /** Plan data set key (src/accounts/plans.ts) the pull counts against. */
  dataset: string;
  description: string;
  marketId?: string | undefined;
  timeframe?: string | undefined;
  start: string | null;
  end: string | null;
  /** The 404 text when the window holds nothing (the anchor client maps these phrasings to NoDataInRange). */
  emptyMessage: string;
  /** Whose tape coverage the pull's days have (./coverage.ts), for data read from the websocket tape only. */
  coverage?: { scope: CoverageScope; window: Window } | undefined;
};

/** Typed 400s with the codes the anchor's client dispatches on. */
export function wrongDataType(code: string, message: string, itemIndex?: number): BadRequest {
  return new BadRequest({ code, message, ...(itemIndex === undefined ? {} : { item_index: itemIndex }) });
}

function iso(micros: bigint | undefined): string | null {
  return micros === undefined ? null : new Date(Number(micros / 1000n)).toISOString();
}

function safeName(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 120);
}

const NO_LIMIT = 2 ** 62;

/** book_snapshot_interval: levels a side when the pull names none. */
export const DEFAULT_BOOK_DEPTH = 10;
/** book_snapshot_interval: boundaries a pull may span (every boundary is a row per outcome). */
export const MAX_BOUNDARIES = 1_000_000;

export async function planDownload(deps: PlanDeps, principal: Principal | undefined, spec: PullSpec, itemIndex?: number): Promise<DownloadPlan> {
  const lake: Lake = deps.lake.sources;
  const w: Window = { start: spec.start, end: spec.end };
  const limit = spec.limit ?? NO_LIMIT;
  const ext = spec.format;
  const base = { format: spec.format, start: iso(spec.start), end: iso(spec.end) };

  const needMarket = async () => {
    if (!spec.market_id) throw wrongDataType('missing_market_id', `a ${spec.kind} download needs market_id`, itemIndex);
    const r = await deps.markets.resolve(deps.lake, spec.market_id);
    const tokens = r.token ? [r.token] : r.tokens;
    return { tokens, tokenIds: tokens.map((t) => t.token_id), conditionId: String(r.market.condition_id ?? '') };
  };

  switch (spec.kind) {
    case 'trades': {
      const m = await needMarket();
      return {
        ...base,
        query: tradesDownload(lake, { tokens: m.tokenIds }, w, limit, spec.format),
        fileName: `trades_${safeName(spec.market_id!)}.${ext}`,
        dataset: 'trades',
        description: `trades market_id=${spec.market_id}`,
        marketId: spec.market_id,
        emptyMessage: 'No trades found for this market in this range',
      };
    }
    case 'ohlcv': {
      const m = await needMarket();
      const tf = spec.timeframe ?? timeframeOf(3600);
      return {
        ...base,
        query: ohlcvDownload(lake, { tokens: m.tokens }, tf, w, limit, spec.format),
        fileName: `ohlcv_${safeName(spec.market_id!)}_${tf.label}.${ext}`,
        dataset: 'ohlcv',
        description: `ohlcv market_id=${spec.market_id} timeframe=${tf.label}`,
        marketId: spec.market_id,
        timeframe: tf.label,
        emptyMessage: 'No OHLCV data found for this market in this range',
      };
    }
    case 'orderbook':
    case 'top_of_book': {
      const m = await needMarket();
      const sel = { tokens: m.tokenIds };
      if (spec.kind === 'orderbook') {
        return {
          ...base,
          query: orderbookDownload(lake, sel, w, limit, spec.format),
          fileName: `orderbook_${safeName(spec.market_id!)}.${ext}`,
          dataset: 'orderbook',
          description: `orderbook market_id=${spec.market_id}`,
          marketId: spec.market_id,
          emptyMessage: 'No orderbook snapshots for this market in this range',
          coverage: { scope: sel, window: w },
        };
      }
      // The Free plan sees top of book only this many minutes behind now (src/accounts/plans.ts).
      const delay = planOf(principal?.plan ?? 'free').top_of_book_delay_minutes;
      let end = spec.end;
      if (delay > 0) {
        const cap = BigInt(Date.now() - delay * 60_000) * 1000n;
        if (end === undefined || end > cap) end = cap;
      }
      return {
        ...base,
        end: iso(end),
        query: topOfBookDownload(lake, sel, { start: spec.start, end }, limit, spec.format),
        fileName: `top_of_book_${safeName(spec.market_id!)}.${ext}`,
        dataset: 'top_of_book',
        description: `top_of_book market_id=${spec.market_id}${delay > 0 ? ` delayed ${delay}m` : ''}`,
        marketId: spec.market_id,
        emptyMessage: 'No priced top-of-book rows for this market in this range',
        coverage: { scope: sel, window: { start: spec.start, end } },
      };
    }
    case 'book_snapshot_interval':
    case 'tbbo': {
      if (spec.start === undefined || spec.end === undefined) {
        throw wrongDataType('missing_window', `a ${spec.kind} pull needs start and end (its rows are computed over the window)`, itemIndex);
      }
      const m = await needMarket();
      const bw = { start: spec.start, end: spec.end };
      const sel = { tokens: m.tokenIds };
      const common = { ...base, marketId: spec.market_id, dataset: planKeyOf(spec.kind), coverage: { scope: sel, window: w } };
      if (spec.kind === 'tbbo') {
        return {
          ...common,
          query: tbboDownload(lake, m.tokenIds, bw, limit, spec.format),
          fileName: `tbbo_${safeName(spec.market_id!)}.${ext}`,
          description: `tbbo market_id=${spec.market_id}`,
          emptyMessage: 'No trades found for this market in this range',
        };
      }
      const tf = spec.timeframe ?? timeframeOf(60);
      const depth = spec.depth ?? DEFAULT_BOOK_DEPTH;
      const n = boundaries(tf, bw).count;
      if (n > BigInt(MAX_BOUNDARIES)) {
        throw wrongDataType(
          'too_many_boundaries',
          `the window holds ${n} boundaries of ${tf.label}; at most ${MAX_BOUNDARIES} a pull (a wider interval or a shorter window)`,
          itemIndex,
        );
      }
      return {
        ...common,
        query: intervalBookDownload(lake, m.tokenIds, tf, bw, depth, limit, spec.format),
        fileName: `book_snapshot_${depth}_${tf.label}_${safeName(spec.market_id!)}.${ext}`,
        description: `book_snapshot_interval market_id=${spec.market_id} interval=${tf.label} depth=${depth}`,
        timeframe: tf.label,
        emptyMessage: 'No orderbook data for this market in this range',
      };
    }
    case 'raw': {
      const name = spec.data_type ?? spec.series_id;
      if (!name) throw wrongDataType('unknown_raw_data_type', 'a raw download needs data_type (see /v1/download/raw/datasets)', itemIndex);
      const ds = findRawDataset(name);
      if (!ds) throw wrongDataType('unknown_raw_data_type', `unknown raw data_type '${name}'; see /v1/download/raw/datasets`, itemIndex);
      const conditionId = spec.market_id ? (await needMarket()).conditionId : null;
      const shape = spec.shape ?? 'raw';
      let q: Query;
      if (shape === 'raw') {
        q = rawFramesDownload(lake, ds.eventTypes, conditionId, w, spec.limit);
      } else if (ds.normalized === 'l2') {
        q = l2LevelsDownload(lake, conditionId, w, spec.limit, spec.format);
      } else if (ds.normalized === 'last_trades') {
        q = tapeTradesDownload(lake, conditionId, w, spec.limit, spec.format);
      } else {
        throw wrongDataType('normalized_unavailable', `shape=normalized is not available for '${ds.data_type}'`, itemIndex);
      }
      return {
        ...base,
        query: q,
        fileName: `raw_${ds.data_type}${spec.market_id ? `_${safeName(spec.market_id)}` : ''}${shape === 'normalized' ? '_normalized' : ''}.${ext}`,
        dataset: 'raw',
        description: `raw data_type=${ds.data_type} shape=${shape}${spec.market_id ? ` market_id=${spec.market_id}` : ''}`,
        marketId: spec.market_id,
        emptyMessage: 'No raw tape records in this range',
        coverage: { scope: conditionId === null ? { all: true } : { conditionId }, window: w },
      };
    }
    case 'options': {
      if (!spec.series_id) throw wrongDataType('missing_series_id', 'an options download needs series_id, e.g. deribit:btc-options', itemIndex);
      const s = parseOptionsSeries(spec.series_id);
      if (!s) throw wrongDataType('not_options_series', `'${spec.series_id}' is not an options series (e.g. deribit:btc-options)`, itemIndex);
      const dataType = spec.data_type ?? 'trades';
      // The anchor's snapshots are the L2 book / ticker of its `-orderbook` and `-ticker` options series; the
      // options data set here holds trades only (src/lake/layout.ts `options`, ingest/options.ts) and no such
      // series exists, so nothing could ever be served. Refused before anything is metered, as the anchor's
      // validation error (422, naming data_type) rather than a 400 after it passed validation.
      if (dataType === 'snapshots') {
        throw new Unprocessable([
          {
            loc: itemIndex === undefined ? ['query', 'data_type'] : ['body', 'items', itemIndex, 'data_type'],
            msg: `options series hold trades only (no order-book or ticker snapshots are captured for ${spec.series_id}); use data_type=trades or greeks`,
            type: 'value_error',
            input: dataType,
          },
        ]);
      }
      const sel = { ...s, instrumentPrefix: spec.instrument_prefix };
      let q: Query;
      if (dataType === 'trades') q = optionsTradesDownload(lake, sel, w, limit, spec.format);
      else if (dataType === 'greeks') q = optionsGreeksDownload(lake, sel, w, limit, spec.format);
      else
        throw wrongDataType('options_data_type_unavailable', `data_type '${dataType}' is not captured for ${spec.series_id}; use trades or greeks`, itemIndex);
      return {
        ...base,
        query: q,
        fileName: `options_${safeName(spec.series_id)}_${dataType}.${ext}`,
        dataset: 'options',
        description: `options series_id=${spec.series_id} data_type=${dataType}${spec.instrument_prefix ? ` prefix=${spec.instrument_prefix}` : ''}`,
        emptyMessage: 'No options trades in this range',
      };
    }
    case 'series': {
      if (!spec.series_id) throw wrongDataType('missing_series_id', 'a series download needs series_id', itemIndex);
      if (parseOptionsSeries(spec.series_id)) {
        return planDownload(deps, principal, { ...spec, kind: 'options' }, itemIndex);
      }
      const cat = catalogueSeries(spec.series_id);
      if (cat) return planCatalogue(lake, spec, cat, w, limit, base, itemIndex);
      // Either spelling (the anchor's `polymarket:btc-15m` or the stored slug) names the stored series; the file
      // and its history record are named by the stored id, so both give the same answer.
      const seriesId = await resolveSeriesId(deps.lake, spec.series_id);
      if (seriesId === null) throw new NotFound('Series not found');
      const dataType = spec.data_type ?? 'trades';
      const sel = { seriesId };
      const name = safeName(seriesId);
      const common = { ...base, dataset: 'series', emptyMessage: 'No data for this series in this range' };
      if (dataType === 'trades') {
        return {
          ...common,
          query: tradesDownload(lake, sel, w, limit, spec.format),
          fileName: `series_${name}_trades.${ext}`,
          description: `series ${seriesId} trades`,
        };
      }
      if (dataType === 'ohlcv') {
        const tf = spec.timeframe ?? timeframeOf(3600);
        return {
          ...common,
          query: ohlcvDownload(lake, sel, tf, w, limit, spec.format),
          fileName: `series_${name}_ohlcv_${tf.label}.${ext}`,
          description: `series ${seriesId} ohlcv ${tf.label}`,
          timeframe: tf.label,
        };
      }
      if (dataType === 'snapshots') {
        return {
          ...common,
          query: orderbookDownload(lake, sel, w, limit, spec.format),
          fileName: `series_${name}_snapshots.${ext}`,
          description: `series ${seriesId} snapshots`,
          coverage: { scope: sel, window: w },
        };
      }
      throw wrongDataType('wrong_data_type', `data_type '${dataType}' is not offered for series; use trades, ohlcv or snapshots`, itemIndex);
    }
  }
}

/** Refusals of a catalogue series pull that passed validation: not served here, or a data type it does not take. */
export function checkCatalogue(cat: CatalogueSeries, dataType: string, tfSeconds: number | undefined, itemIndex?: number): void {
  if (cat.insteadOf) throw wrongDataType('series_not_offered', `${cat.id} is not offered by pmlake; ${cat.insteadOf}`, itemIndex);
  if (dataType !== cat.dataType) throw wrongDataType('wrong_data_type', `${cat.id} accepts only data_type=${cat.dataType}`, itemIndex);
  if (cat.timeframeSeconds !== undefined && tfSeconds !== undefined && tfSeconds !== cat.timeframeSeconds) {
    const label = timeframeOf(cat.timeframeSeconds).label;
    throw wrongDataType('wrong_timeframe', `${cat.id} is ${label} candles; omit timeframe or pass ${label}`, itemIndex);
  }
}

/** A whole-venue catalogue series (src/markets/series-ids.ts): the series pull over every token. */
function planCatalogue(
  lake: Lake,
  spec: PullSpec,
  cat: CatalogueSeries,
  w: Window,
  limit: number,
  base: { format: CopyFormat; start: string | null; end: string | null },
  itemIndex?: number,
): DownloadPlan {
  const dataType = spec.data_type ?? 'trades';
  checkCatalogue(cat, dataType, spec.timeframe?.seconds, itemIndex);
  const name = safeName(cat.id);
  const common = { ...base, dataset: 'series', emptyMessage: 'No data for this series in this range' };
  if (cat.dataType === 'trades') {
    return {
      ...common,
      query: tradesDownload(lake, { all: true }, w, limit, spec.format),
      fileName: `series_${name}_trades.${base.format}`,
      description: `series ${cat.id} trades`,
    };
  }
  const tf = timeframeOf(cat.timeframeSeconds!);
  return {
    ...common,
    query: ohlcvDownload(lake, { all: true }, tf, w, limit, spec.format),
    fileName: `series_${name}_ohlcv_${tf.label}.${base.format}`,
    description: `series ${cat.id} ohlcv ${tf.label}`,
    timeframe: tf.label,
  };
}
