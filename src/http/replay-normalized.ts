import type { Request, Response } from 'express';
import { z } from 'zod';
import type { PullRequest, UsageTicket } from '../accounts/meter.js';
import type { LiveStream, StreamStop } from '../accounts/streams.js';
import { isoFromMicros } from '../lake/values.js';
import { normalizedMessages, resolveReplayAssets } from '../replay/normalized.js';
import { FIXED_TYPES, parseDataType, planKeyOfType, type DataType, type NormalizedMessage } from '../replay/normalized-types.js';
import type { RequestContext } from './context.js';
import { instantParam } from './params.js';
import { defineRoute, type Route, type RouteInput } from './route.js';
import { delayCap } from './orderbook/delay.js';
import { SocketDelivery } from './delivery.js';

/** GET /v1/replay/normalized: the normalized and computed streams (src/replay/) as NDJSON, metered like a download. */

const idList = (what: string) =>
  z
    .string()
    .max(20_000)
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0),
    )
    .describe(what);

const DataTypes = z
  .string()
  .min(1)
  .max(2000)
  .transform((v, ctx): DataType[] => {
    const out: DataType[] = [];
    for (const name of v.split(',').map((s) => s.trim())) {
      const r = parseDataType(name);
      if (r.ok) out.push(r.type);
      else ctx.addIssue({ code: 'custom', message: r.message });
    }
    return out;
  })
  .meta({ type: 'string', examples: ['book_change,trade,quote', 'book_snapshot_10_1s,trade_bar_1m,disconnect'] })
  .describe(
    `Comma-separated data types: ${FIXED_TYPES.join(', ')}, book_snapshot_{depth}_{interval} (depth 1–1000, interval 10ms–24h: 100ms, 1s, 10s, 1m, 1h; e.g. book_snapshot_10_1s, book_snapshot_25_100ms) and trade_bar_{interval} (any OHLCV timeframe, 1s–4w: trade_bar_10s, trade_bar_1m). ` +
      'book_change: each level change of the l2 tape (side, price, size; size 0 removes; is_snapshot for the levels of a full `book` message). ' +
      "trade: the venue's trade prints (source 'venue', with recv_ts) and the on-chain fills (source 'chain'). quote: best bid/ask and their sizes after each change. " +
      'book_snapshot: the book at each interval boundary (UTC multiples of the interval). trade_bar: OHLCV bars of the on-chain fills, equal to GET /v1/trades/ohlcv, each sent when it closes (ts = the bar’s end, open_ts its start). ' +
      "disconnect: each outage or gap the tape's integrity layer recorded (kind gap, silence, disconnect or capture_disconnect; from_ts, to_ts), at its start (at `from` for one under way then).",
  );

/** The window, the tokens and the data types of a normalized replay; the WebSocket form adds `speed`. */
export const NormalizedWindow = z.object({
  from: instantParam.describe('Window start (inclusive): ISO 8601, epoch seconds or milliseconds'),
  to: instantParam.describe('Window end (exclusive)'),
  assets: idList('Comma-separated outcome token ids').optional(),
  market_id: idList('Comma-separated numeric market ids (every outcome of each), or token ids').optional(),
  data_types: DataTypes,
});

/** A window that names its tokens and runs forward. */
export function checkNormalizedWindow(v: { from: bigint; to: bigint; assets?: string[]; market_id?: string[] }, ctx: z.RefinementCtx): void {
  if (v.from >= v.to) ctx.addIssue({ code: 'custom', path: ['from'], message: 'from must be before to', input: undefined });
  if ((v.assets?.length ?? 0) + (v.market_id?.length ?? 0) === 0) {
    ctx.addIssue({ code: 'custom', path: ['assets'], message: 'name the tokens: assets (token ids) or market_id (market ids)', input: undefined });
  }
}

const ReplayQuery = NormalizedWindow.superRefine(checkNormalizedWindow);

export const replayNormalizedRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/replay/normalized',
    cost: 'stream',
    auth: 'key',
    scope: 'download',
    limit: 'download',
    tag: 'Replay',
    summary:
      'Normalized and computed streams of a window as NDJSON, one message per line in time order (receive time for the tape), each naming type, asset_id, outcome, market_id, condition_id and ts',
    query: ReplayQuery,
    produces: ['application/x-ndjson'],
    handler: getNormalizedReplay,
  }),
];

/** The plan data sets the types need, each once: the first is billed, the others must be covered too. */
export function planKeys(types: readonly DataType[]): string[] {
  return [...new Set(types.map(planKeyOfType).filter((k) => k !== null))];
}

/** Lines are gathered up to this many bytes per write. */
const WRITE_BYTES = 64 * 1024;

/**
 * The stream's last line when it is cut short: `{"type":"error","code":…,"detail":…}` — `fair_use_cap` (the
 * plan's fair use has no room for the next lines), `key_revoked`, `account_deleted` or `plan_changed`. A
 * stream that ends without one is complete.
 */
function stopLine(stop: StreamStop): string {
  return `${JSON.stringify({ type: 'error', code: stop.code, detail: stop.message })}\n`;
}

