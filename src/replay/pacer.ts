/**
 * Paces a replay by the recorded receive times: a frame received `d` ms after the replay's origin is sent `d /
 * speed` ms after the replay started (speed 1 = as recorded, 60 = sixty times faster, 0 = as fast as the client
 * reads: no waiting at all). A frame is never sent early; how late each one went is measured (`stats`), which is
 * the pacing error a bench reports.
 */
export type PacingStats = { paced: number; lateMsMax: number; lateMsMean: number };

export class Pacer {
  private readonly startedMs: number;
  private paced = 0;
  private lateSum = 0;
  private lateMax = 0;

  constructor(
    readonly speed: number,
    /** The recorded instant (epoch ms) the replay starts at: its `from`. */
    readonly originMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.startedMs = now();
  }

  /** When (on `now`'s clock) a frame received at `recvMs` is due. */
  dueAt(recvMs: number): number {
    return this.speed > 0 ? this.startedMs + Math.max(0, recvMs - this.originMs) / this.speed : this.startedMs;
  }

  /** Waits until the frame is due (false when aborted first), then counts how late it is. */
  async wait(recvMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.speed === 0) return !signal?.aborted;
    const due = this.dueAt(recvMs);
    // Timers fire on whole milliseconds: below one, sending now is closer than sleeping. A wait longer than
    // Node's timer range (about 24.8 days) is slept in steps, each re-measured against the clock.
    for (let ahead = due - this.now(); ahead >= 1; ahead = due - this.now()) {
      if (!(await sleep(Math.min(ahead, MAX_TIMER_MS), signal))) return false;
    }
    const late = Math.max(0, this.now() - due);
    this.paced++;
    this.lateSum += late;
    if (late > this.lateMax) this.lateMax = late;
    return true;
  }

  stats(): PacingStats {
    return { paced: this.paced, lateMsMax: this.lateMax, lateMsMean: this.paced ? this.lateSum / this.paced : 0 };
  }
}

/** setTimeout's largest delay: a longer one overflows and fires at once (TimeoutOverflowWarning). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      resolve(false);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
