import type { Db } from './db.js';
import { sql } from './sql.js';

/** Request counters per user, key and UTC day ('' key for dashboard JWT calls). */
export async function addRequestCounts(t: Db, counts: { userId: string; keyId: string; day: string; n: number }[]): Promise<void> {
  if (counts.length === 0) return;
  // Informational counts: benign (the principal cache stays), no fsync on SQLite.
  await t.tx(
    async (tx) => {
      for (const c of counts) {
        await tx.run(
          sql`INSERT INTO usage_daily (user_id, key_id, day, requests) VALUES (${c.userId}, ${c.keyId}, ${c.day}, ${c.n})
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