async function getNormalizedReplay({ query: q, req, res }: RouteInput<{ query: typeof ReplayQuery }>, ctx: RequestContext): Promise<undefined> {
  const assets = await resolveReplayAssets(ctx.lake, ctx.markets, { assets: q.assets, marketIds: q.market_id });
  // A delayed plan sees books and quotes no later than its delay, as on GET /v1/orderbook/*.
  const cap = delayCap(req.principal);
  const to = cap !== null && q.to > cap ? cap : q.to;
  const keys = planKeys(q.data_types);
  const principal = req.principal!;
  const live = ctx.streams.admit(principal, keys.length > 0 ? keys : ['orderbook']);
  try {
    for (const k of keys.slice(1)) await ctx.meter.authorize(principal, { kind: 'download', dataset: k });
    const pull: PullRequest = {
      kind: 'download',
      dataset: keys[0] ?? 'orderbook',
      description: `/v1/replay/normalized ${q.data_types.map((t) => t.name).join(',')} ${assets.map((a) => a.asset_id).join(',')}`,
      estimatedBytes: 0,
      format: 'ndjson',
      start: isoFromMicros(q.from),
      end: isoFromMicros(to),
    };
    if (assets.length === 1) pull.marketId = assets[0]!.market_id;
    const ticket = await ctx.meter.begin(principal, pull);
    live.bind(ticket);
    await streamLines(req, res, live, ticket, (signal) => normalizedMessages(ctx.lake, { from: q.from, to, assets, dataTypes: q.data_types, signal }));
  } finally {
    live.close();
  }
  return undefined;
}

/** Streams the messages as NDJSON within the stream's fair use, and settles the ticket once. */
async function streamLines(
  req: Request,
  res: Response,
  live: LiveStream,
  ticket: UsageTicket,
  messages: (signal: AbortSignal) => AsyncIterable<NormalizedMessage>,
): Promise<void> {
  const stop = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished) stop.abort();
  };
  res.once('close', onClose);
  const onStop = (): void => stop.abort();
  live.signal.addEventListener('abort', onStop, { once: true });
  const it = messages(stop.signal)[Symbol.asyncIterator]();
  let next: IteratorResult<NormalizedMessage>;
  try {
    // The first message before the headers: a failure to start is still a proper error answer.
    next = await it.next();
  } catch (err) {
    res.off('close', onClose);
    await ticket.refund('replay failed to start');
    throw err;
  }
  res.status(200);
  res.setHeader('Content-Type', 'application/x-ndjson');
  res.setHeader('Cache-Control', 'no-store');
  const delivery = new SocketDelivery(res.socket!);
  let sent = 0;
  let rows = 0;
  let cut: StreamStop | null = null;
  /** Takes the lines' bytes from fair use and writes them; with too little left, the lines that fit, then the cut. */
  const flush = async (lines: string[]): Promise<void> => {
    const chunk = lines.join('');
    const bytes = Buffer.byteLength(chunk);
    const taken = live.take(bytes);
    if (taken === true || (await taken)) {
      sent += await write(res, chunk, stop.signal);
    } else if (!live.stopped) {
      let fit = '';
      for (const line of lines) {
        if (Buffer.byteLength(fit) + Buffer.byteLength(line) > live.left) break;
        fit += line;
      }
      if (fit.length > 0 && live.take(Buffer.byteLength(fit)) === true) sent += await write(res, fit, stop.signal);
      cut = { code: 'fair_use_cap', message: "The plan's monthly fair-use volume is reached; the stream ends here" };
    }
    delivery.wrote(sent);
  };
  try {
    let lines: string[] = [];
    let size = 0;
    for (; !next.done; next = await it.next()) {
      const line = `${JSON.stringify(next.value)}\n`;
      lines.push(line);
      size += line.length;
      rows += 1;
      if (size >= WRITE_BYTES) {
        await flush(lines);
        lines = [];
        size = 0;
      }
      if (stop.signal.aborted || cut) break;
    }
    if (!stop.signal.aborted && !cut && lines.length > 0) await flush(lines);
    cut ??= live.stopped;
    if (!res.destroyed && !res.writableEnded) {
      if (cut) res.write(stopLine(cut));
      await new Promise<void>((resolve) => res.end(resolve));
    }
  } catch (err) {
    res.off('close', onClose);
    live.signal.removeEventListener('abort', onStop);
    delivery.close();
    await it.return?.(undefined);
    await ticket.refund('replay failed mid-stream');
    res.destroy();
    req.log.error({ err }, 'normalized replay failed after headers were sent');
    res.locals.bytes = sent;
    return;
  }
  res.off('close', onClose);
  live.signal.removeEventListener('abort', onStop);
  await it.return?.(undefined);
  // A client that left is charged what reached it (src/http/delivery.ts); every other end, what was sent.
  const left = stop.signal.aborted && !live.stopped;
  const charged = left ? delivery.delivered(sent) : sent;
  delivery.close();
  await ticket.commit({ bytes: charged, rows: left || cut ? 0 : rows });
  res.locals.rows = rows;
  res.locals.bytes = sent;
}

/** Writes one chunk; when the socket is full, waits until it drains or the client leaves. Returns the bytes. */
async function write(res: Response, text: string, signal: AbortSignal): Promise<number> {
  const chunk = Buffer.from(text);
  if (!res.write(chunk) && !signal.aborted) {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        res.off('drain', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      res.once('drain', done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
  return chunk.length;
}
