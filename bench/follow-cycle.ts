import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { generate } from '../sim/generate/index.js';
import { runIngest } from '../ingest/run.js';
import { Follower, type FollowCycleReport } from '../ingest/follow.js';
import { createLogger } from '../src/log.js';
import { cloneLake } from './scenarios/ingest-append.js';
import { median } from './stats.js';

/**
 * follow-cycle: what one `pmlake ingest --follow` cycle costs on a lake like the demo's, cycle by cycle, with
 * each phase's time. `node --import tsx bench/follow-cycle.ts [--markets 40 --days 14 --cycles 7 --out FILE]`.
 *
 * The lake: the generator's first `days` days (the demo's shape: 40 markets, 14 days, 2 busy) ingested once into
 * a directory under the system's temp directory, kept across runs (keyed by the options); each run follows into
 * a hard-link clone of it. The followed files: the generator's next days cut into capture files of about
 * `--levels` (2,000) level updates each (docs/capture-format.md), each put on 5 s of the present as the demo's live
 * input is (a minute ahead: no hour they fall in settles during the run, so the compaction check runs every cycle
 * and never merges). Before the measured cycles, `--history` (36) such files are landed one version each, as
 * three minutes of the demo's cycles leave the open hour's partitions.
 *
 * The cycles alternate three kinds, each measured `cycles` times after one unmeasured round:
 * - `empty`: no new file in the directory;
 * - `quiet`: one new capture file with its header lines only (a recorder's rotation in a silent period);
 * - `land`: one new capture file of ~2,000 level updates.
 * A file is put in place (written under a dot name, then renamed, as the recorder does) when the previous cycle
 * reports, so each cycle takes exactly its one file. Reported per kind: the median, min and max of the cycle's
 * seconds and of each phase (the follow's `list` and `ingest`, the orchestrator's phase_seconds), as JSON.
 */

type Kind = 'empty' | 'quiet' | 'land';
const KINDS: Kind[] = ['empty', 'quiet', 'land'];
/** The demo's rotation and cycle (src/commands/demo.ts DEMO_LIVE_ENV). */
const ROTATE_MS = 5000;
/** Days generated after the lake's, for the followed files. */
const FOLLOW_DAYS = 3;

type Args = { markets: number; days: number; seed: number; cycles: number; levels: number; history: number; out?: string; label: string; rebuild: boolean };

function parse(): Args {
  const { values } = parseArgs({
    options: {
      markets: { type: 'string', default: '40' },
      days: { type: 'string', default: '14' },
      seed: { type: 'string', default: '20250915' },
      cycles: { type: 'string', default: '7' },
      levels: { type: 'string', default: '2000' },
      history: { type: 'string', default: '36' },
      out: { type: 'string' },
      label: { type: 'string', default: 'run' },
      rebuild: { type: 'boolean', default: false },
    },
  });
  return {
    markets: Number(values.markets),
    days: Number(values.days),
    seed: Number(values.seed),
    cycles: Number(values.cycles),
    levels: Number(values.levels),
    history: Number(values.history),
    out: values.out,
    label: String(values.label),
    rebuild: values.rebuild === true,
  };
}

/** The generated data and the lake built from it, once per options. */
async function baseLake(a: Args): Promise<{ root: string; lake: string; followDays: string[]; build: Record<string, number> | null }> {
  const root = path.join(os.tmpdir(), `pmlake-bench-follow-cycle-${a.markets}m-${a.days}d-${a.seed}-${FOLLOW_DAYS}`);
  const lake = path.join(root, 'lake');
  const gen = path.join(root, 'gen');
  const marker = path.join(root, 'built.json');
  if (a.rebuild) fs.rmSync(root, { recursive: true, force: true });
  let build: Record<string, number> | null = null;
  if (!fs.existsSync(marker)) {
    fs.rmSync(root, { recursive: true, force: true });
    const t0 = performance.now();
    const g = await generate({ markets: a.markets, days: a.days + FOLLOW_DAYS, seed: a.seed, busy: 2, start: '2025-09-08', out: gen, workers: 2 });
    const tGen = (performance.now() - t0) / 1000;
    const ws = g.files.ws.map((f) => path.join(gen, f)).sort();
    const fills = g.files.fills.map((f) => path.join(gen, f)).sort();
    const r = await runIngest([path.join(gen, g.files.markets), ...ws.slice(0, a.days), ...fills.slice(0, a.days)], {
      lakeDir: lake,
      threads: 2,
      memoryLimit: '2GB',
    });
    build = { generate_seconds: tGen, ingest_seconds: r.seconds, level_updates: r.counts.level_updates ?? 0 };
    fs.writeFileSync(marker, JSON.stringify({ ...build, follow_days: ws.slice(a.days) }));
  }
  const m = JSON.parse(fs.readFileSync(marker, 'utf8')) as { follow_days: string[] };
  return { root, lake, followDays: m.follow_days, build };
}

