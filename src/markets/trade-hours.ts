import type { LakeSession } from '../lake/session.js';
import { tradeHoursQuery } from '../query/trades.js';
import type { HourCount, PartitionHours } from '../query/trade-plan.js';

/**
 * Each token's trades per hour of each month partition, as src/query/trade-plan.ts needs them: the lake does
 * not store per-token counts per partition (the catalogue keeps one total per market), so they are counted
 * from the partition's files once — one scan of the token's rows, which the files' sort order confines to their
 * row groups — and kept per partition file list (files are immutable, so a landed batch is a new list).
 * Counts with a `side` filter are kept apart (three variants at most).
 */
export type TradePartition = { month: string; version: string };

/** The trades partitions of the session's lake version, newest first, each with its file list as version. */
export function tradePartitions(lake: LakeSession): TradePartition[] {
  const v = lake.version;
  const files = new Map<string, string[]>();
  for (const e of v.entries('trades')) {
    if (e.partition === null || !/^[0-9]{4}-[0-9]{2}$/.test(e.partition)) continue;
    files.set(e.partition, [...(files.get(e.partition) ?? []), e.path]);
  }
  return [...files.keys()]
    .sort()
    .reverse()
    .map((month) => ({ month, version: files.get(month)!.join('|') }));
}

/**
 * Kept compactly (12 bytes an hour: a busy token-month has up to 744) and at most 4,096 token-partitions, least
 * recently used out first: a bounded few tens of MB at most, far less in practice (most tokens trade in few hours).
 */
const MAX_ENTRIES = 4096;
type Hours = { hour: BigInt64Array; rows: Uint32Array };
const cache = new Map<string, Promise<Hours>>();

function hoursOf(lake: LakeSession, p: TradePartition, token: string, side: string | undefined): Promise<Hours> {
  const key = `${lake.lakeDir}\u0000${p.version}\u0000${token}\u0000${side ?? ''}`;
  let hit = cache.get(key);
  if (hit) {
    // Refresh its place: the map's order is the eviction order (least recently used first).
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  hit = lake.rows(tradeHoursQuery(lake.partition('trades', [p.month]), token, side)).then((rows) => ({
    hour: BigInt64Array.from(rows, (r) => BigInt(r.hour as number)),
    rows: Uint32Array.from(rows, (r) => Number(r.rows)),
  }));
  if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value!);
  cache.set(key, hit);
  hit.catch(() => cache.delete(key));
  return hit;
}

function counts(h: Hours): HourCount[] {
  return Array.from(h.hour, (hour, i) => ({ hour, rows: h.rows[i]! }));
}

/**
 * Hours of the given tokens in the given partitions (newest first), fetched lazily: a partition's counts are
 * read only when the plan's walk reaches it, so a first page of the busiest market counts the newest month alone.
 */
export async function* tradeHours(
  lake: LakeSession,
  partitions: readonly TradePartition[],
  tokens: readonly string[],
  side: string | undefined,
): AsyncGenerator<PartitionHours> {
  for (const p of partitions) {
    const hours = await Promise.all(tokens.map((t) => hoursOf(lake, p, t, side)));
    yield { month: p.month, tokens: tokens.map((token, i) => ({ token, hours: counts(hours[i]!) })) };
  }
}
