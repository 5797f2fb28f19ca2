import type { Request, Response } from 'express';
import type { Config } from '../config.js';
import { Unavailable } from '../errors.js';

/**
 * Load shedding and the event loop's fair share. Every route names its class in the route table
 * (src/http/route.ts `cost`); a class with a limit admits that many requests at a time and queues the rest
 * first in, first out. A request still queued at the deadline, or arriving to a full queue, is answered 503
 * with Retry-After — refunded like every 5xx (rate-limit slot given back, not counted in usage, no bytes
 * metered: it never reached a handler). Without classes, a crowd paging the busiest market's trades queues
 * every cheap market lookup behind DuckDB scans.
 *
 * Slots alone do not share the cores: a scan holds its slot across several DuckDB calls, and each call's
 * completion is handled by the one event loop. A crowd of cheap requests (answered from memory, each wholly in
 * the turn its bytes arrive in) made every turn long, so a scan waited one long turn per call and the scans'
 * slots sat idle in DuckDB's terms (the figures: bench/results/issue10-mixed-classes.json).
 * So while a slotted class (query, stream) has requests in flight or waiting, requests that take no slot —
 * the cheap class, and handler-admitted routes before they know they must scan — start at most
 * `cheapPerTurn` per turn of the event loop (`TurnPacer`); the rest wait for the next turn, and between two
 * turns every DuckDB call that completed is handled. The wait is a turn or a few, never a 503.
 */
export type CostClass = 'cheap' | 'query' | 'stream';

/**
 * Per class: `concurrency` requests in flight at once (0 = unbounded, no queue), `maxQueue` allowed to wait;
 * `queueTimeoutMs`: how long one may wait before it is answered 503 (PMLAKE_*_CONCURRENCY, PMLAKE_QUEUE_*).
 */
export type AdmissionConfig = Config['admission'];
type ClassLimits = AdmissionConfig['classes'][CostClass];

type Waiter = { grant: () => void; done: boolean };

/** One class's slots and FIFO queue. `acquire` resolves true once admitted, false when it gave up. */
export class AdmissionQueue {
  private active = 0;
  /** FIFO of waiters from `head` on; entries that timed out or were abandoned stay until passed over. */
  private readonly waiting: Waiter[] = [];
  private head = 0;
  /** Waiters still waiting (the array may also hold settled ones). */
  private pending = 0;

  constructor(
    readonly limit: number,
    readonly maxQueue: number,
  ) {}

  get inFlight(): number {
    return this.active;
  }

  get queued(): number {
    return this.pending;
  }

  /** A slot now, without allocating: the path of every request while the class is below its limit. */
  tryAcquire(): boolean {
    if (this.active < this.limit && this.queued === 0) {
      this.active++;
      return true;
    }
    return false;
  }

  /**
   * Waits for a slot until `timeoutMs` passes or `abandon` is called (the client went away). The caller must
   * call release() exactly once after a true answer.
   */
  acquire(timeoutMs: number, onAbandon?: (abandon: () => void) => void): Promise<boolean> {
    if (this.tryAcquire()) return Promise.resolve(true);
    if (this.queued >= this.maxQueue) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const w: Waiter = { done: false, grant: () => undefined };
      const settle = (admitted: boolean): void => {
        if (w.done) return;
        w.done = true;
        this.pending--;
        clearTimeout(timer);
        resolve(admitted);
      };
      w.grant = () => settle(true);
      const timer = setTimeout(() => settle(false), timeoutMs);
      this.compact();
      this.waiting.push(w);
      this.pending++;
      onAbandon?.(() => settle(false));
    });
  }

  /** Frees a slot and hands it to the oldest request still waiting. */
  release(): void {
    this.active--;
    while (this.head < this.waiting.length) {
      const w = this.waiting[this.head++]!;
      if (w.done) continue; // timed out or abandoned while queued
      this.active++;
      w.grant();
      break;
    }
    this.compact();
  }

  /** Drops passed-over and settled entries now and then, rather than shift() per grant (O(n) each). */
  private compact(): void {
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
    } else if (this.waiting.length - this.head > 4 * (this.pending + 64)) {
      // Many timed out behind a slot held for long: keep only the live waiters, in order.
      const live = this.waiting.slice(this.head).filter((w) => !w.done);
      this.waiting.length = 0;
      this.waiting.push(...live);
      this.head = 0;
    }
  }
}

/**
 * The event loop's turns shared between work that holds a slot and work that does not. A turn ends at the loop's
 * check phase (setImmediate); its poll phase before has handled the I/O that was ready — sockets, and the
 * DuckDB calls that completed (their napi completions come through libuv's poll like any I/O). While `active()`
 * (a slotted class has requests in flight or waiting), at most `perTurn` requests pass per turn: those beyond
 * wait, first in first out, and the next turn's check phase lets the next `perTurn` go, so each batch runs
 * after the completions that arrived meanwhile. While not active, every request passes at once (FIFO behind any
 * still waiting). `perTurn` 0: never paced.
 */
