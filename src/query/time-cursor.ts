import { isoFromMicros } from '../lake/values.js';
import { parseIsoMicros } from '../iso-time.js';

/**
 * Where the page after a page of time-ordered rows starts (trades newest first, top of book oldest first), as a
 * time bound and an offset past it, from the last row shown at time T:
 *  - newest first: every matching row at or before T, less the first k: `end = T + 1 µs` (end is exclusive);
 *  - oldest first: every matching row at or after T, less the first k: `start = T`;
 * k being the rows at exactly T already shown. Unlike offset + limit this stays within the offset bound however
 * deep the list goes, reads no deeper than one instant, and does not shift when rows land outside the pages
 * still to come.
 *
 * k is read off the page when it holds a row at another time than T: the rows at T are then all on it, the order
 * being by time first. When every row shown is at T, the earlier ones at T were skipped by the request's own
 * offset: k = offset + shown − (matching rows on the far side of T within the request's window), counted only
 * when that is not known to be none (offset 0, or the request already bounded at the same instant).
 */
export type TimeOrder = 'desc' | 'asc';

export async function nextByTime(
  shown: readonly string[],
  order: TimeOrder,
  q: { offset: number; bound?: bigint | undefined },
  countBeyond: (at: bigint) => Promise<number>,
): Promise<{ at: string; offset: number }> {
  const last = timeOf(shown[shown.length - 1]!);
  let atLast = 1;
  while (atLast < shown.length && timeOf(shown[shown.length - 1 - atLast]!) === last) atLast += 1;
  const at = order === 'desc' ? last + 1n : last;
  if (atLast < shown.length) return { at: isoFromMicros(at), offset: atLast };
  const beyond = q.offset === 0 || q.bound === at ? 0 : await countBeyond(at);
  return { at: isoFromMicros(at), offset: q.offset + shown.length - beyond };
}

/** A row's `timestamp` (ISO 8601 as the runner writes it) in microseconds. */
function timeOf(row: string): bigint {
  const ts = (JSON.parse(row) as { timestamp: string }).timestamp;
  const us = parseIsoMicros(ts);
  if (us === null) throw new Error(`row timestamp ${ts} is not ISO 8601`);
  return us;
}
