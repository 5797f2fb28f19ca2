import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { ENDPOINTS, endpointUrls, newPagings, type EndpointName, type EndpointsOptions } from './endpoints.js';
import { DEFAULT_GET, getWithRetries, type GetOptions } from './http-get.js';
import { closedPollName, endLine, errorLine, pageLine, PollFile, pollStartLine, removeAbandonedPoll } from './poll-file.js';

export type CataloguePollerOptions = {
  outDir: string;
  /** `PMLAKE_RECORDER_ID`: names the files. */
  pollerId: string;
  gammaUrl: string;
  clobUrl: string;
  /** `PMLAKE_CATALOGUE_SECONDS`: polls start at wall-clock multiples of it. */
  periodSeconds: number;
  /** Gamma's `limit` per page (default 100, what the venue takes on `/markets/keyset`). */
  gammaLimit?: number;
  /** Pages per endpoint after which a paging is cut as endless (default 10 000). */
  maxPages?: number;
  http?: Partial<Omit<GetOptions, 'signal' | 'onRetry'>>;
  log: Logger;
  /** Called after each poll put in place. */
  onPoll?: (summary: PollSummary) => void;
};

export type PollSummary = {
  file: string;
  startedAt: string;
  pages: number;
  /** Records (markets, events) in the pages read, per endpoint. */
  records: Record<EndpointName, number>;
  complete: Record<EndpointName, boolean>;
  seconds: number;
};

const perEndpoint = <T>(v: T): Record<EndpointName, T> => Object.fromEntries(ENDPOINTS.map((e) => [e, v])) as Record<EndpointName, T>;

/**
 * `pmlake catalogue`: asks Gamma markets, Gamma events and CLOB markets for the whole catalogue, page by page to
 * the end, and writes each poll's answers into one poll file (docs/catalogue-format.md). One poll at once on
 * start, then one every period at wall-clock multiples of it. A poll that fails part-way still ends its file, with
 * `complete` false for the endpoints it could not page to their end; a poll interrupted by `stop()` is removed.
 */
export class CataloguePoller {
  private readonly abort = new AbortController();
  private readonly endpoints: EndpointsOptions;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private stopped = false;
  polls = 0;
  failures = 0;

  constructor(private readonly opts: CataloguePollerOptions) {
    this.endpoints = { gammaUrl: opts.gammaUrl, clobUrl: opts.clobUrl, gammaLimit: opts.gammaLimit ?? 100, maxPages: opts.maxPages ?? 10_000 };
  }

  /** Removes a killed poller's open file, creates the directory if needed, polls at once and keeps polling. */
  static async start(opts: CataloguePollerOptions): Promise<CataloguePoller> {
    const poller = await CataloguePoller.prepare(opts);
    poller.run();
    return poller;
  }

  /** The poller without its schedule (for `--once`): the directory ready, an abandoned open file removed. */
  static async prepare(opts: CataloguePollerOptions): Promise<CataloguePoller> {
    await fs.promises.mkdir(opts.outDir, { recursive: true });
    if (await removeAbandonedPoll(opts.outDir, opts.pollerId)) {
      opts.log.warn({ dir: opts.outDir, poller: opts.pollerId }, 'removed the unfinished poll of a poller that did not stop');
    }
    return new CataloguePoller(opts);
  }

  /** One poll, start to end; null when `stop()` interrupted it (its open file is removed). */
  async pollOnce(): Promise<PollSummary | null> {
    const t0 = Date.now();
    let started = t0;
    // Two polls started in one second would share a name, and a closed file is never overwritten.
    while (fs.existsSync(path.join(this.opts.outDir, closedPollName(started, this.opts.pollerId)))) {
      await new Promise((r) => setTimeout(r, 1000 - (started % 1000) + 1));
      started = Date.now();
    }
    const file = await PollFile.open(this.opts.outDir, this.opts.pollerId, started);
    try {
      const summary = await this.fill(file, started);
      if (summary === null) {
        await file.discard();
        return null;
      }
      const closed = await file.close();
      this.polls++;
      const done: PollSummary = { ...summary, file: closed, seconds: (Date.now() - started) / 1000 };
      this.opts.log.info(
        {
          file: path.basename(closed),
          pages: done.pages,
          markets: done.records.gamma_markets,
          records: done.records,
          seconds: done.seconds,
          complete: done.complete,
        },
        'catalogue poll',
      );
      this.opts.onPoll?.(done);
      return done;
    } catch (err) {
      await file.discard();
      throw err;
    }
  }

  private async fill(file: PollFile, started: number): Promise<Omit<PollSummary, 'file' | 'seconds'> | null> {
    const { log } = this.opts;
    const records = perEndpoint(0);
    const complete = perEndpoint(false);
    let pages = 0;
    await file.write(pollStartLine(this.opts.pollerId, started, endpointUrls(this.endpoints)));
    const http: GetOptions = {
      ...DEFAULT_GET,
      ...this.opts.http,
      signal: this.abort.signal,
      onRetry: (r) => log.warn(r, 'catalogue page retried'),
    };
    for (const paging of newPagings(this.endpoints)) {
      for (;;) {
        const url = paging.url();
        const res = await getWithRetries(url, http);
        if (this.stopped) return null;
        const at = Date.now();
        if (!res.ok) {
          log.error({ endpoint: paging.name, url, status: res.status, message: res.message }, 'catalogue page failed; endpoint stopped for this poll');
          await file.write(errorLine(paging.name, url, at, res.status, res.message, res.body));
          break;
        }
        const read = paging.read(res.body);
        if (!read.ok) {
          log.error({ endpoint: paging.name, url, message: read.message }, 'catalogue page unusable; endpoint stopped for this poll');
          await file.write(errorLine(paging.name, url, at, res.status, read.message, res.body));
          break;
        }
        await file.write(pageLine(paging.name, url, at, res.status, res.body));
        pages++;
        records[paging.name] += read.records;
        if (read.done) {
          complete[paging.name] = true;
          break;
        }
      }
    }
    await file.write(endLine(Date.now(), complete, pages));
    return { startedAt: new Date(started).toISOString(), pages, records, complete };
  }

  /** The next wall-clock multiple of the period strictly after `now`. */
  nextPollAt(now = Date.now()): number {
    const p = this.opts.periodSeconds * 1000;
    return (Math.floor(now / p) + 1) * p;
  }

  private run(): void {
    if (this.stopped) return;
    this.running = this.pollOnce()
      .catch((err: unknown) => {
        // A disk that refuses the file: logged, and the next period tries again; the role goes on.
        this.failures++;
        this.opts.log.error({ err }, 'catalogue poll failed');
      })
      .finally(() => {
        this.running = null;
        if (this.stopped) return;
        this.timer = setTimeout(() => this.run(), Math.max(0, this.nextPollAt() - Date.now()));
      });
  }

  /** Stops polling: a poll in progress is cut (its requests aborted, its open file removed). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
    while (this.running) await this.running;
  }
}
