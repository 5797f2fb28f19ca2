import type { Logger } from 'pino';
import { numberToHex, type Hex } from 'viem';
import { retryWaitMs } from '../retry.js';

/** A JSON-RPC error answer of the node (not a transport failure). */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly raw: string,
  ) {
    super(message);
  }
}

/** The node refused an eth_getLogs range (too many results, too wide, too slow): ask a smaller one. */
export class RangeRefused extends Error {}

class TimeoutError extends Error {}

/** The indexer was stopped while a call waited or backed off. */
export class RpcStopped extends Error {}

export type RpcCall = { method: string; params: unknown[] };

export type RpcClientOptions = {
  url: string;
  log: Logger;
  /** Aborts waits and requests on stop. */
  signal: AbortSignal;
  /** One request's deadline (default 30 s). */
  timeoutMs?: number;
  /** Full-jitter exponential back-off: the first ceiling and the largest (defaults 500 ms, 30 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Items per JSON-RPC batch (default 100): providers cap batches. */
  maxBatch?: number;
};

/** The providers' ways of saying a log query is too large, by message; codes alone are reused for other faults. */
const RANGE_REFUSAL =
  /more than \d+ results|block range|range (?:is )?too (?:large|wide|big)|exceeds? (?:the )?max(?:imum)?(?: block)? range|limited to (?:a )?\d+|too many (?:logs|results)|response size|query timeout|range limit/i;
/** Rate limiting said inside a 200 answer, as some providers do. */
const RATE_LIMITED = /rate limit|too many requests|exceeded .*(?:capacity|quota)|throughput/i;

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new RpcStopped('stopped'));
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(new RpcStopped('stopped'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });

type Answer = { id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } };

/**
 * A JSON-RPC client over HTTP. Transient failures (network errors, timeouts, 429, 5xx, rate-limit answers) are
 * retried with full-jitter exponential back-off, `Retry-After` honoured up to its cap (src/retry.ts), for as long as
 * it takes: a long-running role waits out a provider's bad minute rather than crash. A range refusal surfaces as `RangeRefused`.
 */
export class RpcClient {
  private nextId = 1;
  retries = 0;

  constructor(private readonly opts: RpcClientOptions) {}

  /** One call; `rangeQuery` makes a timeout or a 413 mean "ask a smaller range". */
  async request(method: string, params: unknown[], rangeQuery = false): Promise<unknown> {
    const [answer] = await this.send([{ method, params }], rangeQuery);
    if (answer instanceof RpcError) throw answer;
    return answer;
  }

  /** Calls in batches; each result in order, or an `RpcError` in its place. */
  async batch(calls: RpcCall[]): Promise<unknown[]> {
    const out: unknown[] = [];
    const max = this.opts.maxBatch ?? 100;
    for (let i = 0; i < calls.length; i += max) out.push(...(await this.send(calls.slice(i, i + max), false, true)));
    return out;
  }

  private async send(calls: RpcCall[], rangeQuery: boolean, asBatch = false): Promise<unknown[]> {
    for (let attempt = 0; ; attempt++) {
      const { signal } = this.opts;
      if (signal.aborted) throw new RpcStopped('stopped');
      const ids = calls.map(() => this.nextId++);
      const body = calls.map((c, i) => ({ jsonrpc: '2.0', id: ids[i], method: c.method, params: c.params }));
      let retryAfter: string | null = null;
      let why: string;
      // One controller per request, its listener removed after: a long-running role must not pile listeners on `signal`.
      const ctl = new AbortController();
      const onStop = (): void => ctl.abort();
      signal.addEventListener('abort', onStop, { once: true });
      const timer = setTimeout(() => ctl.abort(new TimeoutError()), this.opts.timeoutMs ?? 30_000);
      try {
        const res = await fetch(this.opts.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(asBatch ? body : body[0]),
          signal: ctl.signal,
        });
        const text = await res.text();
        if (res.status === 413 && rangeQuery) throw new RangeRefused(`HTTP 413 ${text.slice(0, 200)}`);
        const answers = parseAnswers(text);
        if (res.ok && answers) {
          const transient = this.settle(calls, ids, answers, text, rangeQuery);
          if (transient === null) return this.results(ids, answers, text);
          why = transient;
        } else if (res.status === 429 || res.status >= 500 || (res.ok && !answers)) {
          const refusal = answers?.find((a) => typeof a.error?.message === 'string' && RANGE_REFUSAL.test(a.error.message));
          if (rangeQuery && refusal) throw new RangeRefused(String(refusal.error!.message));
          retryAfter = res.headers.get('retry-after');
          why = `HTTP ${res.status}${res.ok ? ' (not a JSON-RPC answer)' : ''}`;
        } else {
          throw new RpcError(res.status, `HTTP ${res.status}: ${text.slice(0, 300)}`, text);
        }
      } catch (err) {
        if (err instanceof RangeRefused || err instanceof RpcError) throw err;
        if (signal.aborted) throw new RpcStopped('stopped');
        const timedOut = ctl.signal.reason instanceof TimeoutError;
        if (rangeQuery && timedOut) throw new RangeRefused('the node timed out');
        why = timedOut ? 'timed out' : (err as Error).message;
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', onStop);
      }
      this.retries++;
      const wait = retryWaitMs(attempt, { baseMs: this.opts.baseDelayMs ?? 500, maxMs: this.opts.maxDelayMs ?? 30_000 }, retryAfter);
      this.opts.log.warn({ method: calls[0]?.method, calls: calls.length, attempt: attempt + 1, waitMs: wait, why }, 'JSON-RPC call failed; backing off');
      await sleep(wait, signal);
    }
  }

  /** Null when the answers can be returned; otherwise why they are worth asking again (a rate-limit answer). */
  private settle(calls: RpcCall[], ids: number[], answers: Answer[], text: string, rangeQuery: boolean): string | null {
    for (const a of answers) {
      const message = typeof a.error?.message === 'string' ? a.error.message : '';
      if (!a.error) continue;
      // Rate limiting first: a provider may say it with -32005 too, which would otherwise read as a range refusal.
      if (a.error.code === 429 || a.error.code === -32029 || RATE_LIMITED.test(message)) return `rate limited: ${message}`;
      if (rangeQuery && (RANGE_REFUSAL.test(message) || a.error.code === -32005)) throw new RangeRefused(message || text.slice(0, 200));
    }
    if (answers.length < calls.length && !ids.every((id) => answers.some((a) => a.id === id))) return 'answers missing from the batch';
    return null;
  }

  private results(ids: number[], answers: Answer[], text: string): unknown[] {
    return ids.map((id) => {
      const a = answers.find((x) => x.id === id) ?? (answers.length === 1 && ids.length === 1 ? answers[0] : undefined);
      if (!a) return new RpcError(-32603, 'no answer for this call', text.slice(0, 2000));
      if (a.error) return new RpcError(Number(a.error.code ?? 0), String(a.error.message ?? 'error'), JSON.stringify(a));
      return a.result;
    });
  }
}

function parseAnswers(text: string): Answer[] | null {
  try {
    const v = JSON.parse(text) as unknown;
    const list = Array.isArray(v) ? v : [v];
    return list.every((a) => typeof a === 'object' && a !== null) ? (list as Answer[]) : null;
  } catch {
    return null;
  }
}

export const hexBlock = (n: number): Hex => numberToHex(n);

/** A hex quantity of the node's (a block number, a chain id) as a number; anything else is the node's fault. */
export function quantity(v: unknown, what: string): number {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{1,16}$/.test(v)) throw new Error(`the node answered ${JSON.stringify(v)?.slice(0, 100)} for ${what}`);
  return Number(v);
}
