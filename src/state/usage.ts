import type { StateStore } from './store.js';

/** Request counters per user, key and UTC day ('' key for dashboard JWT calls). */
export function addRequestCounts(store: StateStore, counts: { userId: string; keyId: string; day: string; n: number }[]): void {
  if (counts.length === 0) return;
  const stmt = store.db.prepare(
    `INSERT INTO usage_daily (user_id, key_id, day, requests) VALUES (?, ?, ?, ?)
     ON CONFLICT (user_id, key_id, day) DO UPDATE SET requests = requests + excluded.requests`,
  );
  store.db.transaction(() => {
    for (const c of counts) stmt.run(c.userId, c.keyId, c.day, c.n);
  })();
}

/** Requests per day in [startDay, endDay] (inclusive, YYYY-MM-DD). */
export function dailyRequestCounts(store: StateStore, userId: string, startDay: string, endDay: string): { day: string; requests: number }[] {
  return store.db
    .prepare(
      `SELECT day, SUM(requests) AS requests FROM usage_daily WHERE user_id = ? AND day >= ? AND day <= ?
       GROUP BY day ORDER BY day`,
    )
    .all(userId, startDay, endDay) as { day: string; requests: number }[];
}

/** Requests per key in [startDay, endDay] ('' is the dashboard JWT). */
export function requestCountsByKey(store: StateStore, userId: string, startDay: string, endDay: string): { key_id: string; requests: number }[] {
  return store.db
    .prepare(
      `SELECT key_id, SUM(requests) AS requests FROM usage_daily WHERE user_id = ? AND day >= ? AND day <= ?
       GROUP BY key_id ORDER BY requests DESC, key_id`,
    )
    .all(userId, startDay, endDay) as { key_id: string; requests: number }[];
}
