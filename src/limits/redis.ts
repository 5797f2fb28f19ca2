import { Redis } from 'ioredis';
import { Unavailable } from '../errors.js';
import type { Logger } from '../log.js';
import type { CounterStore, Hits } from './counter.js';
import { downloadRateExceeded, type DownloadRateLimiter, type RateWindow } from './download-rate.js';

/**
 * Limits shared by every replica, in Redis (PMLAKE_REDIS_URL). Each hit is one Lua script, so checking and
 * counting are one atomic step on the server and one round trip: two replicas can never both take the 60th slot.
 *
 * The client is ioredis rather than node-redis: `defineCommand` sends a script by EVALSHA and falls back to
 * EVAL by itself on NOSCRIPT (a restarted Redis has an empty script cache), and the failure behaviour this
 * needs is plain options: no offline queue (`enableOfflineQueue: false`, `maxRetriesPerRequest: 0`: a command
 * while Redis is away fails at once instead of waiting in an unbounded queue), a bounded connect and command
 * timeout, and reconnection forever with a bounded back-off, so the service recovers by itself when Redis returns.
 *
 * Times are the calling replica's clock (ms), as in the in-process store: the window's end identifies the window
 * a refund belongs to. Replicas are expected to run NTP; a skew only moves a window's end by that skew.
 * Every failure to reach Redis becomes the core's Unavailable (503, a detail naming no address): nothing is
 * counted and nothing is let through.
 */
const UNAVAILABLE_DETAIL = 'Rate limits are temporarily unavailable; please retry shortly';
const CONNECT_TIMEOUT_MS = 1000;
const COMMAND_TIMEOUT_MS = 2000;
/** Keys outlive their window by this much: the scripts decide on the stored window end, the TTL only collects. */
const TTL_MARGIN_MS = 5000;

// KEYS[1]: a bucket. ARGV: now; the end of a window that would start now; the key's time to live (ms).
const HIT_LUA = `
local reset = tonumber(redis.call('HGET', KEYS[1], 'reset'))
if reset == nil or reset <= tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'hits', 1, 'reset', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, tonumber(ARGV[2])}
end
return {redis.call('HINCRBY', KEYS[1], 'hits', 1), reset}
`;

// KEYS[1]: a bucket. ARGV[1]: the end of the window the hit was counted in. Never below zero.
const REFUND_LUA = `
local w = redis.call('HMGET', KEYS[1], 'hits', 'reset')
if w[2] and tonumber(w[2]) == tonumber(ARGV[1]) and tonumber(w[1]) > 0 then
  redis.call('HINCRBY', KEYS[1], 'hits', -1)
end
return 0
`;

// KEYS[1]: a user's downloads holding a slot (sorted set: download id scored by its start, ms). ARGV: now, the
// download id, then (limit, window ms) pairs. Refuses with the first full window and its oldest start, or adds
// the download to every window at once. Same rule as the state store's: counted when start > now - window.
// A refusal answers {0, the window's number (1-based), the start of its oldest download}.
const DOWNLOAD_LUA = `
local now = tonumber(ARGV[1])
local longest = 0
for i = 3, #ARGV, 2 do longest = math.max(longest, tonumber(ARGV[i + 1])) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - longest))
for i = 3, #ARGV, 2 do
  local limit = tonumber(ARGV[i])
  local since = string.format('(%d', now - tonumber(ARGV[i + 1]))
  if redis.call('ZCOUNT', KEYS[1], since, '+inf') >= limit then
    local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], since, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    return {0, (i - 1) / 2, tonumber(oldest[2] or ARGV[1])}
  end
end
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('PEXPIRE', KEYS[1], longest + ${TTL_MARGIN_MS})
return {1}
`;

type Scripts = {
  pmlakeHit(key: string, now: string, reset: string, ttl: string): Promise<[number, number]>;
  pmlakeRefund(key: string, reset: string): Promise<number>;
  pmlakeDownload(key: string, ...args: string[]): Promise<[number, number?, number?]>;
};
type Client = Redis & Scripts;

/** The Redis connection of a process's limits; failures logged once per outage, never thrown at the process. */
export class RedisLimits {
  private readonly client: Client;
  /** Set at the first failure of an outage, cleared when the connection is ready again: one log line each. */
  private outage = false;

