import fs from 'node:fs';
import path from 'node:path';
import { publishMissingIndex } from '../../ingest/raw-index.js';
import { openLakeDb } from '../../src/lake/duckdb.js';
import { currentVersion, SET_NAMES, type SetName } from '../../src/lake/versions.js';
import type { BenchContext, Scenario, ScenarioRow, SideSummary } from '../runner.js';
import { REPO, runToExit } from '../server.js';
import { atLeast, fmtBytes } from '../stats.js';
import { archiveInput } from './ingest-archive.js';
import { wsInput } from './ingest.js';

/**
 * lake-bytes-archive: what the lake stores for an input, against the input's own bytes. The ingest-archive hour
 * (the public archive's v2 Parquet, sim/generate/archive-hour.ts) and the ingest-ws day (websocket JSONL) are
 * each ingested into a fresh lake (bench/ingest-child.ts, as those scenarios do), and the bytes every data set's
 * files take are read from the manifest (`sets.<name>[].bytes`). ratio = input bytes / lake bytes: above 1 the
 * lake is smaller than the input. For the archive hour also after its day got its market index (raw_by_market,
 * what `pmlake compact` adds to an archive backfill), the size the lake settles at. Target: the archive hour's
 * lake ≤ 1.0× the file (ratio ≥ 1), the goal of storing archive frames once. No baseline runs: the input's
 * bytes are the reference, so the baseline column is empty.
 */

type SetBytes = { set: SetName; rows: number; bytes: number; files: number };

function manifestBytes(lakeDir: string): SetBytes[] {
  const v = currentVersion(lakeDir);
  return SET_NAMES.map((set) => {
    const e = v.entries(set);
    return { set, rows: e.reduce((s, x) => s + x.rows, 0), bytes: e.reduce((s, x) => s + x.bytes, 0), files: e.length };
  }).filter((s) => s.files > 0);
}

const side = (seconds: number, bytes: number, rows: number): SideSummary => ({ seconds, samples: [seconds], bytes, rows });
const none: SideSummary = { seconds: NaN, samples: [] };

async function ingestInto(ctx: BenchContext, lake: string, file: string, log: string): Promise<{ seconds: number; levelUpdates: number; peakRss: number }> {
  fs.rmSync(lake, { recursive: true, force: true });
  const r = await runToExit(path.join(REPO, 'bench/ingest-child.ts'), [lake, file], { ...process.env }, path.join(ctx.workDir, log));
  const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { seconds: number; level_updates: number; failed: number };
  if (out.failed > 0) throw new Error(`ingest of ${path.basename(file)} failed; see ${path.join(ctx.workDir, log)}`);
  return { seconds: out.seconds, levelUpdates: out.level_updates, peakRss: r.peakRss };
}

/** One row for the whole lake and one per data set; `input` names the input's bytes for the ratio's text. */
function rows(
  name: string,
  what: string,
  input: { bytes: number; rows: number; kind: string },
  sets: SetBytes[],
  seconds: number,
  target: boolean,
): ScenarioRow[] {
  const total = sets.reduce((s, x) => s + x.bytes, 0);
  const ratio = input.bytes / total;
  const shares = [...sets]
    .sort((a, b) => b.bytes - a.bytes)
    .map((s) => `${s.set} ${fmtBytes(s.bytes)} (${((100 * s.bytes) / total).toFixed(1)} %)`)
    .join(', ');
  return [
    {
      scenario: name,
      status: 'ok',
      pmlakeDoes: `${what}: the bytes the lake's manifest names, every data set`,
      baselineDoes: `none: the ${input.kind}'s own bytes (${input.bytes}) are the reference`,
      rows: input.rows,
      pmlake: { ...side(seconds, total, input.rows), extra: { lake_bytes: total, input_bytes: input.bytes } },
      baseline: none,
      ratio,
      targets: target ? [atLeast(`lake bytes ≤ 1.0× the ${input.kind}'s (ratio ≥ 1)`, ratio, 1)] : [],
      notes: [`${fmtBytes(total)} of lake for ${fmtBytes(input.bytes)} of ${input.kind} (ratio = ${input.kind} bytes / lake bytes)`, `by data set: ${shares}`],
    },
    ...sets.map((s): ScenarioRow => ({
      scenario: `${name} ${s.set}`,
      status: 'ok',
      pmlakeDoes: `${what}: the bytes of the ${s.set} files (${s.files}, ${s.rows} rows)`,
      baselineDoes: `none: ratio = the ${input.kind}'s bytes / these bytes`,
      rows: s.rows,
      pmlake: { ...side(NaN, s.bytes, s.rows), extra: { set_bytes: s.bytes, set_files: s.files, input_bytes: input.bytes } },
      baseline: none,
      ratio: input.bytes / s.bytes,
      targets: [],
    })),
  ];
}

export function lakeBytesArchive(markets: number): Scenario {
  return {
    name: 'lake-bytes-archive',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const out: ScenarioRow[] = [];
      const hour = await archiveInput(ctx);
      const hourBytes = fs.statSync(hour.file).size;
      const lake = path.join(ctx.workDir, 'lake-bytes-archive');
      try {
        const r = await ingestInto(ctx, lake, hour.file, 'lake-bytes-archive.log');
        const input = { bytes: hourBytes, rows: hour.rows, kind: 'archive file' };
        out.push(...rows('lake-bytes-archive', `runIngest of one archive hour (${hour.rows} rows)`, input, manifestBytes(lake), r.seconds, true));
        // The day's market index, as the compaction after a backfill writes it: a second copy of the frames.
        const db = await openLakeDb({ allowedDirectories: [lake], threads: 2, memoryLimit: '2GB' });
        const conn = await db.connect();
        try {
          await publishMissingIndex(conn, lake);
        } finally {
          conn.closeSync();
          db.closeSync();
        }
        const indexed = manifestBytes(lake);
        const total = indexed.reduce((s, x) => s + x.bytes, 0);
        const rbm = indexed.find((s) => s.set === 'raw_by_market');
        out.push({
          scenario: 'lake-bytes-archive +raw_by_market',
          status: 'ok',
          pmlakeDoes: 'the same lake once its day has its market index (pmlake compact): every data set',
          baselineDoes: `none: the archive file's own bytes (${hourBytes}) are the reference`,
          rows: hour.rows,
          pmlake: { ...side(NaN, total, hour.rows), extra: { lake_bytes: total, raw_by_market_bytes: rbm?.bytes ?? 0, input_bytes: hourBytes } },
          baseline: none,
          ratio: hourBytes / total,
          targets: [atLeast("lake bytes ≤ 1.0× the archive file's, indexed (ratio ≥ 1)", hourBytes / total, 1)],
          notes: [`raw_by_market ${fmtBytes(rbm?.bytes ?? 0)} added; ${fmtBytes(total)} of lake for ${fmtBytes(hourBytes)} of archive file`],
        });
      } finally {
        fs.rmSync(lake, { recursive: true, force: true });
      }
      const ws = await wsInput(ctx, markets);
      const wsBytes = fs.statSync(ws).size;
      const wsLake = path.join(ctx.workDir, 'lake-bytes-ws');
      try {
        const r = await ingestInto(ctx, wsLake, ws, 'lake-bytes-ws.log');
        const input = { bytes: wsBytes, rows: r.levelUpdates, kind: 'JSON text' };
        out.push(
          ...rows('lake-bytes-ws', `runIngest of one websocket JSONL day (${r.levelUpdates} level updates)`, input, manifestBytes(wsLake), r.seconds, false),
        );
      } finally {
        fs.rmSync(wsLake, { recursive: true, force: true });
      }
      return out;
    },
  };
}
