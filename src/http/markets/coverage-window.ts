/**
 * Which days one page of a market's coverage shows (days as `YYYY-MM-DD` text, both ends inclusive), and which
 * days the next page shows when the span cap cut the tape. A window given whole is shown as given. An open end
 * is the tape's own first or last day, at most `maxDays` from the other end: given a start, the page runs
 * forward from it and the next one holds the later days; without one, it ends at `end` (or the tape's last day)
 * and the next one holds the earlier days.
 */
export type DayWindow = { start: string | null; end: string | null; next: { start: string | null; end: string | null } | null };

export function coverageWindow(
  q: { start?: string | undefined; end?: string | undefined },
  tape: { first: string | null; last: string | null },
  maxDays: number,
): DayWindow {
  if (q.start !== undefined && q.end !== undefined) return { start: q.start, end: q.end, next: null };
  if (q.start !== undefined) {
    const end = minDay(tape.last, addDays(q.start, maxDays - 1));
    return { start: q.start, end, next: tape.last !== null && end !== null && tape.last > end ? { start: addDays(end, 1), end: null } : null };
  }
  const end = q.end ?? tape.last;
  const start = end === null ? null : maxDay(tape.first, addDays(end, -(maxDays - 1)));
  return { start, end, next: tape.first !== null && start !== null && tape.first < start ? { start: null, end: addDays(start, -1) } : null };
}

export function dayNumber(day: string): number {
  return Date.parse(`${day}T00:00:00Z`) / 86_400_000;
}

/** The first and last days four-digit years name: a window stepping past them stops there (its next page is a day the API takes). */
const FIRST_DAY_MS = Date.parse('0000-01-01T00:00:00Z');
const LAST_DAY_MS = Date.parse('9999-12-31T00:00:00Z');

function addDays(day: string, n: number): string {
  const ms = Math.min(LAST_DAY_MS, Math.max(FIRST_DAY_MS, Date.parse(`${day}T00:00:00Z`) + n * 86_400_000));
  return new Date(ms).toISOString().slice(0, 10);
}

/** Days compare as text (YYYY-MM-DD); null means "no bound". */
function minDay(a: string | null, b: string | null): string | null {
  return a === null ? b : b === null ? a : a < b ? a : b;
}

function maxDay(a: string | null, b: string | null): string | null {
  return a === null ? b : b === null ? a : a > b ? a : b;
}
