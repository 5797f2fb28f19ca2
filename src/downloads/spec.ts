import { z } from 'zod';
import { DOWNLOAD_KINDS, EXPORT_KINDS, type DownloadKind } from '../catalogue/kinds.js';
import type { CopyFormat } from '../lake/stream.js';
import { parseTimeframe, type Timeframe } from '../timeframe.js';

/**
 * The one spec of a file pull — a GET /v1/download/* call, a bulk line item, an export job. Parsed once by
 * zod at the HTTP edge into this shape; planned by ./plan.ts. An export job keeps it in the state store as
 * text (`storeSpec` / `loadSpec`): a versioned JSON shape that round-trips losslessly — microseconds as
 * decimal strings (JSON numbers lose digits past 2^53), the timeframe as its canonical label.
 */
export type PullSpec = {
  kind: DownloadKind;
  market_id?: string | undefined;
  series_id?: string | undefined;
  data_type?: string | undefined;
  /** OHLCV: the bar width; book_snapshot_interval: the interval between boundaries. */
  timeframe?: Timeframe | undefined;
  /** book_snapshot_interval: levels a side. */
  depth?: number | undefined;
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

/** A stored spec that does not parse: the job cannot know what to build, and says so. */
export class StoredSpecError extends Error {
  constructor(reason: string) {
    super(`its stored spec does not parse (${reason})`);
    this.name = 'StoredSpecError';
  }
}

const FORMATS = ['csv', 'parquet', 'json'] as const;
const SHAPES = ['raw', 'normalized'] as const;
const text = z.string().min(1).max(200);

const timeframe = z.string().transform((t, ctx): Timeframe => {
  const r = parseTimeframe(t);
  if (!r.ok) {
    ctx.addIssue({ code: 'custom', message: r.message });
    return z.NEVER;
  }
  return r.value;
});

/** Microseconds as a decimal string, within DuckDB's BIGINT. */
const micros = z
  .string()
  .regex(/^-?(0|[1-9]\d{0,18})$/, 'expected microseconds as a decimal string')
  .transform((s) => BigInt(s))
  .refine((v) => v >= -(2n ** 63n) && v < 2n ** 63n, 'out of range');

/** Version 1, what storeSpec writes. */
const StoredV1 = z.strictObject({
  v: z.literal(1),
  kind: z.enum(DOWNLOAD_KINDS),
  market_id: text.optional(),
  series_id: text.optional(),
  data_type: text.optional(),
  timeframe: timeframe.optional(),
  depth: z.number().int().min(1).max(1000).optional(),
  instrument_prefix: text.optional(),
  shape: z.enum(SHAPES).optional(),
  start_us: micros.optional(),
  end_us: micros.optional(),
  format: z.enum(FORMATS),
  limit: z.number().int().min(1).nullable(),
});

/** `Date.prototype.toISOString` text: what export jobs stored before version 1 (millisecond precision). */
const isoMillis = z
  .string()
  .regex(/^([+-]\d{6}|\d{4})-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'expected an ISO timestamp')
  .transform((s, ctx) => {
    const ms = Date.parse(s);
    if (Number.isNaN(ms)) {
      ctx.addIssue({ code: 'custom', message: 'expected an ISO timestamp' });
      return z.NEVER;
    }
    return BigInt(ms) * 1000n;
  });

/**
 * The shape export jobs were stored in before version 1 (rows in existing state databases are legal data):
 * no version, start/end as ISO text, the timeframe label, always without a row cap. Its kinds were the export
 * kinds of then, which the export kinds of now include.
 */
const StoredLegacy = z.strictObject({
  kind: z.enum(EXPORT_KINDS),
  market_id: text.optional(),
  series_id: text.optional(),
  timeframe: timeframe.optional(),
  shape: z.enum(SHAPES).optional(),
  start: isoMillis.optional(),
  end: isoMillis.optional(),
  format: z.enum(FORMATS),
});

/** The spec without its unset fields: what loadSpec returns, so a loaded spec equals its original strictly. */
function compact(spec: PullSpec): PullSpec {
  return Object.fromEntries(Object.entries(spec).filter(([, v]) => v !== undefined)) as PullSpec;
}

export function storeSpec(spec: PullSpec): string {
  return JSON.stringify({
    v: 1,
    kind: spec.kind,
    market_id: spec.market_id,
    series_id: spec.series_id,
    data_type: spec.data_type,
    timeframe: spec.timeframe?.label,
    depth: spec.depth,
    instrument_prefix: spec.instrument_prefix,
    shape: spec.shape,
    start_us: spec.start?.toString(),
    end_us: spec.end?.toString(),
    format: spec.format,
    limit: spec.limit,
  });
}

/** The spec a job stored (version 1, or the legacy shape); throws StoredSpecError when it does not parse. */
export function loadSpec(stored: string): PullSpec {
  let raw: unknown;
  try {
    raw = JSON.parse(stored);
  } catch {
    throw new StoredSpecError('not JSON');
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new StoredSpecError('not a JSON object');
  if ('v' in raw) {
    if (raw.v !== 1) throw new StoredSpecError(`version ${JSON.stringify(raw.v)}; this pmlake reads version 1`);
    const r = StoredV1.safeParse(raw);
    if (!r.success) throw new StoredSpecError(issues(r.error));
    const { v: _v, start_us, end_us, ...rest } = r.data;
    return compact({ ...rest, start: start_us, end: end_us });
  }
  const r = StoredLegacy.safeParse(raw);
  if (!r.success) throw new StoredSpecError(issues(r.error));
  return compact({ ...r.data, limit: null });
}

function issues(err: z.ZodError): string {
  return err.issues
    .slice(0, 3)
    .map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message))
    .join('; ');
}
