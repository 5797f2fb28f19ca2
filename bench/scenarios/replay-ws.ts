import { WebSocket } from 'ws';
import { currentVersion } from '../../src/lake/versions.js';
import { peakTracker } from '../proc.js';
import { NotAvailable, sideBySide, timed, type BenchContext, type Scenario, type ScenarioRow } from '../runner.js';
import { atLeast, atMost, median, percentile } from '../stats.js';
import { fileList, ts, withBaselineDb } from './common.js';

/**
 * replay-ws: `GET /v1/replay/ws/market` — the venue's market channel replayed from the lake.
 *  - throughput: a fast client (speed=0) subscribed to the busiest tape market's tokens over its tape (at most a
 *    week), frames/s, against plain DuckDB streaming the same raw rows (that market's frames of the window, in
 *    receive order) into JS. Goal ≥ 1×.
 *  - fan-out: 50 clients at once over the same window, each its own user and market (round robin); the
 *    server's peak RSS (bounded: under 1.5 GB) and the slowest client's throughput against the median (none starved:
 *    ≥ 0.25×).
 *  - pacing: at speed=60 over a recorded stretch, each frame's arrival against its recorded offset / 60; the error
 *    p99 (goal ≤ 250 ms) — and the same at speed=1 over a short stretch.
 */

type Run = { frames: number; bytes: number; arrivals: number[]; closeCode: number; seconds: number };

function wsUrl(httpUrl: string, q: Record<string, string>): string {
  return `${httpUrl.replace(/^http/, 'ws')}/v1/replay/ws/market?${new URLSearchParams(q).toString()}`;
}

/** One replay connection to its close: frames (PONGs aside) and the arrival time of each, from the subscription. */
function replay(url: string, assets: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const arrivals: number[] = [];
    let frames = 0;
    let bytes = 0;
    let t0 = 0n;
    ws.on('open', () => {
      t0 = process.hrtime.bigint();
      ws.send(JSON.stringify({ assets_ids: assets, type: 'market' }));
    });
    ws.on('message', (d: Buffer) => {
      frames += 1;
      bytes += d.length;
      arrivals.push(Number(process.hrtime.bigint() - t0) / 1e6);
    });
    ws.on('error', reject);
    ws.on('close', (code) => resolve({ frames, bytes, arrivals, closeCode: code, seconds: Number(process.hrtime.bigint() - t0) / 1e9 }));
  });
}

