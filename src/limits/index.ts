import type { Logger } from '../log.js';
import { MemoryCounterStore, type CounterStore } from './counter.js';
import type { DownloadRateLimiter } from './download-rate.js';
import { RedisLimits } from './redis.js';

export { MemoryCounterStore, type CounterStore, type Hits } from './counter.js';
export { downloadRateExceeded, type DownloadRateLimiter, type RateWindow } from './download-rate.js';

/**
 * Where a process keeps its limits: the request limiter's buckets and the download rate. In process memory
 * (and the state store, for downloads) by default; in Redis, shared by every replica, when PMLAKE_REDIS_URL is
 * set. Built once by the composition root (src/compose.ts) and handed to those that count.
 */
export type Limits = {
  /** 'memory' or 'redis': for the start-up log line and the tests. */
  readonly where: 'memory' | 'redis';
  /** A counter store for fixed windows of `windowMs`; keys in a shared store are namespaced by `family`. */
  counters(family: string, windowMs: number): CounterStore;
  /** Download-rate slots shared across replicas; undefined: the usage meter counts them in the state store. */
  readonly downloadRate: DownloadRateLimiter | undefined;
  close(): Promise<void>;
};

export async function openLimits(redisUrl: string | undefined, log: Logger): Promise<Limits> {
  if (!redisUrl) {
    // One store per family, as Redis keys do: the replay's handshake counts in the default bucket the HTTP
    // limiter counts in (src/http/ratelimit.ts).
    const stores = new Map<string, MemoryCounterStore>();
    const counters = (family: string, windowMs: number): CounterStore => {
      const key = `${family}:${windowMs}`;
      let store = stores.get(key);
      if (!store) stores.set(key, (store = new MemoryCounterStore(windowMs)));
      return store;
    };
    return { where: 'memory', counters, downloadRate: undefined, close: async () => {} };
  }
  const redis = await RedisLimits.open(redisUrl, log);
  return {
    where: 'redis',
    counters: (family, windowMs) => redis.counterStore(family, windowMs),
    downloadRate: redis.downloadRate(),
    close: () => redis.close(),
  };
}