  private constructor(
    url: string,
    private readonly log: Logger,
  ) {
    const client = new Redis(url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      // Hits of concurrent requests issued in one tick go out in one write (each still its own script and
      // answer): under many connections that saves redis-server a read and a write per hit.
      enableAutoPipelining: true,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      connectTimeout: CONNECT_TIMEOUT_MS,
      commandTimeout: COMMAND_TIMEOUT_MS,
      // Forever, at most a second apart: the limits come back on their own once Redis does.
      retryStrategy: (attempt) => Math.min(50 * attempt, 1000),
    });
    client.defineCommand('pmlakeHit', { numberOfKeys: 1, lua: HIT_LUA });
    client.defineCommand('pmlakeRefund', { numberOfKeys: 1, lua: REFUND_LUA });
    client.defineCommand('pmlakeDownload', { numberOfKeys: 1, lua: DOWNLOAD_LUA });
    // Without an 'error' listener ioredis reports each failed reconnect on the console.
    client.on('error', (err: Error) => this.failed(err));
    client.on('ready', () => {
      if (this.outage) this.recovered();
    });
    this.client = client as Client;
  }

  /**
   * Connects, waiting at most the connect timeout: a service whose Redis is down still starts, and answers 503
   * on limited routes until Redis is reachable.
   */
  static async open(url: string, log: Logger): Promise<RedisLimits> {
    const limits = new RedisLimits(url, log);
    // connectTimeout bounds the TCP connect only; a server that accepts and never answers the ready check must
    // not hold the start-up either (the client keeps trying in the background).
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, 2 * CONNECT_TIMEOUT_MS)));
    await Promise.race([limits.client.connect().catch((err: unknown) => limits.failed(err)), late]);
    clearTimeout(timer);
    return limits;
  }

  counterStore(prefix: string, windowMs: number): CounterStore {
    return new RedisCounterStore(this, prefix, windowMs);
  }

  downloadRate(): DownloadRateLimiter {
    return new RedisDownloadRate(this);
  }

  /** Runs one command; any failure (refused, timed out, disconnected) is the core's Unavailable. */
  async run<T>(command: (client: Client) => Promise<T>): Promise<T> {
    try {
      const out = await command(this.client);
      // A command timeout ends an outage without a reconnect ('ready'): the first success does.
      if (this.outage) this.recovered();
      return out;
    } catch (err) {
      this.failed(err);
      throw new Unavailable(UNAVAILABLE_DETAIL, 1);
    }
  }

  async close(): Promise<void> {
    // Counters are written by each script as it runs: nothing to flush, so no QUIT round trip to wait for.
    this.client.disconnect();
  }

  private recovered(): void {
    this.outage = false;
    this.log.info('rate limits: Redis is reachable again');
  }

  private failed(err: unknown): void {
    // Once per outage: while Redis is away every limited request and every reconnect attempt fails.
    if (this.outage) return;
    this.outage = true;
    this.log.warn({ err }, 'rate limits: Redis is unreachable; limited requests are answered 503 until it returns');
  }
}

/** Fixed windows in Redis hashes (hits, reset), keyed `pmlake:rl:<prefix>:<bucket>`. */
class RedisCounterStore implements CounterStore {
  constructor(
    private readonly redis: RedisLimits,
    private readonly prefix: string,
    private readonly windowMs: number,
  ) {}

  async increment(key: string, now: number): Promise<Hits> {
    const [hits, resetAt] = await this.redis.run((c) =>
      c.pmlakeHit(this.key(key), String(now), String(now + this.windowMs), String(this.windowMs + TTL_MARGIN_MS)),
    );
    return { hits: Number(hits), resetAt: Number(resetAt) };
  }

  async decrement(key: string, resetAt: number): Promise<void> {
    await this.redis.run((c) => c.pmlakeRefund(this.key(key), String(resetAt)));
  }

  private key(bucket: string): string {
    return `pmlake:rl:${this.prefix}:${bucket}`;
  }
}

class RedisDownloadRate implements DownloadRateLimiter {
  constructor(private readonly redis: RedisLimits) {}

  async acquire(userId: string, downloadId: string, windows: readonly RateWindow[], at: Date): Promise<void> {
    const now = at.getTime();
    const args = windows.flatMap((w) => [String(w.limit), String(w.windowMs)]);
    const [ok, which, oldest] = await this.redis.run((c) => c.pmlakeDownload(this.key(userId), String(now), downloadId, ...args));
    if (Number(ok) === 1) return;
    const full = windows[Number(which) - 1]!;
    throw downloadRateExceeded(full.limit, Number(oldest) + full.windowMs, now);
  }

  async release(userId: string, downloadId: string): Promise<void> {
    await this.redis.run((c) => c.zrem(this.key(userId), downloadId));
  }

  private key(userId: string): string {
    return `pmlake:dl:${userId}`;
  }
}