export const replayWs: Scenario = {
  name: 'replay-ws',
  async run(ctx: BenchContext): Promise<ScenarioRow[]> {
    const b = ctx.lake.facts.busiestL2;
    if (!b.assetId || !b.conditionId) throw new NotAvailable('no L2 tape in the bench lake');
    // The busiest market's tape, at most 30 days of it: a throughput is timed over a stream long enough that the
    // fixed cost before the first frame (reported apart) does not decide it.
    const from = new Date(Math.floor(Date.parse(b.from) / 86_400_000) * 86_400_000).toISOString();
    const to = new Date(Math.min(Date.parse(b.to) + 1, Date.parse(from) + 30 * 86_400_000)).toISOString();
    const days: string[] = [];
    for (let t = Date.parse(from); t < Date.parse(to); t += 86_400_000) days.push(new Date(t).toISOString().slice(0, 10));
    const rawFiles = currentVersion(ctx.lake.lakeDir).partitionFiles('raw', days);
    if (rawFiles.length === 0) throw new NotAvailable(`no raw frames from ${from} to ${to}`);
    const key = ctx.key;
    const markets = ctx.lake.facts.topMarkets.filter((m) => m.tokens.length > 0);
    const busiest = markets.find((m) => m.tokens.includes(b.assetId))?.tokens ?? [b.assetId];

    const rows: ScenarioRow[] = [];
    await withBaselineDb(async (db) => {
      const r = await sideBySide(
        3,
        async () => {
          const peak = peakTracker(ctx.server.pid);
          const run = await replay(wsUrl(ctx.server.url, { from, to, speed: '0', api_key: key }), busiest);
          if (run.closeCode !== 1000) throw new Error(`replay closed ${run.closeCode}`);
          // Time to the first frame: the handshake's gate, the subscription and the opening books (a fixed cost).
          return { seconds: run.seconds, rows: run.frames, bytes: run.bytes, peakRss: peak.stop(), extra: { firstFrameMs: run.arrivals[0] ?? Number.NaN } };
        },
        async () => {
          const conn = await db.connect();
          try {
            const { seconds, value } = await timed(async () => {
              const res = await conn.stream(
                `SELECT frame FROM read_parquet(${fileList(rawFiles)}) WHERE list_contains(condition_ids, $cid) AND recv_ts >= $from AND recv_ts < $to ORDER BY recv_ts, seq`,
                { cid: b.conditionId, from: ts(from), to: ts(to) },
              );
              let n = 0;
              for (let chunk = await res.fetchChunk(); chunk && chunk.rowCount > 0; chunk = await res.fetchChunk()) {
                for (const [frame] of chunk.getRows()) if (typeof frame === 'string') n += 1;
              }
              return n;
            });
            return { seconds, rows: value };
          } finally {
            conn.closeSync();
          }
        },
      );
      rows.push({
        scenario: 'replay-ws',
        status: 'ok',
        pmlakeDoes: `ws replay (speed=0) of market ${b.marketId}'s tokens, ${from.slice(0, 10)} to ${to.slice(0, 10)}`,
        baselineDoes: "DuckDB: that market's raw frames of the window in receive order, streamed into JS",
        rows: r.pmlake.rows ?? 0,
        pmlake: r.pmlake,
        baseline: r.baseline,
        ratio: r.ratio,
        targets: [atLeast('frames/s ≥ 1× plain DuckDB', r.ratio, 1)],
        notes: [
          `${r.pmlake.rows} frames to the client, ${r.baseline.rows} raw rows read by DuckDB; first frame after ${Math.round(r.pmlake.extra?.firstFrameMs ?? Number.NaN)} ms (subscription, opening books, first lake batch)`,
        ],
      });
    });

    // Fan-out: 50 clients at once, each its own user (a plan's download rate is per user) and a market of the busiest.
    const clients = 50;
    const keys = await Promise.all(Array.from({ length: clients }, (_, i) => ctx.newKey(`replay-fanout-${i}`)));
    const peak = peakTracker(ctx.server.pid);
    const t0 = process.hrtime.bigint();
    const runs = await Promise.all(
      Array.from({ length: clients }, (_, i) =>
        replay(wsUrl(ctx.server.url, { from, to, speed: '0', api_key: keys[i % keys.length]! }), markets[i % markets.length]?.tokens ?? busiest),
      ),
    );
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const serverPeak = peak.stop();
    const rates = runs.map((x) => x.frames / Math.max(x.seconds, 1e-3));
    const slowest = Math.min(...rates) / median(rates);
    const closed = runs.filter((x) => x.closeCode === 1000).length;
    rows.push({
      scenario: 'replay-ws-fanout',
      status: 'ok',
      pmlakeDoes: `${clients} concurrent ws replays (speed=0) of the window`,
      rows: runs.reduce((s, x) => s + x.frames, 0),
      pmlake: { seconds: wall, samples: [wall], peakRss: serverPeak },
      targets: [
        atMost('server peak RSS ≤ 1.5 GB', serverPeak / 2 ** 30, 1.5),
        atLeast('slowest client ≥ 0.25× median', slowest, 0.25),
        atLeast('all closed 1000', closed / clients, 1),
      ],
      notes: [`frames/s per client: median ${Math.round(median(rates))}, min ${Math.round(Math.min(...rates))}; ${closed}/${clients} closed 1000`],
    });

    // Pacing: arrival against recorded offset / speed, over a stretch of the busiest market's day.
    for (const [speed, seconds] of [
      [60, 600],
      [1, 20],
    ] as const) {
      const conn = await (await ctx.baselineDb()).connect();
      let recorded: number[] = [];
      let start = from;
      try {
        // The market's densest stretch of that length in the window, so the error is measured over many frames.
        const first = await conn.runAndReadAll(
          `SELECT strftime(time_bucket(to_seconds($len::BIGINT), recv_ts), '%Y-%m-%dT%H:%M:%S.000Z') AS t, count(*) AS n
           FROM read_parquet(${fileList(rawFiles)}) WHERE list_contains(condition_ids, $cid) GROUP BY 1 ORDER BY n DESC, t LIMIT 1`,
          { cid: b.conditionId, len: seconds },
        );
        start = String(first.getRowObjectsJS()[0]!.t);
        const end = new Date(Date.parse(start) + seconds * 1000).toISOString();
        const rec = await conn.runAndReadAll(
          `SELECT epoch_ms(recv_ts) AS t FROM read_parquet(${fileList(rawFiles)}) WHERE list_contains(condition_ids, $cid) AND recv_ts >= $from AND recv_ts < $to ORDER BY recv_ts, seq`,
          { cid: b.conditionId, from: ts(start), to: ts(end) },
        );
        recorded = rec.getRowObjectsJS().map((x) => Number(x.t) - Date.parse(start));
        const run = await replay(wsUrl(ctx.server.url, { from: start, to: end, speed: String(speed), api_key: key }), busiest);
        // The opening books come first (one per token); the recorded frames after them.
        const arrivals = run.arrivals.slice(run.arrivals.length - recorded.length);
        const errors = arrivals.map((a, i) => Math.abs(a - recorded[i]! / speed));
        const p99 = errors.length > 0 ? percentile(errors, 99) : Number.NaN;
        rows.push({
          scenario: `replay-ws-pacing-${speed}x`,
          status: errors.length > 0 ? 'ok' : 'n/a',
          pmlakeDoes: `speed=${speed} over ${seconds} s recorded (${recorded.length} frames)`,
          rows: recorded.length,
          pmlake: { seconds: run.seconds, samples: [run.seconds] },
          targets: [atMost('pacing error p99 ≤ 250 ms', p99 / 1000, 0.25)],
          notes: [`error p50 ${Math.round(errors.length ? percentile(errors, 50) : 0)} ms, p99 ${Math.round(p99)} ms; frames received ${run.frames}`],
        });
      } finally {
        conn.closeSync();
      }
    }
    return rows;
  },
};
