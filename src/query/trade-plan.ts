/**
 * Which partitions a newest-first page of a market's trades lands in (pure: the counts come from
 * src/markets/trade-hours.ts). Trades are partitioned by month of `ts`, so every row of a newer partition comes
 * before every row of an older one in the API's order (ts, block, log index, id, all descending). Given each
 * token's matching rows per hour of each partition, a page at offset N, limit L:
 *
 * 1. skips the newest partitions whose exact matching count S (all its hours inside the window) stays ≤ N, and
 *    reads the rest with offset N − S;
 * 2. stops adding older partitions once the selected ones surely hold N − S + L matching rows;
 * 3. bounds each token's scan in each selected partition by a floor: the start of the newest hours that
 *    surely hold N − S + L of its matching rows. Rows below it come after at least that many rows of the same
 *    token, so none of them is on the page; the files are sorted by token then ts, so row groups below it are
 *    skipped by their statistics.
 *
 * Hours only partly inside the window count as unknown (0 towards "surely", never skipped): the answer is the
 * plain query's, exactly. Tested against the plain plan and a TypeScript ordering (test/query/trade-plan.test.ts).
 */
export const HOUR_US = 3_600_000_000n;

/** Matching rows of one token in one hour: `hour` = the hour's start, epoch microseconds. */
export type HourCount = { hour: bigint; rows: number };

export type PartitionHours = {
  /** The partition value (YYYY-MM). */
  month: string;
  /** Per token: its hours with matching rows in this partition (any order). */
  tokens: ReadonlyArray<{ token: string; hours: readonly HourCount[] }>;
};

export type PageScan = { month: string; token: string; floor: bigint | null };
export type PagePlan = { offset: number; scans: PageScan[] };

type Window = { start?: bigint | undefined; end?: bigint | undefined };

/** 'in': every row of the hour is inside [start, end); 'out': none is; 'part': some may be. */
function place(hour: bigint, w: Window): 'in' | 'out' | 'part' {
  const next = hour + HOUR_US;
  if ((w.start !== undefined && next <= w.start) || (w.end !== undefined && hour >= w.end)) return 'out';
  if ((w.start === undefined || hour >= w.start) && (w.end === undefined || next <= w.end)) return 'in';
  return 'part';
}

/** `partitions` newest first; read only as far as the page needs (an async source is fetched lazily). */
export async function planTradePage(
  partitions: Iterable<PartitionHours> | AsyncIterable<PartitionHours>,
  w: Window,
  page: { limit: number; offset: number },
): Promise<PagePlan> {
  let skipped = 0;
  let selecting = false;
  let offset = page.offset;
  let covered = 0;
  const scans: PageScan[] = [];
  for await (const p of partitions) {
    const sized = p.tokens.map((t) => {
      const hours = t.hours.map((h) => ({ ...h, at: place(h.hour, w) })).filter((h) => h.at !== 'out');
      hours.sort((a, b) => (a.hour > b.hour ? -1 : a.hour < b.hour ? 1 : 0));
      const sure = hours.reduce((s, h) => s + (h.at === 'in' ? h.rows : 0), 0);
      return { token: t.token, hours, sure, exact: hours.every((h) => h.at === 'in') };
    });
    const live = sized.filter((t) => t.hours.length > 0);
    if (live.length === 0) continue; // no matching row can be here
    const sure = live.reduce((s, t) => s + t.sure, 0);
    if (!selecting) {
      if (live.every((t) => t.exact) && skipped + sure <= page.offset) {
        skipped += sure;
        continue;
      }
      selecting = true;
      offset = page.offset - skipped;
    }
    const need = offset + page.limit;
    for (const t of live) scans.push({ month: p.month, token: t.token, floor: floorFor(t.hours, need) });
    covered += sure;
    if (covered >= need) break;
  }
  return { offset: selecting ? offset : 0, scans };
}

/** Start of the newest hours that surely hold `need` rows; null when even all of them might not. */
function floorFor(hours: ReadonlyArray<HourCount & { at: 'in' | 'part' | 'out' }>, need: number): bigint | null {
  let sure = 0;
  for (const h of hours) {
    if (h.at === 'in') sure += h.rows;
    if (sure >= need) return h.hour;
  }
  return null;
}
