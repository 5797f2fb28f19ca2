import type { CopyFormat } from '../lake/stream.js';
import type { Timeframe } from '../timeframe.js';

/**
 * The one spec of a file pull — a GET /v1/download/* call, a bulk line item, an export job. Parsed once by
 * zod at the HTTP edge into this shape; planned by ./plan.ts.
 */
export type DownloadKind = 'trades' | 'ohlcv' | 'orderbook' | 'top_of_book' | 'raw' | 'options' | 'series';

export type PullSpec = {
  kind: DownloadKind;
  market_id?: string | undefined;
  series_id?: string | undefined;
  data_type?: string | undefined;
  timeframe?: Timeframe | undefined;
  instrument_prefix?: string | undefined;
  shape?: 'raw' | 'normalized' | undefined;
  /** Microseconds since the epoch (UTC), inclusive. */
  start?: bigint | undefined;
  /** Microseconds since the epoch (UTC), exclusive. */
  end?: bigint | undefined;
  format: CopyFormat;
  /** null: no row cap (exports). */
  limit: number | null;
};
