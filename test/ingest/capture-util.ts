import fs from 'node:fs';
import path from 'node:path';
import { generate } from '../../sim/generate/index.js';
import { lakeRows } from './oracle.js';
import { files } from '../helpers/lake-files.js';

/**
 * Capture files for the tests, written as docs/capture-format.md states them, from plain data: no code of the ingest.
 */
export type FrameLine = { recv_ms: number; conn: number; frame: string };
export type EventLine = { recv_ms: number; event: string } & Record<string, unknown>;
export type Line = FrameLine | EventLine;

export function captureText(recorder: string, session: string, conns: { conn: number; assets: string[] }[], body: Line[], t0: number): string {
  const lines: unknown[] = [
    { recv_ms: t0, event: 'start', format: 1, recorder, session, url: 'ws://127.0.0.1:1/ws/market' },
    ...conns.map((c) => ({ recv_ms: t0, event: 'assets', conn: c.conn, assets: c.assets })),
    ...body,
  ];
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

export function writeFile(dir: string, name: string, text: string): string {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

/** A generated day of tape: its JSON lines (each one venue message, the frame text) in arrival order. */
export async function generatedFrames(dir: string, opts: { markets: number; rate: number; seed: number }): Promise<string[]> {
  await generate({ markets: opts.markets, days: 1, seed: opts.seed, out: dir, workers: 0, rate: opts.rate, start: '2025-09-20' });
  const ws = path.join(dir, 'ws');
  const file = path.join(ws, fs.readdirSync(ws)[0]!);
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);
}

/** Every token a frame's messages name. */
export function tokensOf(frame: string): string[] {
  const v = JSON.parse(frame) as unknown;
  const msgs = (Array.isArray(v) ? v : [v]) as Record<string, unknown>[];
  return msgs.flatMap((m) => [
    ...(typeof m.asset_id === 'string' ? [m.asset_id] : []),
    ...(Array.isArray(m.price_changes) ? (m.price_changes as { asset_id: string }[]).map((c) => c.asset_id) : []),
  ]);
}

/** The newest venue timestamp of a frame's messages (what the JSON-lines ingest takes as its receive time). */
export function venueMs(frame: string): number {
  const v = JSON.parse(frame) as unknown;
  const msgs = (Array.isArray(v) ? v : [v]) as Record<string, unknown>[];
  return Math.max(...msgs.map((m) => Number(m.timestamp)));
}

/** The lake's raw rows: [receive ms, frame] in the lake's order (receive time, seq). */
export async function rawRows(lake: string): Promise<[number, string][]> {
  const rows = await lakeRows(`SELECT epoch_ms(recv_ts) AS ms, frame FROM read_parquet(${files(lake, 'raw')}) ORDER BY recv_ts, seq`);
  return rows.map((r) => [Number(r.ms), String(r.frame)]);
}

/** All rows of a data set of the current version as sorted JSON text. */
export async function rowsOf(lake: string, dir: string, order: string): Promise<string[]> {
  if (files(lake, dir) === '[]') return [];
  const rows = await lakeRows(`SELECT * FROM read_parquet(${files(lake, dir)}, hive_partitioning = false) ORDER BY ${order}`);
  return rows.map((r) => JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
}

/**
 * Lines of a JSONL day file cut into files of `bucketMs` of time, at multiples of it (a line's time: the newest
 * timestamp so far, as the tape ingest reads a file), each named by its start so names sort by time.
 */
export function splitByTime(
  file: string,
  bucketMs: number,
  timeOf: (o: Record<string, unknown>) => number,
  prefix: string,
): { at: number; lines: string[]; name: string }[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
  let t = 0;
  const out = new Map<number, { at: number; lines: string[]; name: string }>();
  for (const l of lines) {
    t = Math.max(t, timeOf(JSON.parse(l) as Record<string, unknown>));
    const at = Math.floor(t / bucketMs) * bucketMs;
    let c = out.get(at);
    if (!c) out.set(at, (c = { at, lines: [], name: `${new Date(at).toISOString().replace(/[-:]/g, '').slice(0, 15)}Z-${prefix}.jsonl` }));
    c.lines.push(l);
  }
  return [...out.values()];
}

/** Writes chunks into `dir`, returning their paths in time order. */
export function writeChunks(dir: string, list: { at: number; lines: string[]; name: string }[]): string[] {
  fs.mkdirSync(dir, { recursive: true });
  return [...list]
    .sort((a, b) => a.at - b.at)
    .map((c) => {
      const f = path.join(dir, c.name);
      fs.writeFileSync(f, c.lines.join('\n') + '\n');
      return f;
    });
}