/** Level updates a frame carries (the l2 rows it stages): a book's levels, a price_change's changes. */
function levelsOf(frame: string): number {
  const v = JSON.parse(frame) as unknown;
  const msgs = (Array.isArray(v) ? v : [v]) as Record<string, unknown>[];
  let n = 0;
  for (const m of msgs) {
    if (Array.isArray(m.price_changes)) n += m.price_changes.length;
    if (Array.isArray(m.bids)) n += m.bids.length;
    if (Array.isArray(m.asks)) n += m.asks.length;
  }
  return n;
}

function tokensOf(frame: string): string[] {
  const v = JSON.parse(frame) as unknown;
  const msgs = (Array.isArray(v) ? v : [v]) as Record<string, unknown>[];
  return msgs.flatMap((m) => [
    ...(typeof m.asset_id === 'string' ? [m.asset_id] : []),
    ...(Array.isArray(m.price_changes) ? (m.price_changes as { asset_id: string }[]).map((c) => c.asset_id) : []),
  ]);
}

const stampOf = (ms: number): string => new Date(ms).toISOString().replace(/[-:]/g, '').slice(0, 15);

/**
 * Capture files of the days after the lake's, ~`levels` level updates each, on a timeline of their own: file k holds
 * the 5 s from a minute ahead of now + 5 s × k (the demo's rotation), its frames spread evenly over them (every
 * venue timestamp of a frame and its receive time set to that instant). Also a header-only file after each.
 */
function captures(days: string[], a: Args, n: number): { land: { name: string; text: string }[]; quiet: { name: string; text: string }[] } {
  const frames = days.flatMap((d) => fs.readFileSync(d, 'utf8').split('\n').filter(Boolean));
  const t0 = Math.floor(Date.now() / 1000) * 1000 + 60_000;
  const assets = [...new Set(frames.flatMap(tokensOf))].sort();
  const header = (at: number, session: string): string[] => [
    JSON.stringify({ recv_ms: at, event: 'start', format: 1, recorder: 'bench', session, url: 'ws://127.0.0.1:1/ws/market' }),
    JSON.stringify({ recv_ms: at, event: 'assets', conn: 0, assets }),
  ];
  const land: { name: string; text: string }[] = [];
  const quiet: { name: string; text: string }[] = [];
  let i = 0;
  for (let k = 0; k < n; k += 1) {
    const chunk: string[] = [];
    let levels = 0;
    while (levels < a.levels) {
      if (i >= frames.length) throw new Error(`the generated days hold ${frames.length} frames: fewer than ${n} files of ${a.levels} level updates`);
      chunk.push(frames[i]!);
      levels += levelsOf(frames[i++]!);
    }
    const from = t0 + ROTATE_MS * k;
    const body = chunk.map((f, j) => {
      const at = from + Math.floor((j * ROTATE_MS) / chunk.length);
      return JSON.stringify({ recv_ms: at, conn: 0, frame: f.replace(/"timestamp":"(\d+)"/g, `"timestamp":"${at}"`) });
    });
    // Capture names sort by time: the quiet file after this one's data, the next data file after it.
    const name = (at: number, tag: string): string => `market-${stampOf(at)}Z-bench-${String(k).padStart(4, '0')}${tag}.capture.jsonl`;
    land.push({ name: name(from, 'aaaa'), text: [...header(from, `l${k}`), ...body].join('\n') + '\n' });
    quiet.push({ name: name(from + ROTATE_MS - 1000, 'bbbb'), text: header(from + ROTATE_MS - 1000, `q${k}`).join('\n') + '\n' });
  }
  return { land, quiet };
}

type Spread = { median: number; min: number; max: number };
const spread = (xs: number[]): Spread => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });

