import type { Logger } from 'pino';
import { PaymentRequired, QuotaExceeded, RateLimited, Unauthorized, type ServiceError } from '../errors.js';
import { sql } from '../state/sql.js';
import type { ApiKeyRow, StateStore, UserRow } from '../state/store.js';
import { coverage, entitlementOf } from './entitlements.js';
import type { UsageTicket } from './meter.js';
import type { Principal } from './principal.js';

/**
 * Every long-lived answer of a process — WebSocket replays, NDJSON replays, file downloads — is a `LiveStream`
 * held here, so the rules a request obeys hold for its whole life:
 * - **fair use across everything in flight**: a stream sends only bytes it reserved on its usage ticket
 *   (`take`), and reservations are granted in one state transaction per grant against what the user has left
 *   (every pull in flight on every replica counted), so a user's concurrent streams together stay within it;
 * - **standing**: while streams are open, a change to the state database (the store's change stamp: a commit on
 *   SQLite, a notification on PostgreSQL from any replica) and a periodic sweep re-check each stream's key,
 *   account and plan; one no longer allowed is stopped (`signal` aborts with its `StreamStop`);
 * - **fair shares**: at most `perUser` streams of one user at once in this process; one more is 429 with
 *   Retry-After, so one user cannot take every slot the process has.
 */
export type StreamStopCode = 'fair_use_cap' | 'key_revoked' | 'account_deleted' | 'plan_changed';

export type StreamStop = { code: StreamStopCode; message: string };

export type StreamsOptions = {
  perUser: number;
  log?: Logger;
  /** How often the change stamp is looked at while streams are open. */
  checkMs?: number;
  /** A sweep re-checks every stream at least this often even without a change (expiry, a lapsed subscription). */
  sweepMs?: number;
  now?: () => Date;
};

/** The first reservation a stream asks for; each next one doubles, up to MAX_GRANT. */
const FIRST_GRANT = 256 * 1024;
const MAX_GRANT = 16 * 1024 * 1024;
/** A refused stream may try again when one of the user's streams may have ended. */
const RETRY_AFTER_S = 5;

export class LiveStream {
  private readonly abort = new AbortController();
  private ticket: UsageTicket | null = null;
  private granted = 0;
  private spent = 0;
  private nextGrant = FIRST_GRANT;
  private pending: Promise<boolean> | null = null;
  private stopReason: StreamStop | null = null;

  constructor(
    readonly principal: Principal,
    /** The plan data sets the stream serves: its standing is re-checked against each. */
    readonly datasets: readonly string[],
    private readonly release: (s: LiveStream) => void,
  ) {}

  /** Aborted when the registry stops the stream; `stopped` says why. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get stopped(): StreamStop | null {
    return this.stopReason;
  }

  /** Bytes taken so far (what was handed to the client's socket). */
  get bytes(): number {
    return this.spent;
  }

  /** Reserved and not yet taken: what the stream may still send without asking. */
  get left(): number {
    return Math.max(0, this.granted - this.spent);
  }

  /** The usage ticket the stream's bytes are reserved on (after the meter's `begin`). */
  bind(ticket: UsageTicket): void {
    this.ticket = ticket;
  }

  /**
   * Takes `n` bytes before sending them: true at once while the reservation covers them, else a promise of one
   * more grant. False: the user's fair use has no room for them (or the stream was stopped); nothing was taken,
   * and the stream should end with its fair-use answer.
   */
  take(n: number): true | Promise<boolean> {
    if (this.stopReason) return Promise.resolve(false);
    if (this.spent + n <= this.granted) {
      this.spent += n;
      return true;
    }
    return this.grow(n);
  }

  private async grow(n: number): Promise<boolean> {
    // One grant at a time: a second caller waits for the first and tries again.
    while (this.pending) await this.pending.catch(() => {});
    if (this.stopReason) return false;
    if (this.spent + n <= this.granted) {
      this.spent += n;
      return true;
    }
    this.pending = (async () => {
      // A grant may be less than asked (near the end of the allowance each is at most half of what is left,
      // so the user's other streams get theirs): ask until the chunk is covered or nothing more is granted.
      while (this.spent + n > this.granted && !this.stopReason) {
        const want = Math.max(n - this.left, this.nextGrant);
        const got = this.ticket ? await this.ticket.reserve(want) : want;
        this.granted += got;
        if (got >= want) this.nextGrant = Math.min(MAX_GRANT, this.nextGrant * 2);
        if (got === 0) return false;
      }
      return true;
    })();
    try {
      await this.pending;
    } finally {
      this.pending = null;
    }
    if (this.spent + n > this.granted || this.stopReason) return false;
    this.spent += n;
    return true;
  }

  /** Ends the stream from outside (revocation, plan change): `signal` aborts with the reason. */
  stop(reason: StreamStop): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.abort.abort(reason);
  }

  /** The stream is over: its slot goes back. Idempotent. */
  close(): void {
    this.release(this);
  }
}

