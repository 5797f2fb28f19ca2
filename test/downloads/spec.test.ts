import { describe, expect, it } from 'vitest';
import { loadSpec, storeSpec, StoredSpecError, type PullSpec } from '../../src/downloads/spec.js';
import { BulkBody, bulkItem } from '../../src/http/download-bulk.js';
import { CreateExport, exportSpec } from '../../src/http/exports.js';
import { publicSpec } from '../../src/http/export-view.js';
import { timeframeOf } from '../../src/timeframe.js';

/**
 * The one spec of a file pull: parsed at the edge (bulk items cover every kind with the same zod pieces as
 * the GET routes; export bodies), stored as versioned text and loaded back without losing a microsecond or a
 * timeframe. Older export rows (the un-versioned shape) still load; anything else fails with a clear error.
 */
const START = '2023-11-14T22:13:20.123456Z'; // 1700000000123456 µs
const END = '2023-11-21T22:13:20.654321Z';

const roundTrip = (s: PullSpec): void => {
  const text = storeSpec(s);
  const back = loadSpec(text);
  expect(back).toEqual(s);
  // Nothing extra comes back, and storing the loaded spec gives the same text.
  expect(Object.values(back)).not.toContain(undefined);
  expect(storeSpec(back)).toBe(text);
};

describe('PullSpec store/load', () => {
  it('parse → store → load is lossless for every kind, with microsecond windows and odd timeframes', () => {
    const items = [
      { kind: 'trades', market_id: '1254468', start: START, end: END, format: 'parquet', limit: 7 },
      { kind: 'ohlcv', market_id: '1254468', timeframe: '7m', start: START, end: END },
      { kind: 'ohlcv', market_id: '1254468', timeframe: '90s', start: START },
      { kind: 'ohlcv', market_id: '1254468', timeframe: '420s', end: END, format: 'json' },
      { kind: 'orderbook', market_id: '99', start: START, end: END },
      { kind: 'top_of_book', market_id: '99', start: START, end: END, format: 'json' },
      { kind: 'raw', data_type: 'polymarket_l2_deltas', shape: 'normalized', market_id: '99', start: START, end: END },
      { kind: 'raw', data_type: 'polymarket_raw', start: START, end: END, limit: 2_000_000 },
      { kind: 'options', series_id: 'deribit:btc-options', data_type: 'greeks', instrument_prefix: 'BTC-27JUN', start: START, end: END },
      { kind: 'series', series_id: 'polymarket:weekly', data_type: 'ohlcv', timeframe: '1w', start: START, end: END },
      { kind: 'series', series_id: 'polymarket:weekly', market_id: null, timeframe: null, start: null },
    ];
    const specs = BulkBody.parse({ items }).items.map((it) => bulkItem(it).spec);
    expect(specs[0]!.start).toBe(1_700_000_000_123_456n);
    expect(specs[0]!.end).toBe(1_700_604_800_654_321n);
    expect(specs.map((s) => s.timeframe?.label)).toEqual([
      undefined,
      '7m',
      '90s',
      '7m',
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      '1w',
      undefined,
    ]);
    for (const s of specs) roundTrip(s);

    const bodies = [
      { kind: 'trades', market_id: '1254468', start: START, end: END },
      { kind: 'ohlcv', market_id: '1254468', timeframe: '90s', start: START, end: END, format: 'csv' },
      { kind: 'orderbook', market_id: '1254468', end: END, format: 'json' },
      { kind: 'raw', series_id: 'polymarket:l2-delta-tape', market_id: '5', shape: 'normalized', start: START },
    ];
    for (const b of bodies) roundTrip(exportSpec(CreateExport.parse(b)));
  });

  it('the stored form is versioned JSON: microseconds as decimal text, the timeframe label, no row cap as null', () => {
    const spec: PullSpec = {
      kind: 'ohlcv',
      market_id: '123',
      timeframe: timeframeOf(420),
      start: 1_700_000_000_123_456n,
      end: 1_700_000_000_123_457n,
      format: 'csv',
      limit: null,
    };
    const text = storeSpec(spec);
    expect(text).toBe(
      '{"v":1,"kind":"ohlcv","market_id":"123","timeframe":"7m","start_us":"1700000000123456","end_us":"1700000000123457","format":"csv","limit":null}',
    );
    expect(loadSpec(text)).toStrictEqual({
      kind: 'ohlcv',
      market_id: '123',
      timeframe: timeframeOf(420),
      format: 'csv',
      limit: null,
      start: 1_700_000_000_123_456n,
      end: 1_700_000_000_123_457n,
    });
    // Beyond 2^53 (a JSON number would round these) and before 1970.
    for (const us of [2n ** 63n - 1n, -(2n ** 63n), -1n, 0n, 9_007_199_254_740_993n])
      roundTrip({ kind: 'trades', market_id: '1', start: us, end: us, format: 'json', limit: 1 });
  });

  it('a job stored before versions (ISO text, a timeframe label) loads, and shows exactly as it was stored', () => {
    const legacy = [
      '{"kind":"trades","market_id":"1254468","start":"2025-03-01T12:00:00.123Z","end":"2025-03-02T00:00:00.000Z","format":"parquet"}',
      '{"kind":"ohlcv","market_id":"7","timeframe":"4h","format":"csv"}',
      '{"kind":"raw","market_id":"7","series_id":"polymarket:l2-delta-tape","shape":"normalized","start":"2025-03-01T00:00:00.000Z","format":"json"}',
      '{"kind":"orderbook","market_id":"7","end":"0001-01-01T00:00:00.000Z","format":"parquet"}',
    ];
    expect(loadSpec(legacy[0]!)).toStrictEqual({
      kind: 'trades',
      market_id: '1254468',
      start: 1_740_830_400_123_000n,
      end: 1_740_873_600_000_000n,
      format: 'parquet',
      limit: null,
    });
    expect(loadSpec(legacy[1]!).timeframe).toEqual(timeframeOf(4 * 3600));
    for (const t of legacy) expect(JSON.stringify(publicSpec(loadSpec(t)))).toBe(t);
  });

  it('the job view shows a new job exactly as before versions (the old submit mapping, byte for byte)', () => {
    // What POST /v1/exports stored and GET /v1/exports/{id} showed before the PullSpec: ISO to the millisecond.
    const iso = (us: bigint) => new Date(Number(us / 1000n)).toISOString();
    const before = (b: ReturnType<typeof CreateExport.parse>) => ({
      kind: b.kind,
      ...(b.market_id ? { market_id: b.market_id } : {}),
      ...(b.series_id ? { series_id: b.series_id } : {}),
      ...(b.timeframe ? { timeframe: b.timeframe.label } : {}),
      ...(b.kind === 'raw' ? { shape: b.shape } : {}),
      ...(b.start != null ? { start: iso(b.start) } : {}),
      ...(b.end != null ? { end: iso(b.end) } : {}),
      format: b.format,
    });
    const bodies = [
      { kind: 'trades', market_id: '1254468' },
      { kind: 'trades', market_id: '1254468', timeframe: '7m', start: START, end: END, format: 'csv', idempotency_key: 'x' },
      { kind: 'ohlcv', market_id: '1254468', timeframe: '420s', start: '2025-03-01', end: '2025-03-02T00:00:00+02:00' },
      { kind: 'orderbook', market_id: '5', shape: 'normalized', start: null, end: null },
      { kind: 'raw', series_id: 'polymarket:raw-tape' },
      { kind: 'raw', series_id: 'polymarket:l2-delta-tape', market_id: '5', shape: 'normalized', start: '1969-12-31T23:59:59.999999Z', format: 'json' },
    ];
    for (const body of bodies) {
      const b = CreateExport.parse(body);
      expect(JSON.stringify(publicSpec(loadSpec(storeSpec(exportSpec(b)))))).toBe(JSON.stringify(before(b)));
    }
  });

  it('a stored spec that does not parse fails loudly, naming what is wrong', () => {
    const bad: [string, RegExp][] = [
      ['{"v":1,"kind":"ohlcv","market_id":"1","timeframe":"7x","format":"csv","limit":null}', /timeframe: timeframe must be/],
      ['{"v":1,"kind":"trades","market_id":"1","start_us":1700000000123456,"format":"csv","limit":null}', /start_us/],
      ['{"v":1,"kind":"trades","market_id":"1","start_us":"17e14","format":"csv","limit":null}', /start_us: expected microseconds/],
      ['{"v":1,"kind":"candles","format":"csv","limit":null}', /kind/],
      ['{"v":1,"kind":"trades","format":"csv"}', /limit/],
      ['{"v":1,"kind":"trades","format":"csv","limit":null,"extra":1}', /extra/],
      ['{"v":2,"kind":"trades","format":"csv","limit":null}', /version 2; this pmlake reads version 1/],
      ['{"kind":"trades","market_id":"1","start":"yesterday","format":"csv"}', /start: expected an ISO timestamp/],
      ['{"kind":"ohlcv","market_id":"1","timeframe":"5y","format":"csv"}', /timeframe/],
      ['{"kind":"trades","market_id":"1","format":"xlsx"}', /format/],
      ['{"kind":"top_of_book","market_id":"1","format":"csv"}', /kind/],
      ['[1,2]', /not a JSON object/],
      ['null', /not a JSON object/],
      ['{"kind":"trades"', /not JSON/],
    ];
    for (const [text, why] of bad) {
      let err: unknown;
      try {
        loadSpec(text);
      } catch (e) {
        err = e;
      }
      expect(err, text).toBeInstanceOf(StoredSpecError);
      expect((err as Error).message, text).toMatch(/^its stored spec does not parse \(/);
      expect((err as Error).message, text).toMatch(why);
    }
  });
});