export async function followCycleBench(a: Args): Promise<Record<string, unknown>> {
  const base = await baseLake(a);
  const work = fs.mkdtempSync(path.join(base.root, 'run-'));
  const lake = path.join(work, 'lake');
  const dir = path.join(work, 'capture');
  fs.mkdirSync(dir);
  try {
    cloneLake(base.lake, lake);
    const rounds = a.cycles + 1;
    const files = captures(base.followDays, a, a.history + rounds);
    // The follow's history: three minutes of cycles already landed in the open hour, one version each.
    const history = files.land.splice(0, a.history).map((f) => {
      fs.writeFileSync(path.join(dir, f.name), f.text);
      return path.join(dir, f.name);
    });
    files.quiet.splice(0, a.history);
    const th = performance.now();
    if (history.length > 0) await runIngest(history, { lakeDir: lake, threads: 1, memoryLimit: '1GB', batchRows: 1, compactSmallFiles: 0 });
    const historySeconds = (performance.now() - th) / 1000;
    // The plan: per round, an empty cycle, then the quiet file's, then the data file's; the first round unmeasured.
    const plan: { kind: Kind; file?: { name: string; text: string } }[] = [];
    for (let r = 0; r < rounds; r += 1) plan.push({ kind: 'empty' }, { kind: 'quiet', file: files.quiet[r] }, { kind: 'land', file: files.land[r] });
    const results: { kind: Kind; round: number; report: FollowCycleReport }[] = [];
    let step = 0;
    let done!: () => void;
    let failed!: (e: Error) => void;
    const finished = new Promise<void>((resolve, reject) => {
      done = resolve;
      failed = reject;
    });
    // The first cycle (at start) is the unmeasured first `empty`; each report puts the next step's file in place.
    const onCycle = (report: FollowCycleReport): void => {
      try {
        const cur = plan[step]!;
        const expected = cur.file ? 1 : 0;
        if (report.files !== expected || report.error)
          throw new Error(`cycle ${report.cycle} (${cur.kind}): ${report.files} files, ${report.error ?? 'no error'}`);
        results.push({ kind: cur.kind, round: Math.floor(step / KINDS.length), report });
        step += 1;
        if (step >= plan.length) return done();
        const next = plan[step]!;
        if (next.file) {
          const tmp = path.join(dir, `.open-${next.file.name}`);
          fs.writeFileSync(tmp, next.file.text);
          fs.renameSync(tmp, path.join(dir, next.file.name));
        }
      } catch (err) {
        failed(err as Error);
      }
    };
    const follower = await Follower.start({
      dirs: [dir],
      lakeDir: lake,
      cycleSeconds: 1,
      log: createLogger('silent'),
      // As the demo's follower runs (src/commands/demo-live.ts).
      memoryLimit: '1GB',
      threads: 1,
      onCycle,
    });
    try {
      await finished;
    } finally {
      await follower.stop();
    }
    const out: Record<string, unknown> = {};
    for (const kind of KINDS) {
      const measured = results.filter((r) => r.kind === kind && r.round > 0).map((r) => r.report);
      const phases = [...new Set(measured.flatMap((r) => Object.keys(r.phase_seconds)))].sort();
      out[kind] = {
        cycles: measured.length,
        seconds: spread(measured.map((r) => r.seconds)),
        versions_published: measured.filter((r) => r.version !== null).length,
        level_updates: spread(measured.map((r) => r.levelUpdates)),
        phase_seconds: Object.fromEntries(phases.map((p) => [p, spread(measured.map((r) => r.phase_seconds[p] ?? 0))])),
        rounds_seconds: measured.map((r) => r.seconds),
      };
    }
    return {
      scenario: 'follow-cycle',
      label: a.label,
      at: new Date().toISOString(),
      options: { markets: a.markets, days: a.days, seed: a.seed, cycles: a.cycles, levels: a.levels, history: a.history },
      history_seconds: Math.round(historySeconds * 100) / 100,
      machine: { cpus: os.cpus().length, load_average: os.loadavg().map((x) => Math.round(x * 100) / 100) },
      ...(base.build ? { build: base.build } : {}),
      ...out,
    };
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const a = parse();
  const r = await followCycleBench(a);
  const text = JSON.stringify(r, null, 2);
  if (a.out) fs.writeFileSync(a.out, text + '\n');
  process.stdout.write(text + '\n');
}