export class StreamRegistry {
  private readonly byUser = new Map<string, Set<LiveStream>>();
  private timer: NodeJS.Timeout | null = null;
  private stamp = '';
  private lastSweep = 0;
  private checking = false;
  private closed = false;
  private readonly checkMs: number;
  private readonly sweepMs: number;
  private readonly now: () => Date;

  constructor(
    private readonly store: StateStore,
    private readonly opts: StreamsOptions,
  ) {
    this.checkMs = opts.checkMs ?? 250;
    this.sweepMs = opts.sweepMs ?? 5_000;
    this.now = opts.now ?? (() => new Date());
  }

  /** Streams open now, all users. */
  get open(): number {
    let n = 0;
    for (const s of this.byUser.values()) n += s.size;
    return n;
  }

  /** Streams of one user open now. */
  openOf(userId: string): number {
    return this.byUser.get(userId)?.size ?? 0;
  }

  /**
   * A new stream of `principal`, counted at once (before any await of the caller's), or 429 when the user
   * already has `perUser` open.
   */
  admit(principal: Principal, datasets: readonly string[]): LiveStream {
    const mine = this.byUser.get(principal.userId) ?? new Set<LiveStream>();
    if (mine.size >= this.opts.perUser) {
      throw new RateLimited(
        RETRY_AFTER_S,
        {},
        {
          code: 'too_many_streams',
          message: `At most ${this.opts.perUser} replays, streams and downloads of one account at once; one must end first`,
        },
      );
    }
    const live = new LiveStream(principal, datasets, (s) => this.release(s));
    mine.add(live);
    this.byUser.set(principal.userId, mine);
    this.watch();
    return live;
  }

  /** The process is stopping (before the state store closes): no more checks. */
  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private release(s: LiveStream): void {
    const mine = this.byUser.get(s.principal.userId);
    if (!mine?.delete(s)) return;
    if (mine.size === 0) this.byUser.delete(s.principal.userId);
    if (this.byUser.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private watch(): void {
    if (this.timer || this.closed) return;
    this.stamp = this.store.changeStamp();
    this.lastSweep = Date.now();
    this.timer = setInterval(() => void this.tick(), this.checkMs);
    this.timer.unref();
  }

  /** Re-checks every open stream when the state changed or the sweep is due. */
  async tick(force = false): Promise<void> {
    if (this.checking || this.closed) return;
    this.checking = true;
    try {
      const stamp = this.store.changeStamp();
      if (!force && stamp === this.stamp && Date.now() - this.lastSweep < this.sweepMs) return;
      this.stamp = stamp;
      this.lastSweep = Date.now();
      for (const [userId, streams] of [...this.byUser]) await this.checkUser(userId, [...streams]);
    } catch (err) {
      // The state out of reach: streams go on (their next grant fails on its own); looked at again next tick.
      this.stamp = '';
      this.opts.log?.warn({ err }, 'stream standing not checked');
    } finally {
      this.checking = false;
    }
  }

  private async checkUser(userId: string, streams: LiveStream[]): Promise<void> {
    const at = this.now();
    const user = await this.store.get<UserRow & { deleted_at: string | null }>(sql`SELECT * FROM users WHERE id = ${userId}`);
    if (!user || user.deleted_at) {
      for (const s of streams) s.stop({ code: 'account_deleted', message: 'The account was deleted' });
      return;
    }
    const ent = await entitlementOf(this.store, user, at);
    const keys = new Map<string, boolean>();
    for (const s of streams) {
      const keyId = s.principal.keyId;
      if (keyId !== null) {
        if (!keys.has(keyId)) keys.set(keyId, keyLive(await this.store.get<ApiKeyRow>(sql`SELECT * FROM api_keys WHERE id = ${keyId}`), userId, at));
        if (!keys.get(keyId)) {
          s.stop({ code: 'key_revoked', message: 'The API key was revoked or has expired' });
          continue;
        }
      }
      for (const d of s.datasets) {
        const cov = coverage(ent, d, 'download');
        if (cov.ok) continue;
        s.stop({ code: 'plan_changed', message: cov.message });
        break;
      }
    }
  }
}

function keyLive(row: ApiKeyRow | undefined, userId: string, at: Date): boolean {
  if (!row || row.user_id !== userId || row.revoked_at) return false;
  const t = at.getTime();
  for (const end of [row.expires_at, row.scheduled_revoke_at]) if (end && Date.parse(end) <= t) return false;
  return true;
}

/** A stop as the HTTP answer of a stream that had not started yet (429, 401 or 402, as a request would get). */
export function stopError(stop: StreamStop): ServiceError {
  if (stop.code === 'fair_use_cap') return new QuotaExceeded({ code: 'fair_use_cap', message: stop.message });
  if (stop.code === 'plan_changed') return new PaymentRequired({ code: 'upgrade_required', message: stop.message });
  return new Unauthorized(stop.message);
}
