import type { Db } from './db.js';
import { join, sql } from './sql.js';

/** Rows per statement: well under SQLite's 32,766 bound parameters (4 a row). */
const BATCH = 500;

/** Request counters per user, key and UTC day ('' key for dashboard JWT calls). */
export async function addRequestCounts(t: Db, counts: { userId: string; keyId: string; day: string; n: number }[]): Promise<void> {
  if (counts.length === 0) return;
  // One row per (user, key, day): a statement may not update one row twice (PostgreSQL's ON CONFLICT).
  const merged = new Map<string, { userId: string; keyId: string; day: string; n: number }>();
  for (const c of counts) {
    const k = `${c.userId}\u0000${c.keyId}\u0000${c.day}`;
    const m = merged.get(k);
    if (m) m.n += c.n;
    else merged.set(k, { ...c });
  }
  const rowsOf = [...merged.values()];
  // Informational counts: benign (the principal cache stays), no fsync on SQLite; one statement per BATCH
  // rows (a round trip each on PostgreSQL, not one per key). The caller merges one key's counts of a day into one.
  await t.tx(
    async (tx) => {
      for (let i = 0; i < rowsOf.length; i += BATCH) {
        const rows = rowsOf.slice(i, i + BATCH).map((c) => sql`(${c.userId}, ${c.keyId}, ${c.day}, ${c.n})`);
        await tx.run(
          sql`INSERT INTO usage_daily (user_id, key_id, day, requests) VALUES ${join(rows, ', ')}
              ON CONFLICT (user_id, key_id, day) DO UPDATE SET requests = usage_daily.requests + excluded.requests`,
        );
      }
    },
    { benign: true },
  );
}

/** Requests per day in [startDay, endDay] (inclusive, YYYY-MM-DD). */
export function dailyRequestCounts(t: Db, userId: string, startDay: string, endDay: string): Promise<{ day: string; requests: number }[]> {
  return t.all(
    sql`SELECT day, SUM(requests) AS requests FROM usage_daily WHERE user_id = ${userId} AND day >= ${startDay} AND day <= ${endDay}
        GROUP BY day ORDER BY day`,
  );
}

/** Requests per key in [startDay, endDay] ('' is the dashboard JWT). */
export function requestCountsByKey(t: Db, userId: string, startDay: string, endDay: string): Promise<{ key_id: string; requests: number }[]> {
  return t.all(
    sql`SELECT key_id, SUM(requests) AS requests FROM usage_daily WHERE user_id = ${userId} AND day >= ${startDay} AND day <= ${endDay}
        GROUP BY key_id ORDER BY requests DESC, key_id`,
  );
}
