import type { LakeSession } from '../lake/session.js';
import { StampedCache } from '../lake/stamp.js';
import { isoFromMicros, type Row } from '../lake/values.js';
import { dayCheckpointsQuery, nextDayCheckpointQuery } from '../query/coverage.js';
import { dateOf } from '../query/common.js';

/**
 * Whether the book of a token at `at` lies inside a stretch the venue proved: the first `book` checkpoint at or
 * after `at` passed and its stretch (since_ts, ts] holds `at` (lake/README.md `checkpoints`). Computed from the
 * checkpoints rather than read from the stored snapshot's `verified`: the answer is that snapshot plus a replay up
 * to `at`, and a checkpoint between the two (a failed one, or the first one after a disconnect) would make the
 * snapshot's flag wrong for `at`. A stretch no checkpoint has closed yet is not verified.
 */

/**
 * A token's book checkpoints on one day: receive µs, stretch start µs, passed (µs fit a double exactly); then the
 * first one on a later day, which closes the day's open tail (read once, when an instant there is first asked).
 */
type DayCheckpoints = { ts: Float64Array; since: Float64Array; ok: Uint8Array; next?: Promise<Row | undefined> };

/**
 * Per lake version, token and day: a chart scrubbing one book asks the same day again and again, and one statement
 * per lookup would cost a good part of the book's own.
 */
const days = new StampedCache<DayCheckpoints>({ maxEntries: 1024 });

export async function verifiedAt(lake: LakeSession, assetId: string, at: bigint): Promise<{ verified: boolean; checkpoint: string | null }> {
  const day = dateOf(at);
  const { value: c } = await days.get(lake, `${assetId}|${day}`, async () => {
    const rows = await lake.rows(dayCheckpointsQuery(lake.sources, assetId, day));
    return {
      ts: Float64Array.from(rows, (r) => Number(r.ts_us)),
      since: Float64Array.from(rows, (r) => (r.since_us === null ? Number.NaN : Number(r.since_us))),
      ok: Uint8Array.from(rows, (r) => (r.ok === true ? 1 : 0)),
    };
  });
  const us = Number(at);
  // The first checkpoint received at or after `at` (binary search over the day's, in arrival order).
  let lo = 0;
  let hi = c.ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (c.ts[mid]! < us) lo = mid + 1;
    else hi = mid;
  }
  if (lo < c.ts.length) return answer(c.ts[lo]!, c.since[lo]!, c.ok[lo] === 1, us);
  // None later that day: the stretch closes on a later day, or not yet.
  c.next ??= lake.one(nextDayCheckpointQuery(lake.sources, assetId, day));
  const next = await c.next.catch((err: unknown) => {
    c.next = undefined;
    throw err;
  });
  if (!next) return { verified: false, checkpoint: null };
  return answer(Number(next.ts_us), next.since_us === null ? Number.NaN : Number(next.since_us), next.ok === true, us);
}

/** A checkpoint received at `ts` proves the book at `us` when it passed and its stretch (since, ts] holds `us`. */
function answer(ts: number, since: number, ok: boolean, us: number): { verified: boolean; checkpoint: string } {
  return { verified: ok && (ts === us || since < us), checkpoint: isoFromMicros(BigInt(ts)) };
}