export class TurnPacer {
  /** Requests passed since the last turn began. */
  private started = 0;
  private readonly waiting: Waiter[] = [];
  private head = 0;
  private pending = 0;
  private scheduled = false;
  /** Requests that waited for a turn since start (for operators and tests). */
  paced = 0;
  /** The most requests any turn let through while paced. */
  maxPerTurn = 0;

  constructor(
    readonly perTurn: number,
    private readonly active: () => boolean,
  ) {}

  get queued(): number {
    return this.pending;
  }

  /** True: go now (no allocation); false: call wait(). */
  tryPass(): boolean {
    if (this.pending > 0) return false;
    if (this.perTurn === 0 || !this.active()) return true;
    if (this.started >= this.perTurn) return false;
    this.started++;
    if (this.started > this.maxPerTurn) this.maxPerTurn = this.started;
    this.schedule();
    return true;
  }

  /** Resolves true at the request's turn, false if `abandon` was called first (the client went away). */
  wait(onAbandon?: (abandon: () => void) => void): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const w: Waiter = { done: false, grant: () => undefined };
      const settle = (passed: boolean): void => {
        if (w.done) return;
        w.done = true;
        this.pending--;
        resolve(passed);
      };
      w.grant = () => settle(true);
      this.waiting.push(w);
      this.pending++;
      this.paced++;
      onAbandon?.(() => settle(false));
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.turn);
  }

  /** A new turn: the next `perTurn` waiters go (all of them once nothing is slotted any more). */
  private readonly turn = (): void => {
    this.scheduled = false;
    this.started = 0;
    const limit = this.perTurn > 0 && this.active() ? this.perTurn : Number.POSITIVE_INFINITY;
    while (this.started < limit && this.head < this.waiting.length) {
      const w = this.waiting[this.head++]!;
      if (w.done) continue; // abandoned while waiting
      this.started++;
      w.grant();
    }
    if (this.started > this.maxPerTurn && limit !== Number.POSITIVE_INFINITY) this.maxPerTurn = this.started;
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    // The count must start again next turn while requests are passing; an idle pacer schedules nothing.
    if (this.pending > 0 || this.started > 0) this.schedule();
  };
}

/** The classes of one app. Unbounded classes have no queue object at all. */
export class Admission {
  private readonly queues: Partial<Record<CostClass, AdmissionQueue>> = {};
  /** Turns of the event loop for requests that take no slot, while a slotted (non-cheap) class is busy. */
  readonly pacer: TurnPacer;

  constructor(private readonly config: AdmissionConfig) {
    for (const [name, c] of Object.entries(config.classes) as [CostClass, ClassLimits][]) {
      if (c.concurrency > 0) this.queues[name] = new AdmissionQueue(c.concurrency, c.maxQueue);
    }
    const slotted = [this.queues.query, this.queues.stream].filter((q): q is AdmissionQueue => q !== undefined);
    this.pacer = new TurnPacer(config.cheapPerTurn, () => slotted.some((q) => q.inFlight > 0 || q.queued > 0));
  }

  queue(cost: CostClass): AdmissionQueue | undefined {
    return this.queues[cost];
  }

  /**
   * Admits the request into its class (true), or answers why not: throws the 503 when the queue is full or
   * the deadline passed; false when the client went away while it waited (nothing left to answer). The slot
   * is given back when the response closes (sent, failed or the client gone) — 'close' is emitted once per
   * response, so exactly once. A cheap request then waits for its turn of the event loop (`pace`).
   */
  async admit(cost: CostClass, req: Request, res: Response): Promise<boolean> {
    const q = this.queues[cost];
    if (!q) return cost === 'cheap' ? this.pace(res) : true;
    let admitted = q.tryAcquire();
    if (!admitted) {
      const t0 = performance.now();
      admitted = await q.acquire(this.config.queueTimeoutMs, (abandon) => res.once('close', abandon));
      res.locals.queuedMs = Math.round(performance.now() - t0);
    }
    if (res.destroyed) {
      if (admitted) q.release();
      return false;
    }
    if (!admitted) {
      req.log.warn({ cost, in_flight: q.inFlight, queued: q.queued }, 'request shed: server busy');
      throw new Unavailable(`Server busy: too many ${cost} requests in progress; retry shortly`, this.config.queueTimeoutMs / 1000);
    }
    res.on('close', () => q.release());
    return cost === 'cheap' ? this.pace(res) : true;
  }

  /**
   * A request that takes no slot before its handler runs (the cheap class; a handler-admitted route until it
   * must scan) waits for its turn while a slotted class is busy (TurnPacer): true at once or at its turn (the
   * wait is added to the log line's queued_ms), false when the client went away meanwhile. Never a 503.
   */
  pace(res: Response): boolean | Promise<boolean> {
    if (this.pacer.tryPass()) return true;
    const t0 = performance.now();
    return this.pacer
      .wait((abandon) => res.once('close', abandon))
      .then((passed) => {
        res.locals.queuedMs = (res.locals.queuedMs ?? 0) + Math.round(performance.now() - t0);
        return passed && !res.destroyed;
      });
  }
}
