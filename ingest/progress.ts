import type { Logger } from '../src/log.js';

/**
 * What an operator sees while `pmlake ingest` runs: the orchestrator reports its figures as events
 * (`IngestOptions.onProgress`), a meter turns them into rates and an ETA, and one of two displays shows them —
 * a single line redrawn in place on a terminal (ingest/progress-tty.ts), periodic pino lines elsewhere.
 */

/** The run's figures, sent by runIngest at each event. Inputs and bytes count files the ingest recognised. */
export type IngestProgress = {
  /** `plan`: inputs known; `phase`: a phase began; `input`: an input is done (staged, skipped or failed); `batch`: a batch was published; `end`. */
  event: 'plan' | 'phase' | 'input' | 'batch' | 'end';
  /** hash, stage, books, candles, merge_<data set>, catalog, compact, done. */
  phase: string;
  inputs: number;
  inputs_done: number;
  bytes: number;
  bytes_done: number;
  /** Of bytes_done, those of inputs skipped (already in the ledger) or failed: done without the work, so out of the rate. */
  bytes_skipped: number;
  level_updates: number;
  batches: number;
};

export type ProgressFigures = {
  phase: string;
  inputs: number;
  inputs_done: number;
  bytes: number;
  bytes_done: number;
  batches: number;
  level_updates: number;
  level_updates_per_second: number;
  bytes_per_second: number;
  elapsed_seconds: number;
  /** Null until a first input has been staged (no rate yet), and while the last batch is written after every input is staged. */
  eta_seconds: number | null;
};

/**
 * Rates as time-decayed averages (each second's weight falls by e every `tauSeconds`): a batch's merges, minutes
 * without an input finishing, lower the rate gradually instead of zeroing it, and inputs of different sizes weigh
 * by their bytes. The ETA is the bytes still to stage over that rate.
 */
export class ProgressMeter {
  private last: IngestProgress | null = null;
  private readonly t0: number;
  private tPrev: number;
  private prevWork = 0;
  private prevLevels = 0;
  private wBytes = 0;
  private wLevels = 0;
  private wTime = 0;

  constructor(
    private readonly tauSeconds = 60,
    now: number = performance.now(),
  ) {
    this.t0 = now;
    this.tPrev = now;
  }

  update(p: IngestProgress, now: number = performance.now()): void {
    this.last = p;
    this.advance(now);
  }

  figures(now: number = performance.now()): ProgressFigures {
    this.advance(now);
    const p = this.last;
    const rate = this.wTime > 0 ? this.wBytes / this.wTime : 0;
    const left = p ? p.bytes - p.bytes_done : 0;
    return {
      phase: p?.phase ?? 'start',
      inputs: p?.inputs ?? 0,
      inputs_done: p?.inputs_done ?? 0,
      bytes: p?.bytes ?? 0,
      bytes_done: p?.bytes_done ?? 0,
      batches: p?.batches ?? 0,
      level_updates: p?.level_updates ?? 0,
      level_updates_per_second: this.wTime > 0 ? Math.round(this.wLevels / this.wTime) : 0,
      bytes_per_second: Math.round(rate),
      elapsed_seconds: Math.round((now - this.t0) / 100) / 10,
      // Every byte staged but the last batch still being written: its time is not told by bytes, so no ETA.
      eta_seconds: left > 0 ? (rate > 0 ? Math.round(left / rate) : null) : p?.phase === 'done' ? 0 : null,
    };
  }

  private advance(now: number): void {
    const dt = (now - this.tPrev) / 1000;
    if (dt <= 0) return;
    const work = this.last ? this.last.bytes_done - this.last.bytes_skipped : 0;
    const levels = this.last?.level_updates ?? 0;
    const keep = Math.exp(-dt / this.tauSeconds);
    this.wBytes = this.wBytes * keep + (work - this.prevWork);
    this.wLevels = this.wLevels * keep + (levels - this.prevLevels);
    this.wTime = this.wTime * keep + dt;
    this.prevWork = work;
    this.prevLevels = levels;
    this.tPrev = now;
  }
}

export type ProgressDisplay = {
  onProgress(p: IngestProgress): void;
  /** Ends the display (clears the terminal line; logs the final figures). */
  stop(): void;
};

/** Off a terminal: one pino line every `everySeconds` with the figures as fields, and one at the end. */
export function logProgress(log: Logger, opts: { everySeconds: number }): ProgressDisplay {
  const meter = new ProgressMeter();
  let started = false;
  const timer = setInterval(
    () => {
      if (started) log.info(meter.figures(), 'ingest progress');
    },
    Math.max(opts.everySeconds, 0.05) * 1000,
  );
  timer.unref();
  return {
    onProgress(p) {
      started = true;
      meter.update(p);
    },
    stop() {
      clearInterval(timer);
      if (started) log.info(meter.figures(), 'ingest progress');
      started = false;
    },
  };
}

/** The terminal line: counts, sizes, rate, clock and phase, most important first (it is cut to the width). */
export function progressLine(f: ProgressFigures): string {
  const eta = f.eta_seconds === null ? '--' : clock(f.eta_seconds);
  return (
    `ingest ${f.inputs_done}/${f.inputs} inputs  ${size(f.bytes_done)}/${size(f.bytes)}  ` +
    `${count(f.level_updates_per_second)} updates/s  ${clock(f.elapsed_seconds)} ETA ${eta}  ${f.phase}`
  );
}

function size(b: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let v = b;
  let u = 0;
  while (v >= 1000 && u < units.length - 1) {
    v /= 1000;
    u += 1;
  }
  return `${u === 0 ? v : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[u]}`;
}

function count(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return String(n);
}

function clock(seconds: number): string {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}
