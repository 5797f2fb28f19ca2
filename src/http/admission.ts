import type { Request, Response } from 'express';
import type { Config } from '../config.js';
import { Unavailable } from '../errors.js';

/**
 * Load shedding: bounded concurrency per cost class. Every route names its class in the route table
 * (src/http/route.ts `cost`); a class with a limit admits that many requests at a time and queues the rest
 * first in, first out. A request still queued at the deadline, or arriving to a full queue, is answered 503
 * with Retry-After — refunded like every 5xx (rate-limit slot given back, not counted in usage, no bytes
 * metered: it never reached a handler). Without classes, a crowd paging the busiest market's trades queues
 * every cheap market lookup behind DuckDB scans.
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

/** The classes of one app. Unbounded classes have no queue object at all. */
export class Admission {
  private readonly queues: Partial<Record<CostClass, AdmissionQueue>> = {};

  constructor(private readonly config: AdmissionConfig) {
    for (const [name, c] of Object.entries(config.classes) as [CostClass, ClassLimits][]) {
      if (c.concurrency > 0) this.queues[name] = new AdmissionQueue(c.concurrency, c.maxQueue);
    }
  }

  queue(cost: CostClass): AdmissionQueue | undefined {
    return this.queues[cost];
  }

  /**
   * Admits the request into its class (true), or answers why not: throws the 503 when the queue is full or
   * the deadline passed; false when the client went away while it waited (nothing left to answer). The slot
   * is given back when the response closes (sent, failed or the client gone) — 'close' is emitted once per
   * response, so exactly once.
   */
  async admit(cost: CostClass, req: Request, res: Response): Promise<boolean> {
    const q = this.queues[cost];
    if (!q) return true;
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
    return true;
  }
}
